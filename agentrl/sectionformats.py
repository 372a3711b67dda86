"""Formats whose calls sit in a delimited section of the turn: Kimi K2, Seed-OSS, DeepSeek V3/V3.1, Granite 3.

    kimi_calls("<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>"
               '{"a": 1}<|tool_call_end|><|tool_calls_section_end|>')      # [{"name": "add", "arguments": {"a": 1}, ...}]
    seed_calls("<seed:think>...</seed:think><seed:tool_call>\n<function=add>\n<parameter=a>1</parameter>\n"
               "</function>\n</seed:tool_call>")                           # [{"name": "add", "arguments": {"a": 1}}]
    deepseek_calls("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 1}<｜tool▁call▁end｜>"
                   "<｜tool▁calls▁end｜>")                                  # [{"name": "add", "arguments": {"a": 1}}]
    granite_calls('<|tool_call|>[{"name": "add", "arguments": {"a": 1}}]')  # [{"name": "add", "arguments": {"a": 1}}]

The same contract as :mod:`agentrl.callformats`: None when the turn attempts no call, ValueError (only) when it
attempts one and writes it wrong, values of JSON's types. Call markup outside its section (a Kimi call token or
the bare counter ``functions.NAME:0``, a DeepSeek call marker) is such an attempt: the peers read no call there and
grade the markup as the answer; here it is reported. verl 0.9.1 has no parser for DeepSeek V3/V3.1 or Granite
3; its Kimi and Seed parsers run a call whose arguments are not JSON with ``{}`` and a call quoted in reasoning.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentrl.callcheck import guarded, json_value
from agentrl.callformats import XML_VALUE, json_or_none, refuse_constant

_KIMI_SECTION = re.compile(r"<\|tool_calls_section_begin\|>(.*?)(?:<\|tool_calls_section_end\|>|$)", re.DOTALL)
_KIMI_CALL = re.compile(r"\s*<\|tool_call_begin\|>\s*(?P<id>[^<]*?)\s*<\|tool_call_argument_begin\|>(?P<args>.*?)"
                        r"<\|tool_call_end\|>\s*", re.DOTALL)
_KIMI_ID = re.compile(r"^(?:functions\.)?(?P<name>[A-Za-z_][\w.\-]*?)(?::\d+)?$")
# call markup outside a section: a call token, or the bare counter functions.NAME:N before its arguments
_KIMI_STRAY = re.compile(r"<\|tool_call(?:_begin|_argument_begin|_end|s_section_end)\|>"
                         r"|\bfunctions\.[A-Za-z_][\w.\-]*:\d+(?=\s*(?:\{|<\|tool_call_argument_begin\|>))")
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)


def kimi_calls(text: str) -> list[dict] | None:
    """Kimi K2 calls: ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>
    {json}<|tool_call_end|>…<|tool_calls_section_end|>``. None when the turn has no section."""
    return guarded(_kimi_calls, text)


def _kimi_calls(text: str) -> list[dict] | None:
    stray = _KIMI_STRAY.search(_KIMI_SECTION.sub("", _THINK.sub("", text)))
    if stray:  # the peers read no call and keep the markup as the answer
        raise ValueError(f"{stray.group(0)} outside <|tool_calls_section_begin|>…<|tool_calls_section_end|>: write "
                         "every call inside the section")
    if "<|tool_calls_section_begin|>" not in text:
        return None
    calls = []
    for m in _KIMI_SECTION.finditer(text):
        if not m.group(0).endswith("<|tool_calls_section_end|>"):
            raise ValueError("<|tool_calls_section_begin|> is not closed with <|tool_calls_section_end|>")
        body, at = m.group(1), 0
        while at < len(body.rstrip()):
            call = _KIMI_CALL.match(body, at)
            if not call:
                raise ValueError("write each call as <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>"
                                 "{json arguments}<|tool_call_end|>")
            name = _KIMI_ID.match(call.group("id"))
            if not name:
                raise ValueError(f"{call.group('id')!r} is not a call id (functions.NAME:0)")
            try:
                args = json.loads(call.group("args"))
            except json.JSONDecodeError as exc:
                raise ValueError(f"the arguments of {call.group('id')} are not valid JSON ({exc.msg})") from None
            if not isinstance(args, dict):
                raise ValueError(f"the arguments of {call.group('id')} must be a JSON object")
            calls.append({"name": name.group("name"), "arguments": json_value(args, "the arguments"),
                          "id": call.group("id")})
            at = call.end()
    return calls


_SEED_BLOCK = re.compile(r"<seed:tool_call>(.*?)(?:</seed:tool_call>|$)", re.DOTALL)
_SEED_CALL = re.compile(r"^\s*<function=([^>\n<]+)>\s*((?:<parameter=[^>\n<]+>" + XML_VALUE
                        + r"</parameter>\s*)*)</function>\s*$", re.DOTALL)
_SEED_PARAMETER = re.compile(r"<parameter=([^>\n<]+)>(.*?)</parameter>", re.DOTALL)
SEED_THINK = re.compile(r"<seed:think>.*?(?:</seed:think>|$)", re.DOTALL)


def seed_calls(text: str) -> list[dict] | None:
    """Seed-OSS calls: ``<seed:tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></seed:tool_call>``,
    outside ``<seed:think>`` (a call quoted while thinking is not a call). A value is JSON when it reads as JSON
    (``48``, ``[1, 2]``), else the string as written. None when the turn has no ``<seed:tool_call>``."""
    return guarded(_seed_calls, text)


def _seed_calls(text: str) -> list[dict] | None:
    text = SEED_THINK.sub("", text)
    if "<seed:tool_call>" not in text:
        return None
    calls = []
    for m in _SEED_BLOCK.finditer(text):
        if not m.group(0).endswith("</seed:tool_call>"):
            raise ValueError("<seed:tool_call> is not closed with </seed:tool_call>")
        call = _SEED_CALL.match(m.group(1))
        if not call:
            raise ValueError("inside <seed:tool_call> write <function=NAME>, then each argument as "
                             "<parameter=KEY>VALUE</parameter> (each closed), then </function>")
        args = {key.strip(): _typed(value) for key, value in _SEED_PARAMETER.findall(call.group(2))}
        calls.append({"name": call.group(1).strip(), "arguments": json_value(args, "the arguments")})
    return calls


def _typed(value: str) -> Any:
    parsed = json_or_none(value.strip())
    return value if parsed is None or isinstance(parsed, str) else parsed


_DS_CALLS_BEGIN, _DS_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
_DS_CALL = re.compile(r"\s*<｜tool▁call▁begin｜>(?P<head>.*?)<｜tool▁sep｜>(?P<body>.*?)<｜tool▁call▁end｜>\s*", re.DOTALL)
_DS_STRAY = re.compile(r"<｜tool▁(?:call▁begin|sep|call▁end|calls▁end|calls▁begin)｜>")
_DS_V3_BODY = re.compile(r"^(?P<name>[^\n`]+?)\s*\n```(?:json)?\s*\n(?P<args>.*?)\n?```\s*$", re.DOTALL)


def deepseek_calls(text: str) -> list[dict] | None:
    """DeepSeek V3 / V3.1 calls inside ``<｜tool▁calls▁begin｜>…<｜tool▁calls▁end｜>``: V3 writes
    ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME`` then the arguments in a json code fence, V3.1
    ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}``. None when the turn has no call section."""
    return guarded(_deepseek_calls, text)


def _deepseek_calls(text: str) -> list[dict] | None:
    text = _THINK.sub("", text)
    at = text.find(_DS_CALLS_BEGIN)
    end = text.find(_DS_CALLS_END, at) if at >= 0 else -1
    if at >= 0 and end < 0:
        raise ValueError(f"{_DS_CALLS_BEGIN} is not closed with {_DS_CALLS_END}")
    stray = _DS_STRAY.search(text if at < 0 else text[:at] + text[end + len(_DS_CALLS_END):])
    if stray:  # vLLM reads no call (or only the first section) and keeps the rest as the answer
        raise ValueError(f"{stray.group(0)} outside the call section: write every call in one "
                         f"{_DS_CALLS_BEGIN}…{_DS_CALLS_END}")
    if at < 0:
        return None
    body, pos, calls = text[at + len(_DS_CALLS_BEGIN):end], 0, []
    while pos < len(body.rstrip()):
        m = _DS_CALL.match(body, pos)
        if not m:
            raise ValueError("write each call as <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json arguments}<｜tool▁call▁end｜>")
        name, args = m.group("head").strip(), m.group("body")
        if name == "function":  # V3: the name, then the arguments in a json code fence
            v3 = _DS_V3_BODY.match(args.strip())
            if not v3:
                raise ValueError("after function<｜tool▁sep｜> write the name, then the arguments in a ```json fence")
            name, args = v3.group("name").strip(), v3.group("args")
        if not name:
            raise ValueError("a call has no tool name before <｜tool▁sep｜>")
        calls.append({"name": name, "arguments": _json_object(args, name)})
        pos = m.end()
    return calls


_GRANITE_MARK = re.compile(r"<\|tool_call\|>|<tool_call>")


def granite_calls(text: str) -> list[dict] | None:
    """Granite 3.x calls: ``<|tool_call|>[{"name": ..., "arguments": {...}}, ...]`` (Granite 3.1 also writes the
    marker as the text ``<tool_call>``; vLLM reads both). None without either marker."""
    return guarded(_granite_calls, text)


def _granite_calls(text: str) -> list[dict] | None:
    mark = _GRANITE_MARK.search(text)
    if mark is None:
        return None
    body = text[mark.end():].replace("<|end_of_text|>", "").strip()
    try:
        listed, end = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the list after {mark.group(0)} is not valid JSON ({exc.msg})") from None
    if body[end:].strip():
        raise ValueError(f"text after the call list; reply with {mark.group(0)}[...] alone")
    if not listed:
        raise ValueError(f"the call list after {mark.group(0)} is empty")
    calls = []
    for call in listed if isinstance(listed, list) else [listed]:
        if not (isinstance(call, dict) and isinstance(call.get("name"), str)):
            raise ValueError('each call needs "name" (a string) and "arguments" (an object)')
        calls.append({"name": call["name"], "arguments": _json_object(call.get("arguments"), call["name"])})
    return calls


def _json_object(args: Any, name: str) -> dict:
    if isinstance(args, str):
        try:
            args = json.loads(args, parse_constant=refuse_constant)
        except ValueError as exc:
            raise ValueError(f"the arguments of {name} are not valid JSON ({exc})") from None
    if not isinstance(args, dict):
        raise ValueError(f"the arguments of {name} must be a JSON object")
    return json_value(args, "the arguments")
