"""A server someone else published (npm @modelcontextprotocol/server-everything) and the CLI helpers."""

import json

from agentrl.tools import ToolCall, ToolHub
from agentrl.tools.cli import call_tool, check, list_tools, loadtest

from .conftest import run


def test_third_party_everything_server(everything_server, calc_stdio):
    async def main():
        async with ToolHub.from_config({"everything": everything_server, "calc": calc_stdio}) as hub:
            async with hub.rollout("r-ext") as s:
                got = {x["function"]["name"] for x in await s.tool_schemas()}
                assert {"echo", "get-sum", "add", "divide"} <= got
                r = await s.call_many([ToolCall("e", "echo", {"message": "hello"}), ToolCall("s", "get-sum", {"a": 2, "b": 40}),
                                       ToolCall("x", "echo", {}), ToolCall("a", "add", {"a": 1, "b": 1})])
            assert (r[0].content, r[0].is_error) == ("Echo: hello", False)
            assert "42" in r[1].content and not r[1].is_error
            assert r[2].is_error  # missing argument, reported by that server's own validation
            assert r[3].content == "2"
    run(main())


def test_cli_list_call_check(calc_http, always_503, tmp_path):
    config = tmp_path / "tools.json"
    config.write_text(json.dumps({"mcpServers": {"calc": {"url": calc_http}}}))
    listing = list_tools(str(config))
    assert f"calc  (http: {calc_http})" in listing and "calc.add(a, b)" in listing
    assert call_tool(str(config), "calc.add", '{"a": 2, "b": 3}') == ("5", False)
    assert call_tool(str(config), "calc.add", "{oops")[1] is True
    report, ok = check(str(config))
    assert ok and report.startswith("ok   calc:") and " ms " in report and "1/1 servers ok" in report
    _, url = always_503
    report, ok = check({"calc": {"url": calc_http}, "down": {"url": url, "retries": 1}})
    assert not ok and "FAIL down: http_5xx" in report and "ok   calc" in report and "1/2 servers ok" in report


def test_cli_loadtest(calc_http, always_503):
    report, ok = loadtest({"calc": {"url": calc_http}}, "add", '{"a": 1, "b": 2}', rollouts=16, calls=4, parallel=2)
    assert ok and "16 rollouts x 4 calls of add: 64 calls" in report and "infrastructure failures: 0" in report
    _, url = always_503
    report, ok = loadtest({"down": {"url": url, "retries": 0, "circuit_failures": 2}}, "x", rollouts=4, calls=1)
    assert not ok and "cannot start" in report and "http_5xx" in report
