"""The agentrl-calculator distribution: its entry point, its registration, and its tools over stdio."""

from importlib import metadata

import agentrl.tools.builtin
from agentrl import plugins
from agentrl.tools import ToolCall, ToolHub

from .conftest import HERE, run


def test_entry_points_are_valid_plugins():
    eps = {ep.name: ep for ep in metadata.entry_points(group="agentrl")}
    assert eps["calculator"].value == "agentrl_calculator.plugin"
    assert eps["calculator"].dist.name == "agentrl-calculator"
    pm = plugins.new_plugin_manager(eps["calculator"].load(), agentrl.tools.builtin)  # check_pending passes
    registered = plugins.tool_servers(pm)
    assert list(registered) == ["calculator"]  # the built-in module registers nothing (yet)
    entry = registered["calculator"].value
    assert entry["args"] == ["-m", "agentrl_calculator"] and entry["command"]


def test_calculator_tools_over_stdio():
    import agentrl_calculator.plugin as calc_plugin

    pm = plugins.new_plugin_manager(calc_plugin)

    async def main():
        async with ToolHub.from_config({"calculator": "calculator"}, pm=pm) as hub:
            async with hub.rollout("r") as s:
                calls = {
                    "sub": ToolCall("sub", "subtract", {"a": 10, "b": 2.5}),
                    "mul": ToolCall("mul", "multiply", {"a": 6, "b": 7}),
                    "div": ToolCall("div", "divide", {"a": 1, "b": 4}),
                    "pow": ToolCall("pow", "power", {"base": 2, "exponent": 10}),
                    "big": ToolCall("big", "power", {"base": 2, "exponent": 10_000}),
                    "sqrt": ToolCall("sqrt", "sqrt", {"x": -1}),
                    "ev": ToolCall("ev", "evaluate", {"expression": "(2 + 3) * 4 / 5 - 2 ** 3"}),
                    "hack": ToolCall("hack", "evaluate", {"expression": "__import__('os').system('true')"}),
                    "zero": ToolCall("zero", "evaluate", {"expression": "1 // 0"}),
                }
                got = {r.id: (r.content, r.is_error) for r in await s.call_many(list(calls.values()))}
        assert got["sub"] == ("7.5", False) and got["mul"] == ("42", False) and got["div"] == ("0.25", False)
        assert got["pow"] == ("1024", False) and got["ev"] == ("-4", False)
        assert got["big"][1] and "exponent too large" in got["big"][0]
        assert got["sqrt"][1] and "negative" in got["sqrt"][0]
        assert got["hack"][1] and "unsupported syntax" in got["hack"][0]
        assert got["zero"][1] and "division by zero" in got["zero"][0]
    run(main())


def test_loading_plugins_does_not_import_the_mcp_sdk():
    import subprocess
    import sys

    code = "import sys, agentrl.tools.builtin, agentrl_calculator.plugin; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_delay_answers_late_and_side_by_side(tmp_path):
    """--delay D: each call waits D seconds before it answers, and calls in flight together wait together (a slow
    tool, not a serial one), with the same answers and schemas as without it. Read from the server's own record
    of its waits (tests/tools/servers/traced_calculator.py), in the order its event loop ran them: no clock of the
    test's, so a loaded machine cannot break it."""
    import json
    import sys

    delay = 1.5
    trace = tmp_path / "waits.jsonl"
    server = {"calculator": {"command": sys.executable,
                             "args": [str(HERE / "servers" / "traced_calculator.py"), str(trace), "--",
                                      "--delay", str(delay)]}}

    def waits() -> list[dict]:
        return [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []

    async def main():
        async with ToolHub.from_config(server) as hub:
            async with hub.rollout("r") as s:
                names = {t["function"]["name"] for t in await s.tool_schemas()}
                one = await s.call_many([ToolCall("a", "add", {"a": 2, "b": 3})])
                after_one = waits()
                three = await s.call_many([ToolCall(str(n), "multiply", {"a": n, "b": 2}) for n in range(3)])
        return names, one, after_one, three

    names, one, after_one, three = run(main())
    assert {"add", "multiply", "evaluate"} <= names
    assert [(r.content, r.is_error) for r in one] == [("5", False)]
    assert [r.content for r in three] == ["0", "2", "4"]
    # the single call answered only after its whole wait: the server had ended it before the answer came
    assert [w["event"] for w in after_one] == ["enter", "exit"]
    assert {w["seconds"] for w in after_one} == {delay}
    assert after_one[1]["at"] - after_one[0]["at"] >= delay - 0.001  # the server's clock; asyncio may wake ~1 ns early
    # the three calls sent together were all waiting at once: every one entered its wait before any left it
    # (a server that ran them one after another records enter, exit, enter, exit, enter, exit)
    together = waits()[2:]
    assert [w["event"] for w in together] == ["enter"] * 3 + ["exit"] * 3, together
    assert all(w["seconds"] == delay for w in together)


def test_delay_must_be_a_finite_non_negative_number():
    import subprocess
    import sys

    for bad in ("-1", "inf", "nan"):
        done = subprocess.run([sys.executable, "-m", "agentrl_calculator", "--delay", bad],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "--delay must be" in done.stderr, (bad, done.stderr)
