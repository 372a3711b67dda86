"""Model text never kills a rollout, never hands a tool a value JSON cannot carry, never grades markup.

Each case is a defect class of issue 35, through the real agent loop (verl's loop base, verl's parser registry with
agentrl's parsers, the calculator MCP server, the math reward) with the family's published template and tokens; the
model is scripted (see test_family_loop.py for what stands in and why).
"""

from __future__ import annotations

import pytest
from test_family_loop import CASES, family_tokenizer, run_family

from agentrl import families
from agentrl.callcheck import json_arguments


def _first_turn(record):
    first = record["trajectories"][0]
    return first["tool_calls"], [r["content"] for r in first["tool_results"] if r["is_error"]]


@pytest.mark.parametrize("name,turn,tool_parser,why", [
    # the pythonic reader raised TypeError (bytes are not JSON) and the episode re-raised it: a dead rollout
    ("llama3.2", "[bad(x=b'z'), get_weather(city='San Francisco')]", "llama3_pythonic", "bytes"),
    # 1e999 is inf in Python: add ran with Infinity, which is not JSON
    ("llama3.2", "[add(a=1e999, b=1)]", "llama3_pythonic", "inf"),
    # verl's hermes reader accepts NaN/Infinity (Python's json does): add ran with them
    ("qwen2.5", '<tool_call>\n{"name": "add", "arguments": {"a": Infinity, "b": 1}}\n</tool_call>', "auto", "Infinity"),
    ("mistral-nemo", '[TOOL_CALLS][{"name": "add", "arguments": {"a": NaN, "b": 1}}]', "auto", "nan"),
    # a missing </parameter>: add ran with a = "37\n<parameter=b>\n48"
    ("qwen3-coder", "<tool_call>\n<function=add>\n<parameter=a>\n37\n<parameter=b>\n48\n</parameter>\n</function>\n"
                    "</tool_call>", "auto", "each closed"),
])
def test_unreadable_values_are_reported_never_run(tmp_path, name, turn, tool_parser, why):
    _, out, record, server = run_family(tmp_path, name, [turn, CASES["qwen2.5"][1]], tool_parser=tool_parser)
    calls, errors = _first_turn(record)
    assert calls == [] and len(errors) == 1 and "malformed tool call" in errors[0]  # one report per broken call
    assert any(why in e for e in errors), errors
    assert "malformed tool call" in server.prompts[1]  # the model reads why
    assert out.reward_score == 1.0 and record["stop_reason"] == "answered"


@pytest.mark.parametrize("name,turn,tool_parser", [
    # prose before a pythonic list: graded as the answer before
    ("llama3.2", "Here's a tool call: [add(a=37, b=48)]", "llama3_pythonic"),
])
def test_markup_after_prose_is_reported_not_graded(tmp_path, name, turn, tool_parser):
    _, _, record, _ = run_family(tmp_path, name, [turn, "The answer is 85."], tool_parser=tool_parser)
    calls, errors = _first_turn(record)
    assert calls == [] and "no text before it" in errors[0]
    assert record["trajectories"][0]["response"] == ""  # the markup is not an answer


@pytest.mark.parametrize("name,turn", [
    # Qwen3-Coder's <function=...> without <tool_call>: vLLM reads it; it was graded as the final answer
    ("qwen3-coder", "<function=add>\n<parameter=a>\n37\n</parameter>\n<parameter=b>\n48\n</parameter>\n</function>"),
    # Llama 3 JSON after a line of prose, and calls on separate lines / after repeated <|python_tag|>
    ("llama3.1", 'I will add them.\n{"name": "add", "parameters": {"a": 37, "b": 48}}'),
    ("llama3.1", '<|python_tag|>{"name": "add", "parameters": {"a": 37, "b": 48}}\n'
                 '<|python_tag|>{"name": "multiply", "parameters": {"a": 2, "b": 3}}'),
])
def test_calls_the_peers_read_unambiguously_are_read(tmp_path, name, turn):
    _, out, record, _ = run_family(tmp_path, name, [turn, "The answer is 85."])
    calls, _ = _first_turn(record)
    assert (calls[0]["name"], calls[0]["arguments"]) == ("add", {"a": 37, "b": 48})
    assert record["trajectories"][0]["tool_results"][0]["content"].strip() == "85"
    assert record["trajectories"][0]["response"] == "" and out.reward_score == 1.0


def test_a_named_parser_keeps_the_templates_reasoning_handling(tmp_path):
    """``tool_parser: hermes`` on Qwen3 (as verl's docs and most recipes write it): <think> was graded."""
    call, final, answer, reasoning, _ = CASES["qwen3"]
    loop, out, record, _ = run_family(tmp_path, "qwen3", [call, final], tool_parser="hermes")
    assert loop.family is families.QWEN3
    assert record["trajectories"][-1]["response"] == answer and record["trajectories"][-1]["reasoning"] == reasoning
    assert families.family_for_parser("seed").split("<think>x</think>Done.") == families.TurnText("Done.", "x")


def test_special_tokens_include_every_added_token_the_vocabulary_flags_special():
    """GLM's <|user|> is special in tokenizer_config.json but not among all_special_tokens: it stayed in the answer."""
    from tokenizers import AddedToken

    from agentrl.verl.agent_loop import special_tokens

    tok = family_tokenizer("qwen2.5")
    tok.add_tokens([AddedToken("<|user|>", special=True)])
    assert "<|user|>" not in tok.all_special_tokens  # the tokenizer's own list leaves it out
    assert "<|user|>" in special_tokens(tok)
    assert families.GLM45.split("The answer is 85.<|user|>", special_tokens(tok)).answer == "The answer is 85."


def test_a_parser_that_raises_is_a_malformed_call_not_a_dead_rollout(tmp_path, monkeypatch):
    from agentrl.verl import parsers

    def explode(text):
        if text.startswith("["):
            raise KeyError("a reader bug")

    monkeypatch.setattr(parsers.Llama3PythonicToolParser, "find", staticmethod(explode))
    monkeypatch.setattr(parsers._TextParser, "_calls", lambda self, text: type(self).find(text) or [])
    _, out, record, _ = run_family(tmp_path, "llama3.2", ["[add(a=37, b=48)]", "The answer is 85."],
                                   tool_parser="llama3_pythonic")
    calls, errors = _first_turn(record)
    assert calls == [] and "KeyError" in errors[0] and out.reward_score == 1.0


@pytest.mark.parametrize("arguments,why", [
    ({"x": b"z"}, "bytes"), ({"x": float("nan")}, "nan"), ({"x": {1: 2}}, "key 1"), ('{"x": -Infinity}', "not JSON"),
    ("[1, 2]", "JSON object"), ({"x": {1, 2}}, "set"), ({"x": 1j}, "complex"),
])
def test_the_gate_refuses_what_json_cannot_carry(arguments, why):
    with pytest.raises(ValueError, match=why):
        json_arguments(arguments)


def test_the_gate_keeps_json_as_json():
    assert json_arguments({"x": (1, 2), "y": None, "z": "é"}) == {"x": [1, 2], "y": None, "z": "é"}
    assert json_arguments("") == {} and json_arguments('{"a": [1.5, true]}') == {"a": [1.5, True]}


def test_glm_string_values_keep_their_whitespace_and_json_values_are_typed():
    from agentrl.verl.parsers import StrictGLMToolParser

    convert = StrictGLMToolParser._convert_arg_value
    assert convert("  indented\n  code") == "  indented\n  code"  # verl stripped it to "indented\n  code"
    assert convert("48") == 48 and convert(" [1, 2] ") == [1, 2] and convert("Dallas") == "Dallas"
    assert convert("NaN") == "NaN"  # text, not a float JSON cannot carry


def _through_registry(parser_name: str, text: str):
    """A turn through verl's parser registry (agentrl's parser for the name) and the episode's reading. The
    tokenizer is the Qwen2.5 fixture's byte-level BPE: these families' own tokens are not in tests/fixtures."""
    import asyncio

    from verl.experimental.agent_loop.tool_parser import ToolParser

    from agentrl.episode import read_turn
    from agentrl.verl.agent_loop import parse_turn

    tok = family_tokenizer("qwen2.5")
    family = families.family_for_parser(parser_name)
    turn = asyncio.run(parse_turn(ToolParser.get_tool_parser(parser_name, tok), tok,
                                  tok.encode(text, add_special_tokens=False)))
    return read_turn(family, turn)


KIMI_CALL = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>'
             '{"a": 37, "b": 48}<|tool_call_end|><|tool_calls_section_end|>')


def test_kimi_k2_calls_leave_the_answer_and_broken_ones_are_reported():
    said = _through_registry("kimi", "Let me add." + KIMI_CALL)
    assert [(c.name, c.arguments) for c in said.calls] == [("add", {"a": 37, "b": 48})]
    assert said.answer == "Let me add." and said.malformed == []  # the generic family graded the section as the answer
    broken = _through_registry("kimi", KIMI_CALL.replace('"b": 48', '"b": '))
    assert broken.calls == [] and "not valid JSON" in broken.malformed[0]  # verl's ran add with {}
    assert _through_registry("kimi", "It is 85.") == ("It is 85.", "", [], [])


def test_seed_oss_calls_inside_its_reasoning_are_not_run():
    call = "<seed:tool_call>\n<function=add>\n<parameter=a>37</parameter>\n<parameter=b>48</parameter>\n</function>\n" \
           "</seed:tool_call>"
    thinking = _through_registry("seed", "<seed:think>I could write " + call + " but 85 is known.</seed:think>It is 85.")
    assert thinking.calls == [] and thinking.malformed == [] and thinking.answer == "It is 85."  # verl's ran it
    assert "I could write" in thinking.reasoning
    said = _through_registry("seed", "<seed:think>add</seed:think>" + call)
    assert [(c.name, c.arguments) for c in said.calls] == [("add", {"a": 37, "b": 48})] and said.answer == ""
    half = _through_registry("seed", call.replace("48</parameter>", "48"))
    assert half.calls == [] and "each closed" in half.malformed[0]


def test_kimi_and_seed_are_found_from_their_markers():
    assert families.detect_family("{{ '<|im_system|>tool_declare<|im_middle|>' }}").name == "kimi-k2"
    assert families.detect_family("{%- set toolcall_begin_token = '<seed:tool_call>' -%}").name == "seed-oss"


def test_glm_46_literal_newline_escapes_are_read(tmp_path):
    """GLM-4.6 may write its markup's newlines as backslash-n: the tool name was "add\\n" (an unknown tool)."""
    turn = "<tool_call>add\\n<arg_key>a</arg_key>\\n<arg_value>37</arg_value>\\n<arg_key>b</arg_key>\\n" \
           "<arg_value>48</arg_value>\\n</tool_call>"
    _, out, record, _ = run_family(tmp_path, "glm-4.5", [turn, "\n<think></think>\nThe answer is 85."])
    calls, errors = _first_turn(record)
    assert [(c["name"], c["arguments"]) for c in calls] == [("add", {"a": 37, "b": 48})] and errors == []
    assert out.reward_score == 1.0


def test_glm_values_written_with_json_string_escapes_are_json():
    from agentrl.callformats import glm_value

    assert glm_value('[{\\"id\\": \\"1\\", \\"task\\": \\"check\\"}]') == [{"id": "1", "task": "check"}]
    assert glm_value('say \\"hi\\"') == 'say \\"hi\\"'  # not JSON either way: the text as written


DS_V31 = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 37, \"b\": 48}<｜tool▁call▁end｜>"
          "<｜tool▁calls▁end｜>")
DS_V3 = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>add\n```json\n{\"a\": 37, \"b\": 48}\n```"
         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
GRANITE = '<|tool_call|>[{"name": "add", "arguments": {"a": 37, "b": 48}}]'


@pytest.mark.parametrize("parser,turn", [("deepseek_v3", DS_V3), ("deepseek_v31", DS_V31), ("granite", GRANITE)])
def test_deepseek_and_granite_calls_are_read_and_broken_ones_reported(parser, turn):
    """verl 0.9.1 has no parser for DeepSeek V3/V3.1 or Granite 3: these are agentrl's, registered in verl's registry."""
    said = _through_registry(parser, "Let me add." + turn)
    assert [(c.name, c.arguments) for c in said.calls] == [("add", {"a": 37, "b": 48})]
    assert said.answer == "Let me add." and said.malformed == []
    broken = _through_registry(parser, turn.replace('"b": 48', '"b": 1e999').replace("48}", "}"))
    assert broken.calls == [] and len(broken.malformed) == 1 and broken.answer == ""
    cut = _through_registry(parser, turn[: len(turn) // 2])
    assert cut.calls == [] and len(cut.malformed) == 1


def test_deepseek_and_granite_are_found_from_their_template_markers():
    assert families.detect_family("{{'<｜tool▁calls▁begin｜>'}}").name == "deepseek-v3"
    assert families.detect_family("{{- '<|tool_call|>' + tool_calls | tojson }}").name == "granite"
