"""Each format's tool-call markup read from model text: the calls, or why an attempted call does not parse.

    llama_json_calls('{"name": "add", "parameters": {"a": 1}}')     # [{"name": "add", "arguments": {"a": 1}}]
    pythonic_calls("[add(a=1, b=2)]")                                # [{"name": "add", "arguments": {"a": 1, "b": 2}}]
    pythonic_calls("It is 18 C.")                                    # None: not a call attempt
    pythonic_calls("[bad(x=b'z')]")                                  # ValueError: argument x is bytes, ...
    mistral_calls('[TOOL_CALLS]add[ARGS]{"a": 1}')                   # [{"name": "add", "arguments": {"a": 1}}]
    harmony_calls(' to=functions.add<|channel|>commentary json<|message|>{"a": 1}<|call|>')  # ([...], [])

A reader returns None for a turn that attempts no call and raises ValueError (never anything else) for one it
attempts but writes wrong; the value types are JSON's (:func:`agentrl.callcheck.json_value`). The ``*_malformed``
finders give the reasons for formats whose calls verl's own parsers read (hermes, qwen3_coder, glm). Which
family uses which reader, and how a family is found from a model folder, is :mod:`agentrl.families`.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, Callable

from agentrl.callcheck import guarded, json_value

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
TOOL_CALL_BLOCK = _TOOL_CALL  # a <tool_call> block, closed or running to the end of the turn


def _per_block(text: str, why: Callable[[str], str | None]) -> list[str]:
    """One reason per broken ``<tool_call>`` block (``why(body)``, and whether it is closed), so a broken call is
    reported to the model once."""
    bad = []
    for m in _TOOL_CALL.finditer(text):
        reasons = [r for r in (why(m.group(1)),) if r]
        if not m.group(0).endswith("</tool_call>"):
            reasons.append("<tool_call> is not closed with </tool_call>")
        if reasons:
            bad.append("; ".join(reasons))
    return bad


def _hermes_why(block: str) -> str | None:
    try:
        call = json.loads(block, parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        return f"the JSON inside <tool_call> is not valid ({exc.msg} at column {exc.colno})"
    except ValueError as exc:  # NaN, Infinity: Python's json reads them, JSON has no such values
        return f"the JSON inside <tool_call> is not valid ({exc} is not JSON; write a number or a string)"
    args = call.get("arguments") if isinstance(call, dict) else None
    if isinstance(args, str) and args.lstrip().startswith("{"):  # an object serialized twice: read as vLLM does
        args = json_or_none(args)
    if not (isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(args, dict)):
        return 'the JSON inside <tool_call> needs "name" (a string) and "arguments" (an object)'
    return None


def hermes_malformed(text: str) -> list[str]:
    return _per_block(text, _hermes_why)


# a parameter's value ends at its own </parameter>: one that runs into the next <parameter= or </function> is
# half-written (the peers guess where it ended; agentrl reports it)
def smollm2_calls(text: str) -> list[dict] | None:
    """SmolLM2's calls: a JSON list of ``{"name": ..., "arguments": {...}}`` inside ``<tool_call>…</tool_call>``
    (SmolLM2-Instruct's published function-calling format); a lone object is read as a list of one, and ``[]``
    is no call. None: no ``<tool_call>`` in the text; ValueError: an attempt that does not parse."""
    blocks = _TOOL_CALL.findall(text)
    if not blocks:
        return None
    if text.count("<tool_call>") > text.count("</tool_call>"):
        raise ValueError("<tool_call> is not closed with </tool_call>")
    calls = []
    for block in blocks:
        try:
            parsed = json.loads(block)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the JSON inside <tool_call> is not valid ({exc.msg} at column {exc.colno})") from None
        for call in parsed if isinstance(parsed, list) else [parsed]:
            if not (isinstance(call, dict) and isinstance(call.get("name"), str)
                    and isinstance(call.get("arguments"), dict)):
                raise ValueError('<tool_call> holds a JSON list of {"name": a string, "arguments": an object}')
            calls.append({"name": call["name"], "arguments": call["arguments"]})
    return calls


def json_or_none(text: str) -> Any:
    """``text`` as strict JSON (no NaN/Infinity), or None."""
    try:
        return json.loads(text, parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        return None


def refuse_constant(name: str) -> Any:
    raise ValueError(name)


XML_VALUE = r"(?:(?!<parameter=|</parameter>|<function=|</function>).)*"
# </function> may be left out before </tool_call>, which ends the call unambiguously (vLLM and SGLang read it)
_QWEN3_CODER_CALL = re.compile(
    r"^\s*<function=([^>\n<]+)>\s*((?:<parameter=[^>\n<]+>" + XML_VALUE + r"</parameter>\s*)*)"
    r"(?:</function>)?\s*$", re.DOTALL)
_BARE_FUNCTION = re.compile(r"<function=.*?(?:</function>|$)", re.DOTALL)


def wrap_bare_functions(text: str) -> str:
    """Qwen3-Coder calls written without their ``<tool_call>`` wrapper, wrapped (vLLM reads them so)."""
    if "<function=" not in text:
        return text
    parts = re.split(r"(<tool_call>.*?(?:</tool_call>|$))", text, flags=re.DOTALL)
    return "".join(part if part.startswith("<tool_call>") else
                   _BARE_FUNCTION.sub(lambda m: "<tool_call>\n" + m.group(0) + ("\n</tool_call>" if m.group(0).endswith(
                       "</function>") else ""), part) for part in parts)


def _tagged_malformed(call: re.Pattern, how: str):
    """A finder of broken calls in a format that wraps each call's own markup in <tool_call>…</tool_call>:
    a block ``call`` does not match, or an unclosed <tool_call>; ``how`` says how a call is written."""
    return lambda text: _per_block(text, lambda block: None if call.match(block) else how)


_qwen3_coder_tagged = _tagged_malformed(
    _QWEN3_CODER_CALL, "inside <tool_call> write <function=NAME>, then each argument as "
                       "<parameter=KEY>VALUE</parameter> (each closed), then </function>")


def qwen3_coder_malformed(text: str) -> list[str]:
    return _qwen3_coder_tagged(wrap_bare_functions(text))


_QWEN3_CODER_PARAMETER = re.compile(r"<parameter=([^>\n<]+)>(" + XML_VALUE + r")</parameter>", re.DOTALL)


def qwen3_coder_values(text: str) -> list[tuple[str, dict[str, str]]]:
    """Each well-formed Qwen3-Coder call of the turn: its name and raw parameter values, trimmed as the format's
    own parser trims them (one newline after ``<parameter=KEY>`` and one before ``</parameter>``; indentation
    is part of a value)."""
    out = []
    for block in _TOOL_CALL.findall(wrap_bare_functions(text)):
        call = _QWEN3_CODER_CALL.match(block)
        if call:
            values = {key: value.removeprefix("\n").removesuffix("\n")
                      for key, value in _QWEN3_CODER_PARAMETER.findall(call.group(2))}
            out.append((call.group(1), values))
    return out


def xml_boolean(raw: str) -> bool | str:
    """A boolean parameter's value: ``true``/``false`` whatever its case and indentation; anything else stays
    the text the model wrote, for the tool's own validation to answer (the peers read it as false, silently)."""
    word = raw.strip().lower()
    return word == "true" if word in ("true", "false") else raw


_GLM_CALL = re.compile(r"^\s*([^<>\n]+?)\s*((?:<arg_key>[^<]*</arg_key>\s*<arg_value>.*?</arg_value>\s*)*)$", re.DOTALL)


_GLM_LITERAL_NEWLINE = re.compile(r"\\n(?=\s*(?:<arg_key>|<arg_value>|</tool_call>))|(?<=</arg_key>)\\n|(?<=</arg_value>)\\n")


def glm_unescape(text: str) -> str:
    """GLM-4.6 sometimes writes its markup's newlines as the two characters backslash-n (``todo\\n<arg_key>``);
    inside a ``<tool_call>`` those become newlines, so the tool is ``todo``, not ``todo\\n`` (SGLang reads them so)."""
    if "\\n" not in text:
        return text
    return TOOL_CALL_BLOCK.sub(lambda m: _GLM_LITERAL_NEWLINE.sub("\n", m.group(0)), text)


def glm_value(raw: str) -> Any:
    """An ``<arg_value>``: JSON when it reads as JSON (``48``, ``[1, 2]``), also when GLM-4.6 wrote it with
    JSON-string escapes (``[{\\"id\\": 1}]``); otherwise the string as written, whitespace kept."""
    value = json_or_none(raw.strip())
    if value is None and '\\"' in raw:
        unescaped = json_or_none('"' + raw.strip() + '"')
        value = json_or_none(unescaped.strip()) if isinstance(unescaped, str) else None
        value = None if isinstance(value, str) else value
    if value is None or (isinstance(value, str) and raw.strip() != raw):
        return raw
    return value


_glm_tagged = _tagged_malformed(
    _GLM_CALL, "inside <tool_call> write the function name, then each argument as "
               "<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>")


def glm_malformed(text: str) -> list[str]:
    return _glm_tagged(glm_unescape(text))


_LLAMA_CALL = re.compile(r'\{\s*"name"\s*:')


def llama_json_calls(text: str) -> list[dict] | None:
    """Llama 3.x JSON calls: ``{"name": ..., "parameters": {...}}`` (``"arguments"`` also read), after
    ``<|python_tag|>`` or prose, joined by ``;``, newlines, repeated ``<|python_tag|>`` or prose, as vLLM reads
    them. None when the turn holds no ``{"name": ...`` object; raises ValueError when one is broken (a call after
    a broken one is not guessed at: the format has no delimiter that says where the broken one ends)."""
    return guarded(_llama_json_calls, text)


def _llama_json_calls(text: str) -> list[dict] | None:
    body = _LLAMA_ENDS.sub("", text).replace("<|python_tag|>", "\n")
    calls, decoder, at = [], json.JSONDecoder(), 0
    while (found := _LLAMA_CALL.search(body, at)) is not None:
        try:
            call, at = decoder.raw_decode(body, found.start())
        except json.JSONDecodeError as exc:
            raise ValueError(f"the call is not valid JSON ({exc.msg} at column {exc.colno})") from None
        args = call.get("parameters", call.get("arguments")) if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(args, dict):
            raise ValueError('a call needs "name" (a string) and "parameters" (an object)')
        calls.append({"name": call["name"], "arguments": json_value(args, "the arguments")})
    return calls or None


_LLAMA_ENDS = re.compile(r"<\|eot_id\|>|<\|eom_id\|>|<\|end_of_text\|>|<\|eot\|>|<\|end\|>")
_PYTHONIC_START = re.compile(r"^\s*(?:<\|python_start\|>)?\s*\[\s*[A-Za-z_][\w.]*\s*\(")
# a call list somewhere in the turn: [name() or [name(key=
_PYTHONIC_ANYWHERE = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(\s*(?:\)|[A-Za-z_]\w*\s*=)")


def pythonic_calls(text: str) -> list[dict] | None:
    """Llama 3.2 / 4 pythonic calls: ``[add(a=1, b=2), multiply(a=3, b=4)]``. None when not a call attempt.

    A call list after prose is an attempt, reported (vLLM takes the turn as text, SGLang runs the list): the
    format puts the list alone in the turn."""
    return guarded(_pythonic_calls, text)


def _pythonic_calls(text: str) -> list[dict] | None:
    if not _PYTHONIC_START.match(text):
        if _PYTHONIC_ANYWHERE.search(_LLAMA_ENDS.sub("", text)):
            raise ValueError("the call list must be the whole turn: write [name(key=value, ...)] with no text before it")
        return None
    body = _LLAMA_ENDS.sub("", text).replace("<|python_start|>", "").replace("<|python_end|>", "").strip()
    try:
        tree = ast.parse(body, mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"the call list is not valid Python ({exc.msg})") from None
    if not isinstance(tree, ast.List) or not all(isinstance(c, ast.Call) for c in tree.elts):
        raise ValueError("write a list of calls: [name(key=value, ...), ...]")
    calls = []
    for node in tree.elts:
        if node.args or any(kw.arg is None for kw in node.keywords):
            raise ValueError("pass arguments by keyword: name(key=value)")
        if not _dotted_name(node.func):
            raise ValueError("call a tool by its name: name(key=value)")
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise ValueError("argument values must be literals (numbers, strings, lists, dicts)") from None
        calls.append({"name": ast.unparse(node.func), "arguments": json_value(args, "the arguments")})
    return calls


def _dotted_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) or (isinstance(node, ast.Attribute) and _dotted_name(node.value))


# v11: [TOOL_CALLS]NAME[ARGS]{...}; a text decoded with special tokens skipped (vLLM's v11 tokenizer) has no [ARGS]
_MISTRAL_NEW = re.compile(r"\[TOOL_CALLS\]([^\[\]{}\s]+)(?:\[CALL_ID\]([A-Za-z0-9]+))?(?:\[ARGS\]|(?=\{))")


def mistral_calls(text: str) -> list[dict] | None:
    """Mistral calls, old form ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]`` or new form
    ``[TOOL_CALLS]name[ARGS]{...}`` (``[CALL_ID]id`` optional; ``[TOOL_CALLS]name{...}`` too, the new form as a
    tokenizer that skips the ``[ARGS]`` control token decodes it). None when the turn has no ``[TOOL_CALLS]``."""
    return guarded(_mistral_calls, text)


def _mistral_calls(text: str) -> list[dict] | None:
    at = text.find("[TOOL_CALLS]")
    if at < 0:
        return None
    body = text[at:].replace("</s>", "")
    decoder = json.JSONDecoder()
    if _MISTRAL_NEW.match(body):
        calls, pos = [], 0
        while pos < len(body.rstrip()):
            m = _MISTRAL_NEW.match(body, pos)
            if not m:
                raise ValueError("write each call as [TOOL_CALLS]NAME[ARGS]{json arguments}")
            try:
                args, pos = decoder.raw_decode(body, m.end())
            except json.JSONDecodeError as exc:
                raise ValueError(f"the arguments of {m.group(1)} are not valid JSON ({exc.msg})") from None
            if not isinstance(args, dict):
                raise ValueError(f"the arguments of {m.group(1)} must be a JSON object")
            calls.append({"name": m.group(1), "arguments": json_value(args, "the arguments"),
                          **({"id": m.group(2)} if m.group(2) else {})})
            while pos < len(body) and body[pos].isspace():
                pos += 1
        return calls
    listed, pos = [], 0
    while body.startswith("[TOOL_CALLS]", pos):  # a list per [TOOL_CALLS]; other text after a list is not read
        pos += len("[TOOL_CALLS]")
        pos += len(body[pos:]) - len(body[pos:].lstrip())
        try:
            one, pos = decoder.raw_decode(body, pos)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the list after [TOOL_CALLS] is not valid JSON ({exc.msg})") from None
        listed += one if isinstance(one, list) else [one]
        pos += len(body[pos:]) - len(body[pos:].lstrip())
    calls = []
    for call in listed:
        if not (isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), dict)):
            raise ValueError('each call needs "name" (a string) and "arguments" (an object)')
        calls.append({"name": call["name"], "arguments": json_value(call["arguments"], "the arguments"),
                      **({"id": call["id"]} if "id" in call else {})})
    return calls


# gpt-oss (harmony): messages are <|start|>ROLE[ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>json|
# json]<|message|>BODY(<|end|>|<|call|>|<|return|>). The generation prompt ends with "<|start|>assistant", so the
# first message of a turn arrives without it.
_HARMONY_MESSAGE = re.compile(
    r"(?P<header>.*?)<\|message\|>(?P<body>.*?)(?:<\|end\|>|<\|call\|>|<\|return\|>|$)", re.DOTALL)
_RECIPIENT = re.compile(r"to=([^\s<]+)")


def harmony_messages(text: str) -> list[dict]:
    """A gpt-oss turn as messages: ``{"channel", "recipient", "body"}``. Text outside any message is dropped."""
    if not text.startswith("<|start|>"):
        text = "<|start|>assistant" + text
    messages = []
    for chunk in text.split("<|start|>")[1:]:
        m = _HARMONY_MESSAGE.match(chunk)
        if not m:
            continue
        header = m.group("header")
        channel = ""
        if "<|channel|>" in header:
            channel = header.split("<|channel|>", 1)[1].split()[0] if header.split("<|channel|>", 1)[1].split() else ""
        recipient = _RECIPIENT.search(header)
        messages.append({"channel": channel.split("<|")[0], "recipient": recipient.group(1) if recipient else None,
                         "body": m.group("body")})
    return messages


def harmony_calls(text: str) -> tuple[list[dict], list[str]]:
    """Function calls of a gpt-oss turn (messages to ``functions.NAME``) and the reasons broken ones failed."""
    calls, bad = [], []
    for msg in harmony_messages(text):
        recipient = msg["recipient"]
        if not recipient or not recipient.startswith("functions"):
            continue
        name = recipient[len("functions."):] if recipient.startswith("functions.") else ""
        try:
            args = json.loads(msg["body"]) if msg["body"].strip() else {}
            args = json_value(args, "the arguments") if isinstance(args, dict) else args
        except json.JSONDecodeError as exc:
            bad.append(f"the arguments to {recipient} are not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        except ValueError as exc:
            bad.append(f"the arguments to {recipient}: {exc}")
            continue
        if not name or not isinstance(args, dict):
            bad.append("address a call to=functions.NAME and send a JSON object of arguments")
            continue
        calls.append({"name": name, "arguments": args})
    return calls, bad


def split_harmony(text: str) -> tuple[str, str]:
    messages = harmony_messages(text)
    final = [m["body"] for m in messages if m["channel"] == "final"]
    analysis = [m["body"].strip() for m in messages if m["channel"] == "analysis"]
    preamble = [m["body"] for m in messages if m["channel"] == "commentary" and not m["recipient"]]
    return ("".join(final) if final else "".join(preamble)), "\n\n".join(a for a in analysis if a)


def parsed_malformed(parse: Callable[[str], Any]) -> Callable[[str], list[str]]:
    def malformed(text: str) -> list[str]:
        try:
            guarded(parse, text)
        except ValueError as exc:
            return [str(exc)]
        return []
    return malformed


def strip_blocks(pattern: str) -> Callable[[str], str]:
    regex = re.compile(pattern, re.DOTALL)
    return lambda text: regex.sub("", text)


def is_attempt(parse: Callable[[str], Any], text: str) -> bool:
    try:
        return guarded(parse, text) is not None
    except ValueError:
        return True


strip_tool_call = strip_blocks(r"<tool_call>.*?(?:</tool_call>|$)")
