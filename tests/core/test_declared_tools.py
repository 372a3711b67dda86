"""Declared tools (``metadata.declared_tools``): offered to the model, never run; the calls are the answer.

A scripted policy (no model here) plays against the real calculator MCP server, the real episode and the real
``tool_use`` reward."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from agentrl.dataset import DatasetError, _check_row, declared_tools

SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from agentrl.episode import Call, Episode, Turn
    from agentrl.spec import RunSpec
    from agentrl.worker import WorkerState

    TURNS = {
        # one turn: a served call and two declared ones; nothing after it may be asked for
        "mixed": [[Call("add", {"a": 2, "b": 3}), Call("get_weather", '{"city": "Oslo"}'),
                   Call("get_time", {"zone": "CET"})], "never reached"],
        # a served call first (its result goes back), then the declared call
        "later": [[Call("multiply", {"a": 6, "b": 7})], [Call("get_weather", {"city": "Lima"})], "never reached"],
        "none": ["I cannot look that up."],
    }

    class Scripted:
        def __init__(self, plan):
            self.versions, self.model_seconds, self.plan, self.turns = {"global_steps": 1}, 0.0, plan, 0
        async def start(self, messages, tools):
            self.tools = [t["function"]["name"] for t in tools or []]
        def room(self):
            return 100
        async def generate(self, params, room):
            self.turns += 1
            step = self.plan[self.turns - 1]
            return Turn(step, []) if isinstance(step, str) else Turn("", step)
        async def extend(self, previous, messages, tools):
            return True
        async def finish(self, prompt):
            return 5

    async def main(run_dir, plan, served):
        spec = RunSpec(run_dir=run_dir, tools=["calculator"] if served == "yes" else [], rewards=[{"name": "tool_use"}])
        state, policy = WorkerState(spec), Scripted(TURNS[plan])
        row = {"id": "w1", "messages": [{"role": "user", "content": "Weather in Oslo?"}],
               "metadata": {"expected_tools": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
                            "max_tool_calls": 3,
                            "declared_tools": [
                   {"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
                   {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}},
                   {"type": "function", "function": {"name": "add", "description": "a declared add hides the server's"}}]}}
        try:
            record = await Episode(state, policy).run(row, {"temperature": 1.0})
        finally:
            await state.aclose()
        print(json.dumps({"record": record.to_dict(), "tools": policy.tools, "turns": policy.turns}))

    asyncio.run(main(*sys.argv[1:]))
""")


def _episode(tmp_path, plan: str, served: str = "yes") -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), plan, served], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_declared_calls_are_recorded_not_run_and_end_the_episode(tmp_path):
    got = _episode(tmp_path, "mixed")
    record = got["record"]
    # offered: the server's tools except the one a declaration hides, then the declared ones
    assert {"multiply", "get_weather", "get_time"} <= set(got["tools"]) and got["tools"].count("add") == 1
    assert got["tools"][-3:] == ["get_weather", "get_time", "add"]
    assert got["turns"] == 1 and record["stop_reason"] == "declared_call"
    (step,) = record["trajectories"]
    assert [(c["name"], c["arguments"]) for c in step["tool_calls"]] == [  # in the order the model made them
        ("add", {"a": 2, "b": 3}), ("get_weather", {"city": "Oslo"}), ("get_time", {"zone": "CET"})]
    assert step["tool_results"] == []  # nothing ran: "add" is declared here, so the calculator never saw it
    assert record["tool_calls"] == 3 and record["components"]["tool_use"] == 1.0


def test_served_calls_run_until_a_declared_call_is_made(tmp_path):
    record = _episode(tmp_path, "later")["record"]
    first, second = record["trajectories"]
    assert first["tool_results"][0]["content"].strip() == "42" and not first["tool_results"][0]["is_error"]
    assert second["tool_calls"][0]["name"] == "get_weather" and second["tool_results"] == []
    assert record["stop_reason"] == "declared_call"
    assert record["components"]["tool_use"] == 0.0  # Lima is not Oslo: graded, not skipped


def test_declared_tools_without_any_tool_server_and_a_plain_answer(tmp_path):
    got = _episode(tmp_path, "none", served="no")
    assert got["tools"] == ["get_weather", "get_time", "add"]
    assert got["record"]["stop_reason"] == "answered" and got["record"]["components"]["tool_use"] == 0.0


@pytest.mark.parametrize("tools, problem", [
    ({"name": "x"}, r"data\.jsonl:3: metadata\.declared_tools must be a list"),
    ([{"type": "function", "function": {"description": "no name"}}], r"declared_tools\[0\].*no function name"),
    ([{"name": "a"}, {"type": "function", "function": {"name": "a"}}], "'a' is declared twice"),
])
def test_malformed_declarations_name_the_row_and_entry(tools, problem):
    row = {"messages": [{"role": "user", "content": "hi"}], "metadata": {"declared_tools": tools}}
    with pytest.raises(DatasetError, match=problem):
        _check_row(row, "data.jsonl:3")


def test_bare_and_wrapped_declarations_read_the_same():
    bare = declared_tools({"declared_tools": [{"name": "f", "description": "d", "parameters": {"type": "object"}}]})
    wrapped = declared_tools({"declared_tools": [{"type": "function", "function": {
        "name": "f", "description": "d", "parameters": {"type": "object"}}}]})
    assert bare == wrapped == {"f": {"type": "function", "function": {"name": "f", "description": "d",
                                                                      "parameters": {"type": "object"}}}}
