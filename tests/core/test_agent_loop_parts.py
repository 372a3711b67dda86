"""Pieces of the agent loop that need no running trainer: malformed tool calls reach the model as text."""

from __future__ import annotations

import json

import pytest

from agentrl.callcheck import json_arguments
from agentrl.families import HERMES


def test_malformed_tool_calls_become_error_results():
    text = ('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'
            '<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>'
            '<tool_call>{"arguments": {}}</tool_call>')
    bad = HERMES.malformed(text)
    assert len(bad) == 2
    assert all(HERMES.malformed_message(b).startswith("error: malformed tool call") for b in bad)


def test_well_formed_calls_are_not_flagged():
    call = json.dumps({"name": "multiply", "arguments": {"a": 6, "b": 7}})
    assert HERMES.malformed(f"Let me compute.<tool_call>\n{call}\n</tool_call>") == []
    assert HERMES.malformed("The answer is 42.") == []


def test_arguments_json_text_is_decoded_and_anything_else_refused():
    assert json_arguments('{"a": 2}') == {"a": 2} and json_arguments({"a": 1}) == {"a": 1}
    with pytest.raises(ValueError, match="not valid JSON"):  # was passed to the tool as the raw string
        json_arguments("not json")
