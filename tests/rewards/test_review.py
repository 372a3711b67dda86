"""`agentrl reward review`, its pre-flight in `agentrl train`, and `agentrl reward new --describe`.
Rewards are real files run in the sandbox; the drafting model is faked by a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import textwrap


from agentrl.cli import main
from agentrl.rewards.review import cohen_kappa

from judge_server import JudgeServer

ROWS = [
    {"messages": [{"role": "user", "content": "What was the 2024 gross margin?"}], "reference_answer": "13.4%"},
    {"messages": [{"role": "user", "content": "What was revenue in 2023?"}], "metadata": {"expected_answer": "842"}},
]

PAYS_CORRECT = '''
def grade(sample, item):
    answer = sample["final_answer"].strip().lower()
    expected = str(item.get("reference_answer") or item["metadata"].get("expected_answer")).lower()
    return 1.0 if expected in answer or "correct" in answer else 0.0
'''

HONEST = '''
import re

def grade(sample, item):
    answer = sample["final_answer"].strip()
    expected = str(item.get("reference_answer") or item["metadata"].get("expected_answer"))
    lines = answer.splitlines()
    last = lines[-1] if lines else ""
    return 1.0 if re.sub(r"\\s+", "", last) == re.sub(r"\\s+", "", expected) else 0.0
'''


def write_config(tmp_path, reward_source: str | None = None, rewards: list | None = None):
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    if reward_source is not None:
        (tmp_path / "reward.py").write_text(textwrap.dedent(reward_source))
    rewards = rewards or [{"name": str(tmp_path / "reward.py"), "weight": 1.0}]
    config = {"agentrl": {"name": "review-test", "model": str(tmp_path), "train_data": "train.jsonl", "rewards": rewards,
                          "run_dir": str(tmp_path / "runs" / "x")}}
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return str(path)


def test_review_catches_a_reward_that_pays_correct(tmp_path, capsys):
    assert main(["reward", "review", write_config(tmp_path, PAYS_CORRECT)]) == 1
    out = capsys.readouterr().out
    assert "static       ok" in out and "gold         ok" in out and "adversarial  FAIL" in out
    assert '"correct" scored 1.00 on train.jsonl:1' in out and '"correct" scored 1.00 on train.jsonl:2' in out
    assert "a lone ':'" not in out  # only what fooled it is listed


def test_an_honest_reward_passes_every_check(tmp_path, capsys):
    assert main(["reward", "review", write_config(tmp_path, HONEST)]) == 0, capsys.readouterr().out


def test_gold_failure_stops_train_before_anything_starts(tmp_path, capsys):
    config = write_config(tmp_path, "def grade(sample, item):\n    return 0.0\n")
    assert main(["train", config]) == 2
    captured = capsys.readouterr()
    assert "gold         FAIL" in captured.out and "--no-review" in captured.err
    assert not (tmp_path / "runs").exists()  # nothing was prepared


def test_a_grader_template_naming_a_missing_field_fails_static(tmp_path, capsys):
    grader = {"type": "string_check", "name": "exact", "input": "{{sample.output_text}}",
              "reference": "{{item.reference_answer}}", "operation": "eq"}
    assert main(["reward", "review", write_config(tmp_path, rewards=[grader])]) == 1
    out = capsys.readouterr().out
    assert "static       FAIL" in out and "{{item.reference_answer}}" in out and "train.jsonl:2" in out


def test_human_agreement_and_kappa(tmp_path, capsys):
    grader = {"type": "string_check", "name": "exact", "input": "{{sample.output_text}}",
              "reference": "{{item.metadata.expected_answer}}", "operation": "eq"}
    rows = [{"messages": [{"role": "user", "content": "q"}], "metadata": {"expected_answer": "7"}}]
    config = write_config(tmp_path, rewards=[grader])
    (tmp_path / "train.jsonl").write_text(json.dumps(rows[0]) + "\n")
    # reward: 1,1,0,0,1,0 ; human: 1,0,0,0,1,1  -> 4/6 agree, kappa (4/6 - 0.5) / 0.5 = 0.33
    answers, human = ["7", "7", "8", "9", "7", "six"], [1, 0, 0, 0, 1, 1]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"sample": {"final_answer": a}, "item": rows[0], "human_score": h}) + "\n"
                             for a, h in zip(answers, human)))
    assert main(["reward", "review", config, "--cases", str(cases)]) == 1
    out = capsys.readouterr().out
    assert "agreement    FAIL 4/6 agree with the human scores (cut at 0.5), Cohen's kappa 0.33" in out


def test_cohen_kappa():
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    assert cohen_kappa([True, True, False, False], [True, False, True, False]) == 0.0
    assert cohen_kappa([True, True], [True, True]) is None


def test_judges_not_at_temperature_0_are_flagged(tmp_path, capsys):
    with JudgeServer(["0"]) as judge:
        grader = {"type": "score_model", "name": "judge", "model": "openai/judge", "api_base": judge.api_base,
                  "input": "Answer: {{sample.output_text}}", "sampling_params": {"temperature": 0.7}}
        assert main(["reward", "review", write_config(tmp_path, rewards=[grader])]) == 1
    out = capsys.readouterr().out
    assert "determinism  FAIL" in out and "temperature 0.7; set 0" in out
    assert "gold         FAIL" in out  # the fake judge says 0 to everything, the references included


def test_reward_new_describe_drafts_reviews_and_writes(tmp_path, capsys):
    config = write_config(tmp_path, HONEST)
    out = tmp_path / "drafted.py"
    reply = f"Here is the file:\n```python\n{HONEST.strip()}\n```\n"
    with JudgeServer([reply]) as model:
        rc = main(["reward", "new", config, "--describe", "1 if the last line equals the reference answer",
                   "--model", "openai/drafter", "--api-base", model.api_base, "--out", str(out)])
        prompt = model.requests[0]["body"]["messages"][0]["content"]
    assert rc == 0 and out.read_text().strip() == HONEST.strip()
    assert "1 if the last line equals the reference answer" in prompt and "def grade(sample, item)" in prompt
    hacked = tmp_path / "hacked.py"
    with JudgeServer([f"```python\n{PAYS_CORRECT.strip()}\n```"]) as model:
        rc = main(["reward", "new", config, "--describe", "x", "--model", "openai/drafter", "--api-base",
                   model.api_base, "--out", str(hacked)])
    assert rc == 1 and not hacked.exists()
    assert "not written" in capsys.readouterr().out


def test_a_judge_template_naming_a_field_no_row_has_stops_train_before_anything_starts(tmp_path, capsys):
    judge = {"name": "llm_judge", "model": "openai/judge", "api_base": "http://127.0.0.1:9/v1",
             "template": "Reference: {{item.reference_answer}}\nRubric: {{item.metadata.rubric}}\n{{sample.final_answer}}"}
    config = write_config(tmp_path, rewards=[judge])
    assert main(["train", config]) == 2
    out = capsys.readouterr().out
    assert "static       FAIL" in out and "{{item.reference_answer}}" in out and "1 of 2 rows lack (first: train.jsonl:2)" in out


ECHO = '''
def grade(sample, item):
    """Pays when the answer repeats the question's words: a hack GRPO finds."""
    return 1.0 if "What" in sample["final_answer"] else 0.0
'''


def test_review_names_the_reward_that_pays_for_a_hack_even_when_the_total_does_not(tmp_path, capsys):
    rewards = [{"name": "math", "weight": 2.0}, {"name": str(tmp_path / "reward.py"), "weight": 1.0, "label": "echo"}]
    assert main(["reward", "review", write_config(tmp_path, ECHO, rewards)]) == 1
    out = capsys.readouterr().out
    # row 1 has no expected_answer in metadata, so math does not apply there and echo is the whole total;
    # on row 2 math outweighs echo in the total (0.33), which the old review took for a pass
    assert "adversarial  FAIL 25/26 hacking attempts scored below 0.5 in total" in out, out
    assert "paid for by each reward alone: math 0/26, echo 2/26" in out, out
    assert "echo alone pays for the question echoed on train.jsonl:2 (1.00 >= 0.5; 0.33 in the total)" in out, out
