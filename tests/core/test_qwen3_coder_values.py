"""Qwen3-Coder's parameter values, trimmed as the format's own parser trims them, booleans never silently false.

Qwen3-Coder's parser (vLLM's ``qwen3coder_tool_parser``, SGLang's ``Qwen3CoderDetector``, verl's
``Qwen3XMLToolParser``) removes one newline after ``<parameter=KEY>`` and one before ``</parameter>``, the two the
chat template writes around each value; indentation belongs to the value; typed values (integers, objects) are read
through it. A boolean is lowercased but not trimmed, so ``  true`` and anything that is not exactly true/false
become ``false`` without a word. Through the loop's path: the family's tokenizer, verl's registry with agentrl's
parsers and the tool schemas (``parse_turn``), the episode's reading (``read_turn``).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from test_family_loop import family_tokenizer
from verl.experimental.agent_loop.tool_parser import Qwen3XMLToolParser, ToolParser

from agentrl import families
from agentrl.episode import read_turn
from agentrl.verl import parsers
from agentrl.verl.agent_loop import parse_turn, special_tokens

SCHEMAS = [{"type": "function", "function": {"name": "set_flag", "description": "Set a flag.", "parameters": {
    "type": "object", "properties": {"enabled": {"type": "boolean"}, "note": {"type": "string"},
                                     "count": {"type": "integer"}, "extra": {"type": "object"}}}}}]


def call(*params: tuple[str, str]) -> str:
    body = "".join(f"<parameter={key}>{value}</parameter>\n" for key, value in params)
    return f"<tool_call>\n<function=set_flag>\n{body}</function>\n</tool_call>"


def read(text: str, parser=None):
    tokenizer = family_tokenizer("qwen3-coder")
    parser = parser or ToolParser.get_tool_parser("qwen3_coder", tokenizer)
    turn = asyncio.run(parse_turn(parser, tokenizer, tokenizer.encode(text, add_special_tokens=False),
                                  parsers.tool_schemas(SCHEMAS)))
    said = read_turn(families.QWEN3_CODER, turn, special_tokens(tokenizer))
    assert said.malformed == [] and len(said.calls) == 1
    return said.calls[0].arguments


def test_values_are_trimmed_as_the_formats_parser_trims_them():
    args = read(call(("note", "\n    indented line\n"), ("count", "\n    2\n    "), ("extra", '\n  {"a":\n   1}\n'),
                     ("enabled", "\ntrue\n")))
    assert args == {"note": "    indented line", "count": 2, "extra": {"a": 1}, "enabled": True}
    assert read(call(("note", "\n\ntwo newlines each side\n\n")))["note"] == "\ntwo newlines each side\n"
    assert read(call(("note", "no newlines")))["note"] == "no newlines"


@pytest.mark.parametrize("written,value", [
    ("\n    true\n", True), ("\nTRUE\n", True), ("  false  ", False), ("\nFalse\n", False),
    ("\nmaybe\n", "maybe"), ("\nyes\n", "yes"),
])
def test_a_boolean_is_read_through_indentation_and_never_silently_false(written, value):
    assert read(call(("enabled", written)))["enabled"] == value


def test_verl_reads_an_indented_true_as_false():
    """What the strict parser changes: verl's own parser (as vLLM's and SGLang's) lowercases without trimming."""
    tokenizer = family_tokenizer("qwen3-coder")
    args = read(call(("enabled", "\n    true\n")), parser=Qwen3XMLToolParser(tokenizer))
    assert args["enabled"] is False and json.dumps(args)
