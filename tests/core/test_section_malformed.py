"""Broken calls of the section formats (Kimi K2, DeepSeek V3/V3.1, Granite 3) reported to the model in its format.

    read("kimi-k2", 'functions.add:0<|tool_call_argument_begin|>{"a": 1}<|tool_call_end|>')
    # no call runs; one report: "functions.add:0 outside <|tool_calls_section_begin|>…: write every call inside ..."

Through the loop's path (the family's tokenizer, verl's parser registry with agentrl's parsers, the episode's
reading). The peers read call markup outside its section as no call and grade it as the answer (SGLang's Kimi
``test_invalid_tool_call``, vLLM's DeepSeek reader); agentrl reports it, so a turn with call markup is run or
reported, never silently graded. Each report names what the model wrote (Granite 3.1's ``<tool_call>`` text, not
``<|tool_call|>``), and the message the model gets shows a call in its own format.
"""

from __future__ import annotations

import pytest
from test_one_report import read

KIMI_CALL = 'functions.add:0<|tool_call_argument_begin|>{"a": 1}<|tool_call_end|>'
DS_CALL = '<｜tool▁call▁begin｜>add<｜tool▁sep｜>{"a": 1}<｜tool▁call▁end｜>'
DS_SECTION = "<｜tool▁calls▁begin｜>" + DS_CALL + "<｜tool▁calls▁end｜>"

CASES = [  # (family fixture, model text, a part of the one report)
    ("kimi-k2", KIMI_CALL, "functions.add:0 outside <|tool_calls_section_begin|>"),
    ("kimi-k2", "<|tool_call_begin|>" + KIMI_CALL, "<|tool_call_begin|> outside"),
    ("kimi-k2", 'Let me add. functions.add:0 {"a": 1}', "functions.add:0 outside"),
    ("kimi-k2", "<|tool_calls_section_begin|><|tool_call_begin|>" + KIMI_CALL + "<|tool_calls_section_end|>"
     "<|tool_call_begin|>" + KIMI_CALL, "<|tool_call_begin|> outside"),
    ("kimi-k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>{\"a\": 1e999}"
     "<|tool_call_end|><|tool_calls_section_end|>", "inf"),
    ("deepseek-v3.1", DS_CALL, "<｜tool▁call▁begin｜> outside the call section"),
    ("deepseek-v3.1", DS_SECTION + " and " + DS_SECTION, "<｜tool▁calls▁begin｜> outside the call section"),
    ("deepseek-v3.1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜><｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "no tool name"),
    ("deepseek-v3.1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 1<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "the arguments of add are not valid JSON"),
    ("deepseek-v3.1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": NaN}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
     "the arguments of add are not valid JSON"),
    ("granite-3.3", '<tool_call>[{"name": "add", "arguments": {"a": 1}', "the list after <tool_call> is not valid JSON"),
    ("granite-3.3", '<|tool_call|>[{"name": "add", "arguments": {"a": 1}}] and then', "reply with <|tool_call|>[...]"),
    ("granite-3.3", "<|tool_call|>[]", "the call list after <|tool_call|> is empty"),
    ("granite-3.3", '<|tool_call|>[{"name": "add", "arguments": "1"}]', "the arguments of add must be a JSON object"),
]


@pytest.mark.parametrize("fixture,text,why", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_broken_call_runs_nothing_and_is_reported_once(fixture, text, why):
    said = read(fixture, text)
    assert said.calls == [], said.calls
    assert len(said.malformed) == 1 and why in said.malformed[0], said.malformed


@pytest.mark.parametrize("fixture,marker", [("kimi-k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions."),
                                            ("deepseek-v3.1", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"),
                                            ("granite-3.3", '<|tool_call|>[{"name": ')])
def test_the_report_shows_a_call_in_the_familys_format(fixture, marker):
    from test_family_loop import FAMILY_DATA, family_tokenizer

    from agentrl import families

    tokenizer = family_tokenizer(fixture)
    family = families.choose_family("auto", tokenizer.chat_template, FAMILY_DATA[fixture]["model_type"])
    message = family.malformed_message(read(fixture, {"kimi-k2": KIMI_CALL, "deepseek-v3.1": DS_CALL,
                                                      "granite-3.3": "<|tool_call|>[]"}[fixture]).malformed[0])
    assert message.startswith("error: malformed tool call: ") and marker in message, message


def test_call_markup_quoted_while_thinking_is_not_reported():
    """A call sketched inside <think> is neither run nor reported; the section after it runs."""
    text = "<think>maybe " + KIMI_CALL + "</think><|tool_calls_section_begin|><|tool_call_begin|>" + KIMI_CALL + \
        "<|tool_calls_section_end|>"
    said = read("kimi-k2", text)
    assert [(c.name, c.arguments) for c in said.calls] == [("add", {"a": 1})] and said.malformed == []
