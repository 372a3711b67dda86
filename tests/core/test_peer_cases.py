"""agentrl's tool-call reading held against vLLM's and SGLang's own parser tests.

The cases (tests/fixtures/families/peer_cases.json, each with its source file and test) go through the path the
agent loop takes: the family's tokenizer (published template and tokens, tests/fixtures/families), verl's parser
registry with agentrl's parsers (``agentrl.verl.agent_loop.parse_turn``), then the episode's reading
(``agentrl.episode.read_turn``: reasoning and markup stripped, the JSON gate, malformed reports). What stands in:
the tokenizer's vocabulary (a small byte-level BPE carrying the family's special tokens; no model hub here).

Every case: nothing raises, no call runs with arguments that are not a JSON object, and a turn the peer reads as a
call is never silently graded as an answer. A case agentrl reads differently is listed in DIFFERENCES with the
reason; a listed case that comes to agree fails too, so the list stays true. ``python -m pytest -s`` prints the
agreement per format, with verl's own parsers beside it on the formats they cover.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from test_family_loop import FAMILY_DATA, family_tokenizer
from verl.experimental.agent_loop import tool_parser as verl_parsers

from agentrl import families
from agentrl.callcheck import json_arguments
from agentrl.episode import read_turn
from agentrl.verl import parsers
from agentrl.verl.agent_loop import parse_turn, special_tokens

PEERS = json.loads((Path(__file__).parent.parent / "fixtures" / "families" / "peer_cases.json").read_text())
CASES = PEERS["cases"]

# format in the fixture -> (the family fixture whose template and tokens read it, agent.tool_parser, verl's own class)
FORMATS = {
    "hermes": ("qwen2.5", "auto", verl_parsers.HermesToolParser),
    "qwen3-coder": ("qwen3-coder", "auto", verl_parsers.Qwen3XMLToolParser),
    "glm-4.5": ("glm-4.5", "auto", verl_parsers.GLMToolParser),
    "llama3": ("llama3.1", "auto", None),
    "pythonic": ("llama3.2", "llama3_pythonic", None),
    "mistral": ("mistral-nemo", "auto", None),
    "mistral-v11": ("mistral-small-3.2", "auto", None),
    "gpt-oss": ("gpt-oss", "auto", verl_parsers.GptOssToolParser),
    "kimi-k2": ("kimi-k2", "auto", verl_parsers.KimiToolParser),
    "deepseek-v3.1": ("deepseek-v3.1", "auto", None),
    "granite": ("granite-3.3", "auto", None),
    "seed-oss": ("seed-oss", "auto", verl_parsers.SeedToolParser),
}

_PROSE = "the format puts the call list alone in the turn (vLLM agrees); the turn is reported as a malformed call"
_SIBLING = ("one unreadable call in a pythonic list makes the list malformed: nothing of it runs and the model is told "
            "which value; running the rest would act on a turn the model wrote wrong")
_TRAILING = "text after the list is not Python; the turn is reported as a malformed call, not run in part"
_NONFINITE = ("a list or object holding a number JSON cannot carry (1e999) is reported, not sent as the raw text to a "
              "parameter the schema types as a list or object (SGLang and vLLM degrade it to the string); a lone "
              "non-finite number is read as they read it, the string as written")
# case (source, from its test name on) -> why agentrl reads it differently, on purpose
DIFFERENCES = {
    "test_hermes_parser_non_streaming_tool_call_until_eos": (
        "a <tool_call> never closed is half-written: reported as malformed, not run (vLLM runs it)"),
    "test_hermes_parser_non_streaming_bare_string_arguments": (
        'arguments must be a JSON object; "hello" is reported as malformed, not sent to a tool (vLLM passes it on)'),
    "TestPythonicDetector.test_parse_streaming_complete_tool_call": _PROSE,
    "TestPythonicDetector.test_parse_streaming_text_before_tool_call": _PROSE,
    "TestPythonicDetector.test_parse_streaming_text_after_tool_call": _TRAILING,
    "TestPythonicDetector.test_parse_streaming_multiple_tool_calls": _TRAILING,
    "TestPythonicDetector.test_parse_streaming_with_python_start_and_end_token": _PROSE,
    "TestPythonicDetector.test_detect_and_parse_with_python_start_and_end_token": _PROSE,
    "test_extract_tool_calls_multiple_tools": (
        'arguments that are not JSON ("foo") are reported, not passed to the tool as text (the other five calls run; '
        "an empty body is {})"),
    "test_bad_sibling_call_does_not_drop_good_calls": _SIBLING,
    "test_non_finite_argument_rejected": _SIBLING,
    "test_good_call_survives_unparsable_sibling": _SIBLING,
    "TestExtractToolCalls.test_invalid_json_still_extracted": (
        "arguments that are not JSON are reported, not passed to the tool as text (vLLM hands on '{\"city\": "
        "\"Beijing\"'); the section is reported as a whole, as a pythonic list is, so its other call does not run"),
    "TestExtractToolCalls.test_invalid_funcall_id_skipped": (
        "an id without its :N counter is read as the tool's name (the counter is optional, as vLLM's own "
        "no_functions_prefix case shows); the tool layer answers that no tool invalid.0 exists, where vLLM drops the "
        "call without a word"),
    "test_extract_tool_calls_pre_v11_multiple_bot_tokens_raises": (
        "two [TOOL_CALLS] lists are two calls, as Mistral's v11 form repeats [TOOL_CALLS] before each call; vLLM's "
        "pre-v11 reader raises and reads none (before, agentrl ran the first and dropped the second silently)"),
    "test_extract_tool_calls_pre_v11_regex_fallback": (
        "text between [TOOL_CALLS] and the list is not the format; the turn is reported as malformed (vLLM searches "
        "the rest of the turn for a list)"),
    "TestLlama32Detector.test_invalid_then_valid_json": (
        "a broken call, and any call after it, is reported: the format has no delimiter that says where a broken call "
        "ends (SGLang skips ahead to the next object that parses and runs it)"),
    "TestQwen3CoderDetector.test_parse_streaming_multiple_tools": (
        "values are trimmed as Qwen3-Coder's own parser and vLLM trim them (one newline after <parameter=...> and one "
        "before </parameter>), so indentation written inside a value is kept; SGLang's streaming reader strips it all"),
    "TestGlm4MoeDetector.test_invalid_tool_call": (
        "a call to a tool that does not exist is answered by the tool layer (error: unknown tool 'invalid_func'), "
        "where SGLang drops it without a word and grades the markup as text"),
    "TestKimiK2Detector.test_tool_name_streaming": (
        "a section cut off inside its second call is half-written: reported as malformed, not run in part (SGLang's "
        "streaming hands on the first call and the second one's name)"),
    "TestPythonicDetector.test_parse_streaming_partial_tool_call": _PROSE,
    "TestPythonicDetector.test_parse_streaming_partial_nested_brackets": _PROSE,
    "test_extract_tool_calls[complex]": (
        "arguments cut off before their closing brace are not JSON: reported as malformed, not handed to the tool as "
        "text (vLLM's test expects the cut-off text as the arguments)"),
    "TestNonFiniteCoercion.test_non_finite_degrades_to_string[qwen3_coder-array-[1e999]]": _NONFINITE,
    "TestNonFiniteCoercion.test_non_finite_degrades_to_string[qwen3_coder-array-[1, 2, 1e999]]": _NONFINITE,
    "TestNonFiniteCoercion.test_non_finite_degrades_to_string[qwen3_coder-object-{\"x\": 1e999}]": _NONFINITE,
    "TestNonFiniteCoercion.test_non_finite_degrades_to_string[qwen3_coder-array-(1e999,)]": _NONFINITE,
    "TestNonFiniteCoercion.test_non_finite_degrades_to_string[qwen3_coder-object-{'x': 1e999}]": _NONFINITE,
    "test_implicit_parameter_close": (
        "a <parameter=...> that runs into the next one or into </function> is half-written: reported, not run (SGLang "
        "guesses where each value ended)"),
    "TestKimiK2Detector.test_partial_tool_call": (
        "a section cut off before <|tool_call_end|> is half-written: reported as malformed, not run (SGLang's streaming "
        "hands on the name and the arguments so far)"),
}


def _schemas() -> list:
    return [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {k: {"type": t} for k, t in props.items()}}}}
        for name, props in PEERS["tools"].items()]


def _key(case: dict) -> str:
    return case["source"].split("::", 1)[1]


def _agrees(calls: list[tuple[str, object]], expected: list[dict]) -> bool:
    return len(calls) == len(expected) and all(
        name == want["name"] and ("arguments" not in want or args == want["arguments"])
        for (name, args), want in zip(calls, expected))


def _loads_or_text(arguments: str):
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # verl's parsers pass text that is not JSON on as it is


def read_case(case: dict, own_parser: bool = True):
    """(calls run, malformed reports, graded answer) for a case, through the loop's path or verl's own parser."""
    fixture, tool_parser, verl_class = FORMATS[case["format"]]
    tokenizer = family_tokenizer(fixture)
    family = families.choose_family(tool_parser, tokenizer.chat_template, FAMILY_DATA[fixture]["model_type"])
    from verl.experimental.agent_loop.tool_parser import ToolParser

    parser = ToolParser.get_tool_parser(family.parser, tokenizer) if own_parser else verl_class(tokenizer)
    ids = tokenizer.encode(case["text"], add_special_tokens=False)
    turn = asyncio.run(parse_turn(parser, tokenizer, ids, parsers.tool_schemas(_schemas())))
    if not own_parser:  # verl's parser alone: what it would hand a tool
        return [(c.name, _loads_or_text(c.arguments)) for c in turn.calls], [], turn.text
    said = read_turn(family, turn, special_tokens(tokenizer))
    return [(c.name, c.arguments) for c in said.calls], said.malformed, said.answer


@pytest.mark.parametrize("case", CASES, ids=[f"{c['format']}:{_key(c)}" for c in CASES])
def test_peer_case(case):
    calls, malformed, answer = read_case(case)
    for _, args in calls:  # only JSON objects reach a tool
        assert json_arguments(args) == args
    # one report per broken call: never more reports than the calls the peer reads (one where it reads none)
    assert len(malformed) <= max(1, len(case["calls"])), malformed
    agrees = _agrees(calls, case["calls"])
    reason = DIFFERENCES.get(_key(case))
    if reason is None:
        assert agrees, f"reads {calls} (malformed: {malformed}); the peer's test expects {case['calls']}"
    else:
        assert not agrees, f"listed as a difference ({reason}) but now agrees: take it off the list"
        if case["calls"]:  # the peer reads a call: agentrl runs one or tells the model; never a silent answer
            assert calls or malformed, f"neither a call nor a malformed report; answer graded: {answer!r}"


def test_agreement_per_format(capsys):
    """The table the README gives: cases read as the peers' tests expect, agentrl and verl's own parsers."""
    rows = {}
    for case in CASES:
        fmt = case["format"]
        own = _agrees(read_case(case)[0], case["calls"])
        verl_class = FORMATS[fmt][2]
        verl_own = _agrees(read_case(case, own_parser=False)[0], case["calls"]) if verl_class else None
        row = rows.setdefault(fmt, [0, 0, 0])
        row[0] += 1
        row[1] += own
        row[2] += bool(verl_own)
    with capsys.disabled():
        print("\nformat        cases  agentrl  verl's own parser")
        for fmt, (n, own, verl_own) in rows.items():
            print(f"{fmt:13} {n:5}  {own:7}  {verl_own if FORMATS[fmt][2] else '-':>5}")
    listed = sum(1 for c in CASES if _key(c) in DIFFERENCES)
    assert sum(r[1] for r in rows.values()) == len(CASES) - listed
