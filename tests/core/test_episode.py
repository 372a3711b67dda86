"""The episode without verl: a scripted policy (no model here) against the real calculator MCP server and the
real rewards; the record it returns is the line it logs, and nothing of verl is imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from agentrl.record import KEYS, OLD_TRAJECTORIES, RolloutRecord, RolloutSummary

SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from agentrl.episode import Call, Episode, Turn
    from agentrl.spec import RunSpec
    from agentrl.worker import WorkerState

    class Scripted:
        '''Turn 1 calls the calculator (one call it can parse, one it cannot), turn 2 answers from the result.'''
        def __init__(self, answer):
            self.versions, self.model_seconds, self.turns, self.answer = {"global_steps": 7}, 0.0, 0, answer
        async def start(self, messages, tools):
            self.tools = [t["function"]["name"] for t in tools or []]
        def room(self):
            return 100
        async def generate(self, params, room):
            self.turns += 1
            if self.turns == 1:
                return Turn('<tool_call>{"name": "add", "arguments": {"a": 37, "b": 48}}</tool_call>'
                            '<tool_call>{"name": add}</tool_call>', [Call("add", '{"a": 37, "b": 48}')])
            return Turn(f"The answer is {self.answer}.", [])
        async def extend(self, previous, messages, tools):
            self.seen = messages[len(previous):]
            return True
        async def finish(self, prompt):
            return 12

    async def main(run_dir, answer):
        spec = RunSpec(run_dir=run_dir, tools=["calculator"], rewards=[{"name": "math"}, {"name": "tool_use"}])
        state, policy = WorkerState(spec), Scripted(answer)
        row = {"id": "q1", "source": "d.jsonl:1", "split": "val", "metadata": {"expected_answer": "85"},
               "messages": [{"role": "user", "content": "What is 37 + 48?"}]}
        try:
            record = await Episode(state, policy).run(row, {"temperature": 1.0}, trainer_step=3)
        finally:
            await state.aclose()
        print(json.dumps({"record": record.to_dict(), "tools": policy.tools, "seen": policy.seen,
                          "verl": sorted(m for m in sys.modules if m == "verl" or m.startswith("verl."))}))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
""")


def _episode(tmp_path, answer: str) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), answer], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_an_episode_runs_tools_and_rewards_without_verl_and_logs_the_record_it_returns(tmp_path):
    got = _episode(tmp_path, "85")
    assert got["verl"] == []
    record = got["record"]
    assert "add" in got["tools"]
    first = record["trajectories"][0]
    assert first["tool_calls"] == [{"id": "c0", "name": "add", "arguments": {"a": 37, "b": 48}}]
    results = {r["id"]: r for r in first["tool_results"]}
    assert results["c0"]["content"].strip() == "85" and not results["c0"]["is_error"]
    errors = [r for r in first["tool_results"] if r["is_error"]]
    assert len(errors) == 1 and "malformed tool call" in errors[0]["content"]
    assert [m["role"] for m in got["seen"]] == ["tool", "tool"]  # both results went back to the model
    assert record["reward"] is not None and record["components"]["math"] == 1.0 and record["unscorable"] is None
    assert (record["step"], record["policy_version"], record["validation"]) == (3, 7, True)
    assert record["tool_calls"] == 1 and record["response_tokens"] == 12 and record["stop_reason"] == "answered"
    assert record["messages"][-1] == {"role": "assistant", "content": "The answer is 85."}
    logged = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert logged == [record] and list(record) == list(KEYS)
    # the version of the reward set that scored it (the same rewards built here have the same one)
    from agentrl.rewards import RewardSet

    assert record["reward_version"] == RewardSet.from_config([{"name": "math"}, {"name": "tool_use"}]).version


def test_a_wrong_answer_scores_zero_not_unscorable(tmp_path):
    record = _episode(tmp_path, "86")["record"]
    assert record["components"]["math"] == 0.0 and record["unscorable"] is None


def test_the_record_reads_back_older_lines_and_the_job_page_reads_its_fields():
    old = {"rollout_id": "r-1", "step": 2, "reward": 0.5, "messages": [], "unknown_later_key": 1}
    record = RolloutRecord.from_dict(old)
    assert (record.rollout_id, record.step, record.reward, record.passed) == ("r-1", 2, 0.5, {})
    # every field the job page's index files rollouts by is a field of the record (or an older file's name of one)
    assert set(RolloutSummary.__struct_fields__) <= set(KEYS) | {OLD_TRAJECTORIES}


def test_a_nan_in_a_tool_calls_arguments_is_a_malformed_call_not_a_lost_rollout(tmp_path):
    """`json.loads` accepts NaN and Infinity; JSON does not. The call is answered with the reason (the tool does
    not run: agentrl.callcheck refuses it before any tool), and the rollout is logged and scored as usual."""
    script = SCRIPT.replace("""[Call("add", '{"a": 37, "b": 48}')]""", """[Call("add", '{"a": NaN, "b": 48}')]""")
    assert script != SCRIPT
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path), "85"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads(out.stdout.splitlines()[-1])["record"]
    first = record["trajectories"][0]
    assert first["tool_calls"] == []  # nothing ran
    said = [r["content"] for r in first["tool_results"] if r["is_error"]]
    assert any("the call to add was not run: NaN is not JSON" in text for text in said), said
    assert record["reward"] is not None and record["unscorable"] is None
    assert [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()] == [record]
