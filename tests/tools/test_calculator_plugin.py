"""The agentrl-calculator distribution: its entry point, its registration, and its tools over stdio."""

from importlib import metadata

import agentrl.tools.builtin
from agentrl import plugins
from agentrl.tools import ToolCall, ToolHub

from .conftest import run


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
