"""Fuzzing the tool-call readers: mutated calls in every format never raise and never run a call whose
arguments are not a JSON object.

Valid calls in each family's format (one or two per format, with several calls) are cut short, have a delimiter
doubled or dropped, get bad escapes, huge or non-finite numbers and nested quotes; each mutant goes through the
loop's path (``parse_turn`` with verl's parser registry and agentrl's parsers, then ``read_turn``) with the
family's published template and tokens. Whether the arguments fit the tool's schema beyond being a JSON object
is the tool layer's check (MCP validates them and answers the model with the error).
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_family_loop import FAMILY_DATA, family_tokenizer
from verl.experimental.agent_loop.tool_parser import ToolParser

from agentrl import families
from agentrl.episode import read_turn
from agentrl.verl import parsers
from agentrl.verl.agent_loop import parse_turn, special_tokens

# fixture -> (tool_parser, valid turns in its format)
VALID = {
    "qwen2.5": ("auto", ['<tool_call>\n{"name": "add", "arguments": {"a": 37, "b": "x\\"y"}}\n</tool_call>',
                         'Sure.<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'
                         '<tool_call>{"name": "multiply", "arguments": {"a": [1, {"b": 2}]}}</tool_call>']),
    "qwen3": ("hermes", ['<think>add</think><tool_call>\n{"name": "add", "arguments": {"a": 37, "b": 48}}\n</tool_call>']),
    "qwen3-coder": ("auto", ["<tool_call>\n<function=add>\n<parameter=a>\n37\n</parameter>\n<parameter=b>\n48\n"
                             "</parameter>\n</function>\n</tool_call>",
                             '<function=add>\n<parameter=a>\n{"x": [1, 2]}\n</parameter>\n</function>']),
    "glm-4.5": ("auto", ["<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>37</arg_value>\n<arg_key>b</arg_key>\n"
                         "<arg_value>48</arg_value>\n</tool_call>",
                         '<think>x</think><tool_call>add\n<arg_key>a</arg_key>\n<arg_value>{"q": "it\'s"}</arg_value>'
                         "\n</tool_call>"]),
    "llama3.1": ("auto", ['{"name": "add", "parameters": {"a": 37, "b": 48}}',
                          '<|python_tag|>{"name": "add", "parameters": {"a": 1}}; {"name": "multiply", "parameters": '
                          '{"a": [1.5e3, "q\\"q"]}}']),
    "llama3.2": ("llama3_pythonic", ["[add(a=37, b=48)]", "[add(a=1, b='x\\'y'), multiply(a=[1, 2], b={'k': None})]"]),
    "mistral-nemo": ("auto", ['[TOOL_CALLS][{"name": "add", "arguments": {"a": 37, "b": 48}}]',
                              '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}}, {"name": "multiply", '
                              '"arguments": {"a": "x\\"y"}}]']),
    "mistral-small-3.2": ("auto", ['[TOOL_CALLS]add[ARGS]{"a": 37, "b": 48}[TOOL_CALLS]multiply[ARGS]{"a": 2}']),
    # no published tokens for these four here: the Qwen2.5 fixture's byte-level BPE carries their markup as text
    "qwen2.5+kimi": ("kimi", ["<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>"
                              '{"a": 37, "b": [1, "x"]}<|tool_call_end|><|tool_calls_section_end|>']),
    "qwen2.5+seed": ("seed", ["<seed:think>x</seed:think><seed:tool_call>\n<function=add>\n<parameter=a>37</parameter>"
                              "\n<parameter=b>[1, 2]</parameter>\n</function>\n</seed:tool_call>"]),
    "qwen2.5+deepseek": ("deepseek_v3", [
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 37, \"b\": 48}<｜tool▁call▁end｜>"
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>multiply\n```json\n{\"a\": [1, \"x\"]}\n```<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>"]),
    "qwen2.5+granite": ("granite", ['<|tool_call|>[{"name": "add", "arguments": {"a": 37}}, {"name": "multiply", '
                                    '"arguments": {"a": [1, "q\\"q"]}}]']),
    "gpt-oss": ("auto", [' to=functions.add<|channel|>commentary json<|message|>{"a": 37, "b": 48}<|call|>',
                         "<|channel|>analysis<|message|>add<|end|><|start|>assistant<|channel|>commentary "
                         'to=functions.add <|constrain|>json<|message|>{"a": [1, "x"]}<|call|>']),
}
DELIMITERS = ["<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "```", "<|tool_call|>", "<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", "<arg_key>",
              "</arg_key>", "<arg_value>", "</arg_value>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "<|message|>",
              "<|call|>", "to=functions.", "<think>", "</think>", "{", "}", "[", "]", "(", ")", '"', "'", ",", ":",
              ";", "=", "\n"]
INSERTS = ["\\", "\\q", "\\u12", "\\ud800", "1e999", "-1e999", "NaN", "Infinity", "9" * 5000, '"\'"', '\\"', "'\"'",
           "b'z'", "{1, 2}", "1j", "None", "[[[[[[[[[[", "}}}}", "\x00", "<|im_end|>", "<tool_call>", "</think>"]


HUGE = ["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "nan", "inf", "9" * 5000, "1" + "0" * 400 + ".5", "b'z'",
        "{1, 2}", "1j", "(1, 2)", "None"]


def _mutate(text: str, kind: str, at: int, pick: int) -> str:
    at %= len(text) + 1
    if kind == "truncate":
        return text[:at]
    present = [d for d in DELIMITERS if d in text]
    if kind in ("double", "drop") and present:
        d = present[pick % len(present)]
        i = text.find(d)
        return text[:i] + (d + d if kind == "double" else "") + text[i + len(d):]
    insert = INSERTS[pick % len(INSERTS)]
    if kind == "replace_number":
        numbers = list(re.finditer(r"\d+(?:\.\d+)?(?:e\d+)?", text))
        if numbers:
            m = numbers[at % len(numbers)]
            return text[:m.start()] + HUGE[pick % len(HUGE)] + text[m.end():]
    return text[:at] + insert + text[at:]


def _read(fixture: str, text: str):
    tool_parser, _ = VALID[fixture]
    fixture = fixture.split("+")[0]
    tokenizer = family_tokenizer(fixture)
    family = families.choose_family(tool_parser, tokenizer.chat_template, FAMILY_DATA[fixture]["model_type"])
    parser = ToolParser.get_tool_parser(family.parser, tokenizer)
    tools = parsers.tool_schemas([{"type": "function", "function": {"name": n, "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}} for n in ("add", "multiply")])
    turn = asyncio.run(parse_turn(parser, tokenizer, tokenizer.encode(text, add_special_tokens=False), tools))
    return read_turn(family, turn, special_tokens(tokenizer))


def _assert_safe(said) -> None:
    for call in said.calls:
        assert isinstance(call.arguments, dict)
        # strict JSON both ways: no NaN/Infinity, no bytes, sets or tuples; what a tool gets is what JSON says
        assert json.loads(json.dumps(call.arguments, allow_nan=False)) == call.arguments
    assert isinstance(said.answer, str) and all(isinstance(m, str) for m in said.malformed)


@pytest.mark.parametrize("fixture", sorted(VALID))
@pytest.mark.parametrize("number", HUGE)
def test_every_number_replaced_by_what_json_cannot_carry(fixture, number):
    for text in VALID[fixture][1]:
        for m in re.finditer(r"\d+(?:\.\d+)?(?:e\d+)?", text):
            _assert_safe(_read(fixture, text[:m.start()] + number + text[m.end():]))


def test_the_valid_calls_are_read():  # the fuzzing starts from calls that do run
    for fixture, (_, turns) in VALID.items():
        for text in turns:
            said = _read(fixture, text)
            assert said.calls and not said.malformed, (fixture, text, said)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fixture=st.sampled_from(sorted(VALID)), which=st.integers(0, 1),
       mutations=st.lists(st.tuples(st.sampled_from(["truncate", "double", "drop", "insert", "replace_number"]),
                                    st.integers(0, 10_000), st.integers(0, 1000)), min_size=1, max_size=3))
def test_mutated_calls_never_raise_and_never_run_non_json(fixture, which, mutations):
    turns = VALID[fixture][1]
    text = turns[which % len(turns)]
    for kind, at, pick in mutations:
        text = _mutate(text, kind, at, pick)
    _assert_safe(_read(fixture, text))
