"""A tool server entry's keys, declared as pydantic models (agentrl.tools.entries): what each bad key says, word for
word as the hand-written validators said it (name, key, what it must be, what it got), and the defaults of
each kind of entry."""

import pytest

from agentrl.tools import ToolConfigError, parse_servers_config
from agentrl.tools.entries import FunctionEntry, ServerEntry


@pytest.mark.parametrize("entry, message", [
    ({"command": "x", "max_concurrency": 0}, "tool server 'srv': max_concurrency must be an integer >= 1, got 0"),
    ({"command": "x", "max_concurrency": True}, "tool server 'srv': max_concurrency must be an integer >= 1, got True"),
    ({"command": "x", "retries": 1.5}, "tool server 'srv': retries must be an integer >= 0, got 1.5"),
    ({"command": "x", "timeout": "3"}, "tool server 'srv': timeout must be a number >= 0.001, got '3'"),
    ({"command": "x", "circuit_reset": -1}, "tool server 'srv': circuit_reset must be a number >= 0.0, got -1"),
    ({"command": "x", "deadline": 0}, "tool server 'srv': deadline must be a number >= 0.001, got 0"),
    ({"command": "x", "limit_scope": "node"}, "tool server 'srv': limit_scope must be \"run\" (max_concurrency and "
     "rate_limit for all agent-loop processes together) or \"process\" (for each one), got 'node'"),
    ({"command": "x", "args": "a b"}, "tool server 'srv': args must be a list of strings, got 'a b'"),
    ({"command": "x", "tools": "add"}, "tool server 'srv': tools must be a list of tool names, got 'add'"),
    ({"command": "x", "env": ["A"]}, "tool server 'srv': env must be an object of strings, got list"),
    ({"url": "http://h", "headers": "Bearer"}, "tool server 'srv': headers must be an object of strings, got str"),
    ({"command": "x", "b": 1, "a": 2}, "tool server 'srv': unknown key(s) ['a', 'b']. Known keys: " + str(sorted(
        ServerEntry.model_fields))),
    ({"type": "function", "url": "http://h", "tools": ["a"]}, "function tool 'srv': unknown key(s) ['tools']. Known "
     "keys: " + str(sorted(FunctionEntry.model_fields))),
    ({"type": "function", "url": "http://h", "openapi": 3},
     "function tool 'srv': openapi must be a path or URL of an OpenAPI document, got 3"),
    ({"type": "function", "url": "http://h", "parameters": []}, "function tool 'srv': parameters must be a JSON schema "
     "object such as {\"type\": \"object\", \"properties\": {\"query\": {\"type\": \"string\"}}}, got []"),
    ({"type": "function", "url": "http://h", "rate_limit": 0},
     "function tool 'srv': rate_limit must be a number >= 0.001, got 0"),
])
def test_each_bad_key_says_which_what_and_what_it_got(entry, message):
    with pytest.raises(ToolConfigError) as e:
        parse_servers_config({"srv": entry})
    assert str(e.value) == message


def test_the_known_keys_are_those_the_hand_written_sets_accepted():
    assert set(ServerEntry.model_fields) == {
        "command", "args", "env", "cwd", "url", "headers", "type", "transport", "tools", "max_concurrency", "timeout",
        "retries", "stateful", "circuit_failures", "circuit_reset", "connect_timeout", "description", "disabled",
        "rate_limit", "deadline", "limit_scope"}
    assert set(FunctionEntry.model_fields) == {
        "name", "url", "headers", "type", "description", "parameters", "openapi", "max_concurrency", "timeout",
        "retries", "circuit_failures", "circuit_reset", "connect_timeout", "rate_limit", "disabled", "deadline",
        "limit_scope"}


def test_defaults_of_each_kind_and_explicit_nulls():
    specs = parse_servers_config({
        "mcp": {"command": "python", "args": ["-m", 3], "stateful": 1, "rate_limit": None, "deadline": None},
        "fn": {"type": "function", "url": "http://127.0.0.1:9/x"},
        "fn_uncapped": {"type": "function", "url": "http://127.0.0.1:9/y", "rate_limit": None, "timeout": 5}})
    mcp, fn, uncapped = specs["mcp"], specs["fn"], specs["fn_uncapped"]
    assert (mcp.args, mcp.stateful, mcp.timeout, mcp.rate_limit, mcp.deadline, mcp.call_deadline) == (
        ("-m", "3"), True, 60.0, None, None, 240.0)
    assert (mcp.max_concurrency, mcp.retries, mcp.circuit_failures, mcp.limit_scope) == (32, 3, 5, "run")
    assert (fn.timeout, fn.rate_limit, fn.function, fn.transport) == (600.0, 50.0, True, "function")
    assert (uncapped.timeout, uncapped.rate_limit) == (5.0, None)
    with pytest.raises(ToolConfigError, match="max_concurrency must be an integer >= 1, got None"):
        parse_servers_config({"srv": {"command": "x", "max_concurrency": None}})
