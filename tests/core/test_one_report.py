"""One report per broken call: the model is told once why each call it wrote wrong was not run.

Two checks read a turn: the format's own check of the raw text (``Family.malformed``) and the JSON gate on the
calls the parser hands on (``agentrl.callcheck``); a parser may also fail on the text. Each broken call used to be
reported by every check that saw it (a block both unclosed and not JSON twice, hermes arguments that are a string
once by the raw check and again by the gate), which costs response tokens and tells the model of two errors
where it made one. Through the loop's path: the family's tokenizer, verl's parser registry with agentrl's parsers
(``parse_turn``), the episode's reading (``read_turn``).
"""

from __future__ import annotations

import asyncio

import pytest
from test_family_loop import CASES, FAMILY_DATA, family_tokenizer
from verl.experimental.agent_loop.tool_parser import ToolParser

from agentrl import families
from agentrl.episode import read_turn
from agentrl.verl.agent_loop import Turn, parse_turn, special_tokens

GOOD = '<tool_call>\n{"name": "add", "arguments": {"a": 37, "b": 48}}\n</tool_call>'


def read(fixture: str, text: str, tool_parser: str = "auto"):
    tokenizer = family_tokenizer(fixture)
    family = families.choose_family(tool_parser, tokenizer.chat_template, FAMILY_DATA[fixture]["model_type"])
    parser = ToolParser.get_tool_parser(family.parser, tokenizer)
    turn = asyncio.run(parse_turn(parser, tokenizer, tokenizer.encode(text, add_special_tokens=False)))
    return read_turn(family, turn, special_tokens(tokenizer))


@pytest.mark.parametrize("fixture", list(CASES))
def test_each_familys_broken_call_is_reported_once(fixture):
    said = read(fixture, CASES[fixture][4])
    assert said.calls == [] and len(said.malformed) == 1, said.malformed


@pytest.mark.parametrize("text,why", [
    # not JSON and never closed: one call, both reasons in one report
    ('<tool_call>\n{"name": "add", "arguments": {"a": 37, "b": 48}', ["not valid", "not closed"]),
    # arguments a string: the raw check and the JSON gate both refused it
    ('<tool_call>\n{"name": "add", "arguments": "37 and 48"}\n</tool_call>', ['"arguments" (an object)']),
])
def test_a_hermes_call_broken_two_ways_is_one_report(text, why):
    said = read("qwen2.5", text)
    assert said.calls == [] and len(said.malformed) == 1
    assert all(w in said.malformed[0] for w in why), said.malformed


def test_two_broken_calls_are_two_reports_and_a_good_one_runs():
    broken = '<tool_call>\n{"name": "add", "arguments": "x"}\n</tool_call>'
    said = read("qwen2.5", broken + "\n" + GOOD + "\n" + '<tool_call>\n{"name": "add", "arguments": {"a": }}\n</tool_call>')
    assert [(c.name, c.arguments) for c in said.calls] == [("add", {"a": 37, "b": 48})]
    assert len(said.malformed) == 2 and "needs" in said.malformed[0] and "not valid" in said.malformed[1]


def test_a_parser_failure_speaks_only_where_the_format_check_is_silent():
    broken = CASES["qwen2.5"][4]
    family = families.QWEN25
    # the parser failed on a turn the format's check also finds broken: one report, the check's
    said = read_turn(family, Turn("", [], broken, ("the call could not be read (KeyError: 'x')",)))
    assert len(said.malformed) == 1 and "not valid" in said.malformed[0]
    # the parser failed on a turn the check finds well formed: its report is kept, never lost
    said = read_turn(family, Turn("", [], GOOD, ("the call could not be read (KeyError: 'x')",)))
    assert said.malformed == ["the call could not be read (KeyError: 'x')"]
