"""OpenAI grader dicts as rewards. The judge model is faked (a loopback OpenAI-compatible server whose "model"
applies the tutorial's rule to the prompt it receives); everything else is real: litellm, the sandbox,
rapidfuzz / sacrebleu / rouge-score, an HTTP grader endpoint on loopback."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentrl.rewards import RewardConfigError, RewardSet, Unscorable, load_reward
from agentrl.rewards.gradertemplate import check_rows

from judge_server import JudgeServer
from tutorial_grader import CASES, SOURCE, rule

PROMPT = "Reference answer: {{item.reference_answer}}\nCandidate answer: {{sample.output_text}}"


def tutorial_judge(body: dict) -> str:
    """The fake judge: reads the rendered prompt and applies the tutorial's rule, like a good model would."""
    text = body["messages"][-1]["content"]
    ref = re.search(r"Reference answer: (.*)", text).group(1)
    ans = re.search(r"Candidate answer: (.*)", text).group(1)
    return f"The candidate is compared with the reference.\n{{\"result\": {rule(ref, ans)}}}"


def score_model(api_base: str, **extra) -> dict:
    return {"type": "score_model", "name": "tutorial_judge", "model": "openai/judge", "api_base": api_base,
            "input": [{"role": "system", "content": "Grade numeric answers: 1 exact up to format, 0.5 rounding, else 0."},
                      {"role": "user", "content": PROMPT}],
            "range": [0, 1], "pass_threshold": 0.5, "sampling_params": {"temperature": 0, "max_tokens": 100}, **extra}


def item(ref: str) -> dict:
    return {"messages": [{"role": "user", "content": "What was the gross margin?"}], "reference_answer": ref}


def test_tutorial_cases_through_a_score_model_grader_against_a_loopback_judge():
    with JudgeServer([tutorial_judge]) as judge:
        reward = load_reward(score_model(judge.api_base))
        scores = [reward({"final_answer": ans}, item(ref)) for ref, ans, _ in CASES]
        assert scores == [want for _, _, want in CASES] == [1.0, 1.0, 0.5, 0.0]
        assert reward.pass_threshold == 0.5
        sent = judge.requests[0]["body"]
        assert sent["temperature"] == 0 and sent["max_tokens"] == 100
        assert "Reference answer: 13.4%\nCandidate answer: 13.4%" in sent["messages"][1]["content"]


def test_tutorial_cases_through_a_sandboxed_python_grader(tmp_path):
    spec = {"type": "python", "name": "tutorial", "source": SOURCE, "pass_threshold": 0.5}
    path = tmp_path / "grader.json"
    path.write_text(json.dumps(spec))
    for reward in (load_reward(spec), load_reward(str(path))):
        assert reward.sandboxed
        assert [reward({"final_answer": a}, item(r)) for r, a, _ in CASES] == [1.0, 1.0, 0.5, 0.0]


def test_a_config_reward_entry_may_hold_a_grader():
    rewards = RewardSet.from_config([
        {"type": "string_check", "name": "exact", "input": "{{sample.output_text}}",
         "reference": "{{item.reference_answer}}", "operation": "eq", "weight": 2},
        {"grader": {"type": "text_similarity", "input": "{{sample.output_text}}", "reference": "{{item.reference_answer}}",
                    "evaluation_metric": "fuzzy_match"}, "weight": 0, "label": "fuzzy"},
    ])
    result = rewards.score({"final_answer": "13.4%"}, item("13.4%"))
    assert result.score == 1.0 and result.components == {"exact": 1.0, "fuzzy": 1.0}


@pytest.mark.parametrize("metric, answer, low, high", [
    ("fuzzy_match", "the gross margin was 13.4%", 0.5, 0.9),
    ("bleu", "the gross margin was 13.4 percent", 0.3, 0.9),
    ("gleu", "the gross margin was 13.4 percent", 0.3, 0.9),
    ("rouge_1", "margin was 13.4 percent", 0.5, 0.95),
    ("rouge_l", "the gross margin was 13.4 percent", 0.6, 1.0),
])
def test_text_similarity_metrics(metric, answer, low, high):
    reward = load_reward({"type": "text_similarity", "input": "{{sample.output_text}}", "evaluation_metric": metric,
                          "reference": "{{item.reference_answer}}"})
    ref = item("the gross margin was 13.4 percent in 2024")
    assert low <= reward({"final_answer": answer}, ref) <= high
    assert reward({"final_answer": "completely unrelated words here"}, ref) < low
    assert reward({"final_answer": ref["reference_answer"]}, ref) == pytest.approx(1.0)


def test_string_check_operations():
    def check(op, answer, ref):
        return load_reward({"type": "string_check", "input": "{{sample.output_text}}", "reference": ref,
                            "operation": op})({"final_answer": answer}, item("x"))

    assert check("eq", "Paris", "Paris") == 1.0 and check("eq", "paris", "Paris") == 0.0
    assert check("ne", "Rome", "Paris") == 1.0
    assert check("like", "It is Paris.", "Paris") == 1.0 and check("ilike", "It is PARIS.", "paris") == 1.0


def test_multi_formula_is_evaluated_safely():
    spec = {"type": "multi", "name": "combo", "calculate_output": "0.75 * exact + 0.25 * fuzzy",
            "graders": {"exact": {"type": "string_check", "input": "{{sample.output_text}}",
                                  "reference": "{{item.reference_answer}}", "operation": "eq"},
                        "fuzzy": {"type": "text_similarity", "input": "{{sample.output_text}}",
                                  "reference": "{{item.reference_answer}}", "evaluation_metric": "fuzzy_match"}}}
    reward = load_reward(spec)
    assert reward({"final_answer": "13.4%"}, item("13.4%")) == 1.0
    assert 0 < reward({"final_answer": "13.5%"}, item("13.4%")) < 0.25
    with pytest.raises(RewardConfigError, match="calculate_output"):
        load_reward({**spec, "calculate_output": "__import__('os').system('true')"})
    with pytest.raises(RewardConfigError, match="calculate_output"):
        load_reward({**spec, "calculate_output": "exact + missing"})


def test_range_is_normalised_and_out_of_range_is_unscorable():
    with JudgeServer(["Score: 7", "Score: 12"]) as judge:
        reward = load_reward({**score_model(judge.api_base), "range": [0, 10], "pass_threshold": 6})
        assert reward.pass_threshold == pytest.approx(0.6)
        assert reward({"final_answer": "x"}, item("y")) == pytest.approx(0.7)
        with pytest.raises(Unscorable, match="outside the grader's range"):
            reward({"final_answer": "z"}, item("y"))


def test_label_model():
    with JudgeServer(["After thought, the label is: correct", "incorrect", "no idea"]) as judge:
        reward = load_reward({"type": "label_model", "model": "openai/judge", "api_base": judge.api_base,
                              "input": [{"role": "user", "content": PROMPT}], "labels": ["correct", "incorrect"],
                              "passing_labels": ["correct"]})
        assert reward({"final_answer": "a"}, item("a")) == 1.0
        assert reward({"final_answer": "b"}, item("a")) == 0.0
        with pytest.raises(Unscorable, match="none of the labels"):
            reward({"final_answer": "c"}, item("a"))


def test_missing_fields_fail_at_load_time_never_render_none(monkeypatch):
    with pytest.raises(RewardConfigError, match=r"sample.answer\}\} does not exist"):
        load_reward({"type": "string_check", "input": "{{sample.answer}}", "reference": "x", "operation": "eq"})
    with pytest.raises(RewardConfigError, match="not item.<field> or sample.<field>"):
        load_reward({"type": "string_check", "input": "{{answer}}", "reference": "x", "operation": "eq"})
    reward = load_reward({"type": "string_check", "input": "{{sample.output_text}}",
                          "reference": "{{item.reference_answer}}", "operation": "eq"})
    rows = [("train.jsonl:1", item("13.4%")), ("train.jsonl:2", {"messages": [], "metadata": {"expected_answer": "1"}})]
    with pytest.raises(RewardConfigError, match="1 of 2 rows lack.*train.jsonl:2"):
        check_rows(reward.grader.item_fields, rows, "grader")
    check_rows(reward.grader.item_fields, [("a:1", {"metadata": {"reference_answer": "1"}})], "grader")  # metadata counts
    with pytest.raises(Unscorable, match="no field 'reference_answer'"):
        reward({"final_answer": "x"}, {"messages": []})
    with pytest.raises(RewardConfigError, match="api_key_env 'NO_SUCH_KEY' is not set"):
        load_reward({**score_model("http://127.0.0.1:9/v1"), "api_key_env": "NO_SUCH_KEY"})
    with pytest.raises(RewardConfigError, match="meteor.*WordNet"):
        load_reward({"type": "text_similarity", "input": "{{sample.output_text}}", "reference": "x",
                     "evaluation_metric": "meteor"})


def test_python_grader_that_does_not_compile_under_the_sandbox_policy_fails_at_load():
    with pytest.raises(RewardConfigError, match="does not compile under the sandbox's policy"):
        load_reward({"type": "python", "source": "import os\ndef grade(sample, item):\n    return os.system('x')\n"})


def test_score_model_api_key_env_reaches_the_judge(monkeypatch):
    monkeypatch.setenv("LOCAL_JUDGE_KEY", "k-123")
    with JudgeServer(["1"]) as judge:
        load_reward({**score_model(judge.api_base), "api_key_env": "LOCAL_JUDGE_KEY"})({"final_answer": "a"}, item("a"))
        assert judge.requests[0]["headers"]["authorization"] == "Bearer k-123"


class _GraderEndpoint(BaseHTTPRequestHandler):
    statuses: list = []
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).seen.append(body)
        status = type(self).statuses.pop(0) if type(self).statuses else 200
        ok = body["sample"]["output_text"] == body["item"]["reference_answer"]
        data = json.dumps({"score": 1.0 if ok else 0.0}).encode()
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_endpoint_grader_retries_5xx_then_reads_the_score():
    handler = type("H", (_GraderEndpoint,), {"statuses": [503, 502], "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/grade"
        reward = load_reward({"type": "endpoint", "url": url})
        assert reward({"final_answer": "13.4%", "rollout_id": "r-9"}, item("13.4%")) == 1.0
        assert len(handler.seen) == 3 and handler.seen[-1]["rollout_id"] == "r-9"
        handler.statuses = [500] * 4
        with pytest.raises(Unscorable, match="HTTP 500 after 3 retries"):
            reward({"final_answer": "x"}, item("13.4%"))
    finally:
        server.shutdown()
        server.server_close()


def test_pass_threshold_is_recorded_per_scored_sample():
    rewards = RewardSet.from_config([
        {"type": "text_similarity", "name": "fuzzy", "input": "{{sample.output_text}}", "pass_threshold": 0.9,
         "reference": "{{item.reference_answer}}", "evaluation_metric": "fuzzy_match"}])
    assert rewards.score({"final_answer": "13.4%"}, item("13.4%")).passed == {"fuzzy": True}
    assert rewards.score({"final_answer": "13%"}, item("13.4%")).passed == {"fuzzy": False}
