"""Declaring tool servers, and the pure parts of traffic control (no server needed)."""

import json

import pytest

from agentrl import plugins
from agentrl.tools import ToolConfigError, parse_servers_config, truncate
from agentrl.tools.traffic import CircuitBreaker, ServerStats


def test_stdio_and_http_entries_with_env_expansion(monkeypatch):
    monkeypatch.setenv("SEARCH_TOKEN", "s3cret")
    monkeypatch.setenv("SEARCH_HOST", "127.0.0.1:9000")
    specs = parse_servers_config({"mcpServers": {
        "calc": {"command": "python", "args": ["-m", "calc"], "env": {"K": "${SEARCH_TOKEN}"}, "tools": ["add"]},
        "search": {"url": "http://${SEARCH_HOST}/mcp", "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
                   "max_concurrency": 4, "timeout": 2.5, "retries": 1, "stateful": True},
    }})
    assert specs["calc"].transport == "stdio" and specs["calc"].env == {"K": "s3cret"} and specs["calc"].tools == ("add",)
    s = specs["search"]
    assert (s.transport, s.url, s.headers["Authorization"]) == ("http", "http://127.0.0.1:9000/mcp", "Bearer s3cret")
    assert (s.max_concurrency, s.timeout, s.retries, s.stateful) == (4, 2.5, 1, True)


def test_missing_env_var_names_server_key_and_fix(monkeypatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    with pytest.raises(ToolConfigError) as e:
        parse_servers_config({"s": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${NOPE_TOKEN}"}}})
    assert "'s'" in str(e.value) and "headers.Authorization" in str(e.value) and "export NOPE_TOKEN" in str(e.value)


@pytest.mark.parametrize("entry, words", [
    ({"command": "x", "url": "http://h"}, ["exactly one of", "both"]),
    ({}, ["exactly one of", "neither"]),
    ({"command": "x", "timout": 3}, ["unknown key", "timout", "timeout"]),
    ({"command": "x", "max_concurrency": 0}, ["max_concurrency", ">= 1"]),
    ({"url": "ftp://h"}, ["http://"]),
    ({"command": "x", "tools": "add"}, ["tools must be a list"]),
    (42, ["expected an object"]),
])
def test_bad_entries_say_what_and_how(entry, words):
    with pytest.raises(ToolConfigError) as e:
        parse_servers_config({"srv": entry})
    assert "'srv'" in str(e.value)
    for w in words:
        assert w in str(e.value)


def test_plugin_registered_name_and_unknown_name():
    import agentrl_calculator.plugin as calc_plugin

    pm = plugins.new_plugin_manager(calc_plugin)
    specs = parse_servers_config({"calc": "calculator", "calc2": {"plugin": "calculator", "timeout": 3}}, pm=pm)
    assert specs["calc"].args == ("-m", "agentrl_calculator") and specs["calc2"].timeout == 3
    with pytest.raises(plugins.PluginError) as e:
        parse_servers_config({"c": "calculater"}, pm=pm)
    assert "Did you mean 'calculator'" in str(e.value) and "mcpServers.c" in str(e.value)


def test_json_file_list_of_names_and_allow(tmp_path):
    import agentrl_calculator.plugin as calc_plugin

    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"mcpServers": {"calc": {"command": "python", "tools": ["add", "divide"]}}}))
    specs = parse_servers_config(str(path), allow={"calc": ["add", "multiply"]})
    assert specs["calc"].tools == ("add",)  # allow narrows, never widens
    pm = plugins.new_plugin_manager(calc_plugin)
    assert list(parse_servers_config(["calculator"], pm=pm)) == ["calculator"]
    with pytest.raises(ToolConfigError, match="does not exist"):
        parse_servers_config(str(tmp_path / "missing.json"))
    with pytest.raises(plugins.PluginError, match="unknown tool server 'other'"):
        parse_servers_config(str(path), allow={"other": []})


def test_truncate_marker():
    assert truncate("abc", 5) == "abc"
    assert truncate("a" * 12345 + "b" * 10, 10) == "a" * 10 + "\n[... truncated 12345 chars]"


def test_circuit_breaker_opens_fails_fast_half_opens_and_closes():
    now = [0.0]
    b = CircuitBreaker(failures=3, reset=10.0, clock=lambda: now[0], first_reset=2.0)
    for _ in range(2):
        b.failure()
    assert b.allow() and b.state == "closed"
    b.failure()
    assert b.state == "open" and not b.allow() and b.retry_after() == 2.0  # the first opening is short
    now[0] = 2.0
    assert b.allow() and not b.allow()  # one trial call only
    b.failure()  # the trial failed: open again, twice as long
    assert b.state == "open" and b.retry_after() == 4.0
    now[0] = 6.0
    assert b.allow()
    b.failure()
    now[0] = 13.0
    assert b.state == "open" and b.retry_after() == 1.0  # 8 s this time (capped at reset=10 next)
    now[0] = 14.0
    assert b.allow()
    b.success()  # the server is back: closed, and the next opening is short again
    assert b.state == "closed" and b.allow() and b.reset == 2.0
    for _ in range(3):
        b.failure()
    now[0] = 40.0
    assert b.allow()
    b.abandon()  # the trial call was cancelled: the next caller gets the trial
    assert b.allow() and not b.allow()


def test_circuit_breaker_wait_is_capped_at_reset():
    now = [0.0]
    b = CircuitBreaker(failures=1, reset=5.0, clock=lambda: now[0], first_reset=1.0)
    b.failure()
    for _ in range(6):
        now[0] += b.retry_after()
        assert b.allow()
        b.failure()
    assert b.retry_after() == 5.0


def test_stats_snapshot():
    s = ServerStats()
    for i, kind in enumerate(["ok", "ok", "tool_error", "timeout"]):
        s.record(i / 1000, kind)
    snap = s.snapshot()
    assert snap["calls"] == 4 and snap["ok"] == 2 and snap["errors"] == {"tool_error": 1, "timeout": 1}
    assert snap["latency_p50_ms"] is not None and snap["latency_p99_ms"] >= snap["latency_p50_ms"]


def test_tool_call_from_parser_shapes():
    from agentrl.tools import ToolCall

    assert ToolCall.from_dict({"id": "c1", "name": "add", "arguments": {"a": 1}}) == ToolCall("c1", "add", {"a": 1})
    openai = {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    assert ToolCall.from_dict(openai) == ToolCall("c2", "add", '{"a": 1}')
    assert ToolCall.from_dict({"name": "x"}, default_id="c9").to_dict() == {"id": "c9", "name": "x", "arguments": {}}
