"""``tool_choice`` as the OpenAI API means it, through the real OpenAI client against a rollout's endpoint run by the
agent loop on local engines (scripted replies on the demo model's tokenizer): "none" reads no call, "required" and a
named function get a call or a clear refusal, and the token audit shows that only the kept sample is trained."""

from __future__ import annotations

import json

import pytest
import yaml
from test_program import AGENT, _check_exact, _config, _demo, _run  # tests/workflow/test_program.py

AGENT_FILE = '''
import json, os, sys
from openai import APIStatusError, AsyncOpenAI
sys.path.insert(0, %(agents)r)
from openai_calculator import TOOLS

async def run(row, base_url, api_key):
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    choice = json.loads(os.environ["TOOL_CHOICE"])
    tools = None if os.environ.get("NO_TOOLS") else TOOLS
    try:
        r = await client.chat.completions.create(model="policy", messages=row["messages"], tools=tools,
                                                 tool_choice=choice)
        m = r.choices[0].message
        seen = {"finish": r.choices[0].finish_reason, "content": m.content,
                "calls": [c.function.name for c in m.tool_calls or []]}
    except APIStatusError as exc:
        seen = {"status": exc.status_code, "error": exc.body}
    with open(os.environ["SEEN"], "a") as fh:
        fh.write(json.dumps(seen) + "\\n")
    return seen.get("content") or ""
'''


def _go(tmp_path, monkeypatch, engine, choice, rows=3, tools=True, missed=None):
    agent = tmp_path / "choosy.py"
    agent.write_text(AGENT_FILE % {"agents": str(AGENT.parent)})
    seen = tmp_path / "seen.jsonl"
    monkeypatch.setenv("TOOL_CHOICE", json.dumps(choice))
    monkeypatch.setenv("SEEN", str(seen))
    if not tools:
        monkeypatch.setenv("NO_TOOLS", "1")
    config = _config(tmp_path, str(agent), rows=rows)
    if missed:
        settings = yaml.safe_load(config.read_text())
        settings["agentrl"]["agent"]["tool_choice_missed"] = missed
        config.write_text(yaml.safe_dump(settings))
    records, audit, _ = _run(config, engine, monkeypatch, tmp_path)
    return records, audit, [json.loads(line) for line in seen.read_text().splitlines()]


@pytest.fixture
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_demo()["model_path"])


def _replies(scripted, tok, replies):
    """An engine that says ``replies(n)`` the n-th time it is given a prompt (rollouts run concurrently)."""

    class Engine(scripted):
        seen: dict = {}

        async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
            from verl.workers.rollout.replica import TokenOutput

            self.calls += 1
            n = self.seen[tuple(prompt_ids)] = self.seen.get(tuple(prompt_ids), 0) + 1
            ids = self.tok.encode(replies(n) + "<|im_end|>", add_special_tokens=False)
            return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")

    return Engine(tok)


def _call(name="add", a=1, b=2):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"a": a, "b": b}}) + "\n</tool_call>"


def test_none_reads_no_call_and_serves_what_the_model_wrote(tmp_path, monkeypatch, scripted, tok):
    engine = scripted(tok)  # it calls the right tool first
    records, audit, seen = _go(tmp_path, monkeypatch, engine, "none")
    assert engine.calls == 3
    for s in seen:
        assert s["finish"] == "stop" and s["calls"] == []
        assert '"arguments"' in s["content"]  # the call the model wrote, as text
    assert all(r.rollout.tool_calls == 0 for r in records)
    _check_exact(audit)


def test_required_samples_again_until_the_policy_calls_and_trains_only_that_sample(tmp_path, monkeypatch, scripted,
                                                                                    tok):
    # odd calls answer without a call, even calls call: every turn is kept on its second sample
    engine = _replies(scripted, tok, lambda n: "The answer is 3." if n % 2 else _call())
    records, audit, seen = _go(tmp_path, monkeypatch, engine, "required")
    assert engine.calls == 6 and [s["calls"] for s in seen] == [["add"]] * 3
    assert all(s["finish"] == "tool_calls" for s in seen)
    checked, _ = _check_exact(audit)  # what is trained is the kept sample alone
    for line in audit:
        assert len(line["rejected"]) == 1 and len(line["generated"]) == 1
        assert tok.decode(line["rejected"][0]).startswith("The answer is 3.")
        assert "<tool_call>" in tok.decode(line["generated"][0])


def test_required_refused_after_the_tries_when_the_policy_never_calls(tmp_path, monkeypatch, scripted, tok):
    from agentrl.verl.program_loop import TOOL_CHOICE_TRIES

    engine = _replies(scripted, tok, lambda n: f"The answer is {n}.")  # a different answer each sample
    records, audit, seen = _go(tmp_path, monkeypatch, engine, "required", rows=1)
    assert engine.calls == TOOL_CHOICE_TRIES
    assert seen[0]["status"] == 422 and seen[0]["error"]["code"] == "tool_choice_not_met"
    assert f"in {TOOL_CHOICE_TRIES} samples" in seen[0]["error"]["message"]
    assert audit[0]["generated"] == [] and len(audit[0]["rejected"]) == TOOL_CHOICE_TRIES  # none trained


def test_tool_choice_missed_serve_serves_the_last_sample_as_written(tmp_path, monkeypatch, scripted, tok):
    from agentrl.verl.program_loop import TOOL_CHOICE_TRIES

    engine = _replies(scripted, tok, lambda n: f"The answer is {n}.")
    records, audit, seen = _go(tmp_path, monkeypatch, engine, "required", rows=1, missed="serve")
    assert engine.calls == TOOL_CHOICE_TRIES
    assert seen[0] == {"finish": "stop", "content": f"The answer is {TOOL_CHOICE_TRIES}.", "calls": []}
    assert len(audit[0]["rejected"]) == TOOL_CHOICE_TRIES - 1 and len(audit[0]["generated"]) == 1
    _check_exact(audit)  # the served sample is trained, the others are not
    assert records[0].rollout.unscorable is None


def test_a_named_function_is_kept_only_when_called_and_a_greedy_repeat_ends_the_tries(tmp_path, monkeypatch,
                                                                                      scripted, tok):
    # the same reply every sample (as greedy decoding gives): a call to add, never to multiply
    engine = _replies(scripted, tok, lambda n: _call("add"))
    _, audit, seen = _go(tmp_path, monkeypatch, engine, {"type": "function", "function": {"name": "multiply"}},
                         rows=1)
    assert engine.calls == 2 and seen[0]["status"] == 422  # the second sample repeated the first
    engine = _replies(scripted, tok, lambda n: _call("multiply"))
    _, audit, seen = _go(tmp_path, monkeypatch, engine, {"type": "function", "function": {"name": "multiply"}},
                         rows=1)
    assert engine.calls == 1 and seen[-1]["calls"] == ["multiply"]


@pytest.mark.parametrize("choice, tools, says", [
    ({"type": "function", "function": {"name": "divide"}}, True, "not among the tools sent (add, subtract, multiply)"),
    ("required", False, "needs tools"),
    ("sometimes", True, "is not one of"),
])
def test_impossible_tool_choices_are_refused_before_sampling(tmp_path, monkeypatch, scripted, tok, choice, tools, says):
    engine = scripted(tok)
    _, _, seen = _go(tmp_path, monkeypatch, engine, choice, rows=1, tools=tools)
    assert engine.calls == 0 and seen[0]["status"] == 400
    assert seen[0]["error"]["param"] == "tool_choice" and says in seen[0]["error"]["message"]
