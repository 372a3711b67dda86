"""Model families: how each writes tool calls and reasoning, found from the model folder.

    family = detect_family("Qwen/Qwen3-8B")                     # reads chat template, tokenizer, config.json
    family.name, family.parser                                   # "qwen3", "hermes"
    family.split('<think>add them</think>The answer is 5.')      # TurnText(answer="The answer is 5.", reasoning="add them")
    family.malformed('<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>')   # ["...not valid JSON..."]

A model is trained and evaluated with its own tool-call format. The format is chosen from the chat template
(what the model was taught to write) and ``config.json``'s ``model_type``; ``agent.tool_parser`` in the
config overrides it. For each family this module knows:

- ``parser``: the verl tool-call parser name (verl's own, or one agentrl registers in ``agentrl.verl.parsers``);
- ``split(text)``: the visible answer apart from the reasoning (``<think>`` blocks, gpt-oss's analysis
  channel) and the tool-call markup; text is the turn decoded *with* special tokens;
- ``malformed(text)``: the calls the model attempted in its format but that do not parse, with the reason,
  so the model is told in its own format instead of the call being dropped or taken as the answer;
- the template's constraints: call ids (Mistral: 9 alphanumerics), one call per assistant turn (Llama 3.x,
  gpt-oss), strict user/assistant alternation (Mistral).

Nothing here imports verl: the agent loop, ``agentrl data check`` and the tests all use it.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from agentrl.callcheck import guarded, json_value

__all__ = ["Family", "TurnText", "FAMILIES", "detect_family", "family_for_parser", "choose_family", "model_family", "resolve_parser", "vllm_parser", "template_limits", "read_model_folder"]


@dataclass(frozen=True)
class TurnText:
    """One assistant turn taken apart: what the user sees, the reasoning, and the raw text (specials kept)."""

    answer: str
    reasoning: str = ""


_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def _split_think(text: str) -> tuple[str, str]:
    """``<think>…</think>`` blocks out of the text; a lone ``</think>`` closes reasoning the prompt opened."""
    reasoning = [m.strip() for m in _THINK.findall(text)]
    text = _THINK.sub("", text)
    if "</think>" in text:  # the generation prompt ended with "<think>" (Qwen3 / GLM thinking mode)
        head, text = text.split("</think>", 1)
        reasoning.insert(0, head.replace("<think>", "").strip())
    return text, "\n\n".join(r for r in reasoning if r)


# ---------------------------------------------------------------- tool-call markup, per format

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
TOOL_CALL_BLOCK = _TOOL_CALL  # a <tool_call> block, closed or running to the end of the turn


def _hermes_malformed(text: str) -> list[str]:
    bad = []
    for block in _TOOL_CALL.findall(text):
        try:
            call = json.loads(block)
        except json.JSONDecodeError as exc:
            bad.append(f"the JSON inside <tool_call> is not valid ({exc.msg} at column {exc.colno})")
            continue
        args = call.get("arguments") if isinstance(call, dict) else None
        if isinstance(args, str) and args.lstrip().startswith("{"):  # an object serialized twice: read as vLLM does
            args = _json_or_none(args)
        if not (isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(args, dict)):
            bad.append('the JSON inside <tool_call> needs "name" (a string) and "arguments" (an object)')
    if text.count("<tool_call>") > text.count("</tool_call>"):
        bad.append("<tool_call> is not closed with </tool_call>")
    return bad


# a parameter's value ends at its own </parameter>: one that runs into the next <parameter= or </function> is
# half-written (the peers guess where it ended; agentrl reports it)
def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


_QWEN3_CODER_VALUE = r"(?:(?!<parameter=|</parameter>|<function=|</function>).)*"
_QWEN3_CODER_CALL = re.compile(
    r"^\s*<function=([^>\n<]+)>\s*((?:<parameter=[^>\n<]+>" + _QWEN3_CODER_VALUE + r"</parameter>\s*)*)</function>\s*$",
    re.DOTALL)
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
    def find(text: str) -> list[str]:
        bad = [how for block in _TOOL_CALL.findall(text) if not call.match(block)]
        if text.count("<tool_call>") > text.count("</tool_call>"):
            bad.append("<tool_call> is not closed with </tool_call>")
        return bad
    return find


_qwen3_coder_tagged = _tagged_malformed(
    _QWEN3_CODER_CALL, "inside <tool_call> write <function=NAME>, then each argument as "
                       "<parameter=KEY>VALUE</parameter> (each closed), then </function>")


def _qwen3_coder_malformed(text: str) -> list[str]:
    return _qwen3_coder_tagged(wrap_bare_functions(text))


_GLM_CALL = re.compile(r"^\s*([^<>\n]+?)\s*((?:<arg_key>[^<]*</arg_key>\s*<arg_value>.*?</arg_value>\s*)*)$", re.DOTALL)


_glm_malformed = _tagged_malformed(
    _GLM_CALL, "inside <tool_call> write the function name, then each argument as "
               "<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>")


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


_MISTRAL_NEW = re.compile(r"\[TOOL_CALLS\]([^\[\]{}\s]+)(?:\[CALL_ID\]([A-Za-z0-9]+))?\[ARGS\]")


def mistral_calls(text: str) -> list[dict] | None:
    """Mistral calls, old form ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]`` or new form
    ``[TOOL_CALLS]name[ARGS]{...}`` (``[CALL_ID]id`` optional). None when the turn has no ``[TOOL_CALLS]``."""
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
                raise ValueError(f"the arguments after [ARGS] are not valid JSON ({exc.msg})") from None
            if not isinstance(args, dict):
                raise ValueError("the arguments after [ARGS] must be a JSON object")
            calls.append({"name": m.group(1), "arguments": json_value(args, "the arguments"),
                          **({"id": m.group(2)} if m.group(2) else {})})
            while pos < len(body) and body[pos].isspace():
                pos += 1
        return calls
    try:
        listed, _ = decoder.raw_decode(body[len("[TOOL_CALLS]"):].lstrip())
    except json.JSONDecodeError as exc:
        raise ValueError(f"the list after [TOOL_CALLS] is not valid JSON ({exc.msg})") from None
    listed = listed if isinstance(listed, list) else [listed]
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


def _split_harmony(text: str) -> tuple[str, str]:
    messages = harmony_messages(text)
    final = [m["body"] for m in messages if m["channel"] == "final"]
    analysis = [m["body"].strip() for m in messages if m["channel"] == "analysis"]
    preamble = [m["body"] for m in messages if m["channel"] == "commentary" and not m["recipient"]]
    return ("".join(final) if final else "".join(preamble)), "\n\n".join(a for a in analysis if a)


def _parsed_malformed(parse: Callable[[str], Any]) -> Callable[[str], list[str]]:
    def malformed(text: str) -> list[str]:
        try:
            guarded(parse, text)
        except ValueError as exc:
            return [str(exc)]
        return []
    return malformed


def _strip_blocks(pattern: str) -> Callable[[str], str]:
    regex = re.compile(pattern, re.DOTALL)
    return lambda text: regex.sub("", text)


# ---------------------------------------------------------------- the families


@dataclass(frozen=True)
class Family:
    name: str
    parser: str  # verl tool-call parser
    call_example: str  # one call in this format, shown to the model when its call is malformed
    reasoning: str = "think"  # "think" (<think>…</think>, for any family that writes it), "harmony" (analysis channel)
    strip_calls: Callable[[str], str] = lambda text: text
    find_malformed: Callable[[str], list[str]] = lambda text: []
    call_id_length: int = 0  # 9 for Mistral's templates; 0: any id
    one_call_per_turn: bool = False  # the template renders a single call per assistant message
    alternating: bool = False  # user/assistant must alternate (tool messages aside)
    note: str = ""  # what the README says of this family's final_answer

    def split(self, text: str, special_tokens: tuple[str, ...] = ()) -> TurnText:
        """The visible answer and the reasoning of a turn decoded with special tokens kept."""
        try:
            if self.reasoning == "harmony":
                answer, reasoning = _split_harmony(text)
            else:
                answer, reasoning = _split_think(text) if self.reasoning == "think" else (text, "")
                answer = self.strip_calls(answer)
        except Exception:  # noqa: BLE001 - odd model text: no answer rather than markup graded, or a dead rollout
            answer, reasoning = "", ""
        for token in special_tokens:
            answer = answer.replace(token, "")
            reasoning = reasoning.replace(token, "")
        return TurnText(answer=answer.strip(), reasoning=reasoning.strip())

    def malformed(self, text: str) -> list[str]:
        """Why each call the model attempted in this format does not parse (empty: none broken)."""
        try:
            if self.reasoning == "think":
                text, _ = _split_think(text)  # a call sketched while thinking is not a call
            return self.find_malformed(text)
        except Exception as exc:  # noqa: BLE001 - a reader's bug on odd text is a report, never a dead rollout
            return [f"the call could not be read ({type(exc).__name__}: {exc})"]

    def malformed_message(self, reason: str) -> str:
        return f"error: malformed tool call: {reason}. Write a call like this: {self.call_example}"

    def call_id(self, n: int, rollout_id: str = "") -> str:
        """The id of the n-th call of a rollout, in the form the template accepts."""
        if self.call_id_length:
            salt = re.sub(r"[^A-Za-z0-9]", "", rollout_id)[-4:] or "call"
            return (salt + f"{n:05d}")[-self.call_id_length:].rjust(self.call_id_length, "0")
        return f"c{n}"


_HERMES_EXAMPLE = '<tool_call>\n{"name": "TOOL", "arguments": {"KEY": VALUE}}\n</tool_call>'
_strip_tool_call = _strip_blocks(r"<tool_call>.*?(?:</tool_call>|$)")

HERMES = Family("hermes", "hermes", _HERMES_EXAMPLE, strip_calls=_strip_tool_call, find_malformed=_hermes_malformed,
                note="the last turn's text with <tool_call> blocks removed")
QWEN25 = Family("qwen2.5", "hermes", _HERMES_EXAMPLE, strip_calls=_strip_tool_call, find_malformed=_hermes_malformed,
                note="the last turn's text with <tool_call> blocks removed")
QWEN3 = Family("qwen3", "hermes", _HERMES_EXAMPLE, reasoning="think", strip_calls=_strip_tool_call,
               find_malformed=_hermes_malformed,
               note="the text after </think>; the <think> block is sample.reasoning")
QWEN3_CODER = Family(
    "qwen3-coder", "qwen3_coder", "<tool_call>\n<function=TOOL>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>",
    reasoning="think", strip_calls=lambda text: _strip_tool_call(wrap_bare_functions(text)),
    find_malformed=_qwen3_coder_malformed,
    note="the text before <tool_call> (none on a final turn); arguments typed from the tool schemas")
GLM45 = Family(
    "glm-4.5", "glm", "<tool_call>TOOL\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n</tool_call>",
    reasoning="think", strip_calls=_strip_tool_call, find_malformed=_glm_malformed,
    note="the text after </think>; the <think> block is sample.reasoning")
LLAMA3_JSON = Family(
    "llama3", "llama3_json", '{"name": "TOOL", "parameters": {"KEY": VALUE}}',
    strip_calls=lambda text: "" if _is_attempt(llama_json_calls, text) else text,
    find_malformed=_parsed_malformed(llama_json_calls), one_call_per_turn=True,
    note="the last turn's text (a turn that is a JSON call is not an answer)")
LLAMA3_PYTHONIC = Family(
    "llama3-pythonic", "llama3_pythonic", "[TOOL(KEY=VALUE)]",
    strip_calls=lambda text: "" if _is_attempt(pythonic_calls, text) else text,
    find_malformed=_parsed_malformed(pythonic_calls),
    note="the last turn's text (a turn that is a [call(...)] list is not an answer)")
MISTRAL = Family(
    "mistral", "mistral", '[TOOL_CALLS][{"name": "TOOL", "arguments": {"KEY": VALUE}}]',
    strip_calls=_strip_blocks(r"\[TOOL_CALLS\].*$"), find_malformed=_parsed_malformed(mistral_calls),
    call_id_length=9, alternating=True, note="the text before [TOOL_CALLS]")
MISTRAL_V11 = Family(
    "mistral-v11", "mistral", '[TOOL_CALLS]TOOL[ARGS]{"KEY": VALUE}',
    strip_calls=_strip_blocks(r"\[TOOL_CALLS\].*$"), find_malformed=_parsed_malformed(mistral_calls),
    call_id_length=9, alternating=True, note="the text before [TOOL_CALLS]")
GPT_OSS = Family(
    "gpt-oss", "gpt-oss",
    "<|start|>assistant to=functions.TOOL<|channel|>commentary json<|message|>{\"KEY\": VALUE}<|call|>",
    reasoning="harmony", find_malformed=lambda text: harmony_calls(text)[1], one_call_per_turn=True,
    note="the final channel's message; the analysis channel is sample.reasoning")


def _is_attempt(parse: Callable[[str], Any], text: str) -> bool:
    try:
        return guarded(parse, text) is not None
    except ValueError:
        return True


FAMILIES: dict[str, Family] = {f.name: f for f in (QWEN25, QWEN3, QWEN3_CODER, LLAMA3_JSON, LLAMA3_PYTHONIC, MISTRAL,
                                                  MISTRAL_V11, GPT_OSS, GLM45, HERMES)}
_BY_PARSER = {"hermes": HERMES, "qwen3_coder": QWEN3_CODER, "glm": GLM45, "gpt-oss": GPT_OSS,
              "llama3_json": LLAMA3_JSON, "llama3_pythonic": LLAMA3_PYTHONIC, "mistral": MISTRAL}


def family_for_parser(parser: str) -> Family:
    """The family whose format a named verl parser reads (an explicit ``agent.tool_parser``)."""
    if parser in FAMILIES:
        return FAMILIES[parser]
    if parser in _BY_PARSER:
        return _BY_PARSER[parser]
    # a parser agentrl does not know (a plugin's, or verl's seed/kimi/...): its calls parse, but malformed ones
    # are not recognised, and the answer is the text with <think> blocks and special tokens removed
    return Family(parser, parser, "the format your chat template shows")


def choose_family(tool_parser: str, chat_template: str | None, model_type: str | None = None) -> Family:
    """The family for ``agent.tool_parser``: the template's own when "auto", or when the named parser is the one
    the template's family uses (``tool_parser: hermes`` on Qwen3 keeps Qwen3's reasoning handling)."""
    found = detect_family(chat_template, model_type)
    if tool_parser == "auto":
        return found
    named = family_for_parser(tool_parser)
    return found if chat_template and found.parser == named.parser else named


def detect_family(chat_template: str | None, model_type: str | None = None) -> Family:
    """The family a chat template (and ``config.json`` ``model_type``) writes tool calls in."""
    t = chat_template or ""
    if "<|channel|>" in t or model_type == "gpt_oss":
        return GPT_OSS
    if "<arg_key>" in t:
        return GLM45
    if "<function=" in t and "<parameter=" in t:
        return QWEN3_CODER
    if "[TOOL_CALLS]" in t:
        return MISTRAL_V11 if "[ARGS]" in t else MISTRAL
    if "<|start_header_id|>" in t and ("[func_name1(" in t or "python_start" in t):
        return LLAMA3_PYTHONIC
    if "<|start_header_id|>" in t and '"parameters"' in t:
        return LLAMA3_JSON
    if "<tool_call>" in t:
        return QWEN3 if "<think>" in t else QWEN25
    return HERMES


def read_model_folder(path: str | Path) -> dict[str, Any]:
    """What a model folder says of its format: chat template, ``model_type``, special tokens."""
    folder = Path(path)
    info: dict[str, Any] = {"chat_template": None, "model_type": None, "special_tokens": [], "template_file": None}
    if (folder / "config.json").is_file():
        info["model_type"] = json.loads((folder / "config.json").read_text()).get("model_type")
    tok_config = {}
    if (folder / "tokenizer_config.json").is_file():
        tok_config = json.loads((folder / "tokenizer_config.json").read_text())
        template = tok_config.get("chat_template")
        if isinstance(template, list):  # named templates: the default one, else the tool_use one
            named = {t.get("name"): t.get("template") for t in template}
            template = named.get("tool_use") or named.get("default")
        if template:
            info["chat_template"], info["template_file"] = template, "tokenizer_config.json"
        info["special_tokens"] = sorted(t["content"] for t in (tok_config.get("added_tokens_decoder") or {}).values()
                                        if t.get("special"))
    if (folder / "chat_template.jinja").is_file():
        info["chat_template"], info["template_file"] = (folder / "chat_template.jinja").read_text(), "chat_template.jinja"
    return info


def model_family(model_path: str | Path | None, tool_parser: str = "auto") -> tuple[Family, dict[str, Any]]:
    """The family of a model folder (``tool_parser="auto"``) or of a named parser, and what the folder says."""
    info = read_model_folder(model_path) if model_path and Path(model_path).is_dir() else {
        "chat_template": None, "model_type": None, "special_tokens": [], "template_file": None}
    return choose_family(tool_parser, info["chat_template"], info["model_type"]), info


def resolve_parser(tool_parser: str, model_path: str | Path | None) -> str:
    """``agent.tool_parser`` as a verl parser name: "auto" becomes the model folder's."""
    return model_family(model_path, tool_parser)[0].parser


# vLLM names some of these formats differently (``vllm serve --tool-call-parser``)
_VLLM_PARSERS = {"gpt-oss": "openai", "glm": "glm45", "llama3_pythonic": "pythonic"}


def vllm_parser(parser: str) -> str:
    return _VLLM_PARSERS.get(parser, parser)


def template_limits(chat_template: str | None, family: Family) -> dict[str, str]:
    """What the chat template cannot express, keyed by the capability a config may ask for."""
    t = chat_template or ""
    limits = {}
    if not t:
        limits["template"] = "the model folder has no chat template"
        return limits
    if "tools" not in t:
        limits["tools"] = "the chat template never renders `tools`: the model is not shown the tool schemas"
    if family.one_call_per_turn or "single tool-calls" in t:
        limits["parallel_calls"] = ("the chat template renders one tool call per assistant turn: agentrl runs the first "
                                    "call of a turn and answers the others with an error")
    if family.alternating:
        limits["simulated_user"] = ("the chat template requires user/assistant turns to alternate and moves the tool list "
                                    "to the last user message; simulated-user replies are appended without it")
    return limits
