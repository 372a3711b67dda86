"""Scripted user turns (``metadata.user_turns``): the row's later user turns, sent whenever the model ends its
turn. A scripted policy (no model here) plays against the real calculator MCP server and the real episode."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from agentrl.dataset import DatasetError, _check_row
from agentrl.scripted import ScriptedTurn, scripted_turns

SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from agentrl.config import AgentSettings
    from agentrl.episode import Call, Episode, Turn
    from agentrl.spec import RunSpec
    from agentrl.worker import WorkerState

    PLANS = {
        "all": [[Call("add", {"a": 2, "b": 3})], "5.", [Call("multiply", {"a": 5, "b": 4})], "I cannot multiply.",
                [Call("multiply", {"a": 5, "b": 4})], "20.", "never reached"],
        "chatty": ["a", "b", "c", "d", "never reached"],
        "unknown": [[Call("lookup", {"q": "x"})], "never reached"],
    }
    ROWS = {
        "served": {"allowed_tools": ["add"],
                   "user_turns": ["Now multiply that by 4.",
                                  {"messages": [{"role": "user", "content": "You may use multiply now."}],
                                   "tools": ["multiply"]}]},
        "declared": {"declared_tools": [{"name": "get_weather", "parameters": {"type": "object"}}]},
        "bare": {},
        "setup": {"tool_setup": [{"name": "load_scenario", "arguments": {"id": 1}}]},
    }

    class Scripted:
        def __init__(self, plan):
            self.versions, self.model_seconds, self.plan, self.turns, self.seen = {"global_steps": 1}, 0.0, plan, 0, []
            self.tools = None  # never started when the rollout fails first
        async def start(self, messages, tools):
            self.tools = [t["function"]["name"] for t in tools or []]
        def room(self):
            return 100
        async def generate(self, params, room):
            self.turns += 1
            step = self.plan[self.turns - 1]
            return Turn(step, []) if isinstance(step, str) else Turn("", step)
        async def extend(self, previous, messages, tools):
            self.seen += messages[len(previous):]
            return True
        async def finish(self, prompt):
            return 5

    async def episode(run_dir, plan, row, max_turns):
        spec = RunSpec(run_dir=run_dir, tools=["calculator"] if row == "served" else [],
                       rewards=[{"name": "tool_use"}], agent=AgentSettings(max_turns=int(max_turns)))
        state, policy = WorkerState(spec), Scripted(PLANS[plan])
        row = {"id": "s1", "messages": [{"role": "user", "content": "Add 2 and 3."}], "metadata": ROWS[row]}
        try:
            record = await Episode(state, policy).run(row, {"temperature": 1.0})
        finally:
            await state.aclose()
        return {"record": record.to_dict(), "tools": policy.tools, "seen": policy.seen}

    async def main(run_dir, cases):  # one process for every case: agentrl and verl are imported once
        got = {}
        for key, (plan, row, max_turns) in json.loads(cases).items():
            (__import__("pathlib").Path(run_dir) / key).mkdir()
            got[key] = await episode(f"{run_dir}/{key}", plan, row, max_turns)
        print(json.dumps(got))

    asyncio.run(main(*sys.argv[1:]))
""")


CASES = {"all": ("all", "served", 8), "budget2": ("chatty", "served", 2), "budget4": ("chatty", "served", 4),
         "declared": ("unknown", "declared", 8), "bare": ("unknown", "bare", 8), "setup": ("chatty", "setup", 8)}


@pytest.fixture(scope="module")
def episodes(tmp_path_factory) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path_factory.mktemp("scripted")), json.dumps(CASES)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_each_plain_answer_gets_the_next_scripted_turn_and_held_back_tools_arrive_with_theirs(episodes):
    got = episodes["all"]
    record, steps = got["record"], got["record"]["trajectories"]
    assert got["tools"] == ["add"]  # multiply is served, but held back until the second scripted turn
    assert [s.get("user_reply") for s in steps] == [
        None, "Now multiply that by 4.", None, "You may use multiply now.", None, None]
    before, after = steps[2]["tool_results"][0], steps[4]["tool_results"][0]
    assert before["is_error"] and "unknown tool 'multiply'" in before["content"]
    assert not after["is_error"] and after["content"].strip() == "20"
    users = [m["content"] for m in record["messages"] if m["role"] == "user"]
    assert users == ["Add 2 and 3.", "Now multiply that by 4.", "You may use multiply now."]
    assert [m["content"] for m in got["seen"] if m["role"] == "user"] == users[1:]  # the policy was given them
    assert record["user_turns"] == 2 and record["stop_reason"] == "answered" and record["messages"][-1]["content"] == "20."


def test_scripted_turns_stay_within_the_turn_budget(episodes):
    record = episodes["budget2"]["record"]
    assert [s.get("user_reply") for s in record["trajectories"]] == ["Now multiply that by 4.", "You may use multiply now."]
    assert record["stop_reason"] == "turn_budget" and record["user_turns"] == 2
    record = episodes["budget4"]["record"]  # 4 turns for 2 scripted turns: the third plain answer ends it
    assert len(record["trajectories"]) == 3 and record["stop_reason"] == "answered"


def test_a_call_to_a_name_neither_declared_nor_served_says_so(episodes):
    declared = episodes["declared"]["record"]
    (step,) = declared["trajectories"]  # the calls of a row that declares tools are its answer, as BFCL reads it
    assert declared["stop_reason"] == "declared_call"
    assert step["tool_results"][0]["content"] == ("error: unknown tool 'lookup': this row declares get_weather "
                                                  "and no tool server runs here")
    bare = episodes["bare"]["record"]
    assert "no tool servers are configured for this run" in bare["trajectories"][0]["tool_results"][0]["content"]
    assert bare["stop_reason"] == "answered" and len(bare["trajectories"]) == 2  # told, and it answered


def test_the_shapes_of_a_scripted_turn():
    turns = scripted_turns({"user_turns": ["a", [{"role": "user", "content": "b"}],
                                          {"messages": [{"role": "user", "content": "c"}], "tools": ["t"]}]})
    assert turns == [ScriptedTurn([{"role": "user", "content": "a"}]), ScriptedTurn([{"role": "user", "content": "b"}]),
                     ScriptedTurn([{"role": "user", "content": "c"}], ("t",))]


@pytest.mark.parametrize("turns, problem", [
    ("next", r"data\.jsonl:2: metadata\.user_turns must be a list"),
    ([[]], r"user_turns\[0\] must be a string, a list of user messages"),
    (["ok", [{"role": "assistant", "content": "x"}]], r"user_turns\[1\]"),
    ([{"messages": [{"role": "user", "content": "x"}], "tools": "multiply"}], r"user_turns\[0\].*tool names"),
])
def test_malformed_scripted_turns_name_the_row_and_entry(turns, problem):
    with pytest.raises(DatasetError, match=problem):
        _check_row({"messages": [{"role": "user", "content": "hi"}], "metadata": {"user_turns": turns}}, "data.jsonl:2")


def test_a_row_that_needs_setup_in_a_run_without_tool_servers_is_unscorable_and_says_why(episodes):
    record = episodes["setup"]["record"]
    assert record["reward"] is None and record["stop_reason"] == "tool_infra_error"
    assert "tool_setup calls 'load_scenario', but this run serves no tools" in record["unscorable"]
