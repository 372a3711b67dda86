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

The readers of each format's markup are :mod:`agentrl.callformats` and :mod:`agentrl.sectionformats`; the gate every call passes before a tool
runs is :mod:`agentrl.callcheck`. Nothing here imports verl: the agent loop, ``agentrl data check`` and the
tests all use it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from agentrl.callformats import (  # noqa: F401  (re-exported: the readers are part of this module's API)
    TOOL_CALL_BLOCK,
    glm_malformed,
    hermes_malformed,
    is_attempt,
    parsed_malformed,
    qwen3_coder_malformed,
    split_harmony,
    strip_blocks,
    strip_tool_call,
    harmony_calls,
    harmony_messages,
    llama_json_calls,
    mistral_calls,
    pythonic_calls,
    smollm2_calls,
    wrap_bare_functions,
)
from agentrl.sectionformats import deepseek_calls, granite_calls, kimi_calls, seed_calls  # noqa: F401  (re-exported)

__all__ = ["Family", "TurnText", "FAMILIES", "detect_family", "family_for_parser", "choose_family", "model_family", "resolve_parser", "vllm_parser", "template_limits", "read_model_folder"]


@dataclass(frozen=True)
class TurnText:
    """One assistant turn taken apart: what the user sees, the reasoning, and the raw text (specials kept)."""

    answer: str
    reasoning: str = ""


_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def _split_think(text: str) -> tuple[str, str]:
    """``<think>…</think>`` blocks (Seed-OSS: ``<seed:think>``) out of the text; a lone ``</think>`` closes
    reasoning the prompt opened."""
    text = text.replace("<seed:think>", "<think>").replace("</seed:think>", "</think>")
    reasoning = [m.strip() for m in _THINK.findall(text)]
    text = _THINK.sub("", text)
    if "</think>" in text:  # the generation prompt ended with "<think>" (Qwen3 / GLM thinking mode)
        head, text = text.split("</think>", 1)
        reasoning.insert(0, head.replace("<think>", "").strip())
    return text, "\n\n".join(r for r in reasoning if r)


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
                answer, reasoning = split_harmony(text)
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

HERMES = Family("hermes", "hermes", _HERMES_EXAMPLE, strip_calls=strip_tool_call, find_malformed=hermes_malformed,
                note="the last turn's text with <tool_call> blocks removed")
QWEN25 = Family("qwen2.5", "hermes", _HERMES_EXAMPLE, strip_calls=strip_tool_call, find_malformed=hermes_malformed,
                note="the last turn's text with <tool_call> blocks removed")
QWEN3 = Family("qwen3", "hermes", _HERMES_EXAMPLE, reasoning="think", strip_calls=strip_tool_call,
               find_malformed=hermes_malformed,
               note="the text after </think>; the <think> block is sample.reasoning")
QWEN3_CODER = Family(
    "qwen3-coder", "qwen3_coder", "<tool_call>\n<function=TOOL>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>",
    reasoning="think", strip_calls=lambda text: strip_tool_call(wrap_bare_functions(text)),
    find_malformed=qwen3_coder_malformed,
    note="the text before <tool_call> (none on a final turn); arguments typed from the tool schemas")
GLM45 = Family(
    "glm-4.5", "glm", "<tool_call>TOOL\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n</tool_call>",
    reasoning="think", strip_calls=strip_tool_call, find_malformed=glm_malformed,
    note="the text after </think>; the <think> block is sample.reasoning")
LLAMA3_JSON = Family(
    "llama3", "llama3_json", '{"name": "TOOL", "parameters": {"KEY": VALUE}}',
    strip_calls=lambda text: "" if is_attempt(llama_json_calls, text) else text,
    find_malformed=parsed_malformed(llama_json_calls), one_call_per_turn=True,
    note="the last turn's text (a turn that is a JSON call is not an answer)")
LLAMA3_PYTHONIC = Family(
    "llama3-pythonic", "llama3_pythonic", "[TOOL(KEY=VALUE)]",
    strip_calls=lambda text: "" if is_attempt(pythonic_calls, text) else text,
    find_malformed=parsed_malformed(pythonic_calls),
    note="the last turn's text (a turn that is a [call(...)] list is not an answer)")
MISTRAL = Family(
    "mistral", "mistral", '[TOOL_CALLS][{"name": "TOOL", "arguments": {"KEY": VALUE}}]',
    strip_calls=strip_blocks(r"\[TOOL_CALLS\].*$"), find_malformed=parsed_malformed(mistral_calls),
    call_id_length=9, alternating=True, note="the text before [TOOL_CALLS]")
MISTRAL_V11 = Family(
    "mistral-v11", "mistral", '[TOOL_CALLS]TOOL[ARGS]{"KEY": VALUE}',
    strip_calls=strip_blocks(r"\[TOOL_CALLS\].*$"), find_malformed=parsed_malformed(mistral_calls),
    call_id_length=9, alternating=True, note="the text before [TOOL_CALLS]")
GPT_OSS = Family(
    "gpt-oss", "gpt-oss",
    "<|start|>assistant to=functions.TOOL<|channel|>commentary json<|message|>{\"KEY\": VALUE}<|call|>",
    reasoning="harmony", find_malformed=lambda text: harmony_calls(text)[1], one_call_per_turn=True,
    note="the final channel's message; the analysis channel is sample.reasoning")


KIMI_K2 = Family(
    "kimi-k2", "kimi", "<|tool_calls_section_begin|><|tool_call_begin|>functions.TOOL:0<|tool_call_argument_begin|>"
    '{"KEY": VALUE}<|tool_call_end|><|tool_calls_section_end|>',
    strip_calls=strip_blocks(r"<\|tool_calls_section_begin\|>.*?(?:<\|tool_calls_section_end\|>|$)"),
    find_malformed=parsed_malformed(kimi_calls), note="the text before the tool-calls section")
SEED_OSS = Family(
    "seed-oss", "seed", "<seed:tool_call>\n<function=TOOL>\n<parameter=KEY>VALUE</parameter>\n</function>\n</seed:tool_call>",
    strip_calls=strip_blocks(r"<seed:tool_call>.*?(?:</seed:tool_call>|$)"), find_malformed=parsed_malformed(seed_calls),
    note="the text after </seed:think>; the <seed:think> block is sample.reasoning")
DEEPSEEK_V3 = Family(
    "deepseek-v3", "deepseek_v3",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>TOOL<｜tool▁sep｜>{\"KEY\": VALUE}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    strip_calls=strip_blocks(r"<｜tool▁calls▁begin｜>.*?(?:<｜tool▁calls▁end｜>|$)"),
    find_malformed=parsed_malformed(deepseek_calls),
    note="the text before the tool-calls section (V3 and V3.1); the <think> block (V3.1 thinking) is sample.reasoning")
GRANITE = Family(
    "granite", "granite", '<|tool_call|>[{"name": "TOOL", "arguments": {"KEY": VALUE}}]',
    strip_calls=strip_blocks(r"(?:<\|tool_call\|>|<tool_call>).*$"), find_malformed=parsed_malformed(granite_calls),
    note="the text before <|tool_call|> (or Granite 3.1's <tool_call>)")

SMOLLM2 = Family(
    "smollm2", "smollm2", '<tool_call>[{"name": "TOOL", "arguments": {"KEY": VALUE}}]</tool_call>',
    strip_calls=strip_tool_call, find_malformed=parsed_malformed(smollm2_calls),
    note="the last turn's text with <tool_call> blocks removed")


FAMILIES: dict[str, Family] = {f.name: f for f in (QWEN25, QWEN3, QWEN3_CODER, LLAMA3_JSON, LLAMA3_PYTHONIC, MISTRAL,
                                                  MISTRAL_V11, GPT_OSS, GLM45, KIMI_K2, SEED_OSS,
                                                  DEEPSEEK_V3, GRANITE, SMOLLM2, HERMES)}
_BY_PARSER = {"hermes": HERMES, "qwen3_coder": QWEN3_CODER, "glm": GLM45, "gpt-oss": GPT_OSS,
              "llama3_json": LLAMA3_JSON, "llama3_pythonic": LLAMA3_PYTHONIC, "mistral": MISTRAL, "kimi": KIMI_K2,
              "seed": SEED_OSS, "deepseek_v3": DEEPSEEK_V3, "deepseek_v31": DEEPSEEK_V3, "granite": GRANITE,
              "smollm2": SMOLLM2}


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
    if "<seed:tool_call>" in t:
        return SEED_OSS
    if "<|tool_calls_section_begin|>" in t or "tool_declare<|im_middle|>" in t:
        return KIMI_K2
    if "tool▁calls▁begin" in t:
        return DEEPSEEK_V3
    if "<|tool_call|>" in t:
        return GRANITE
    if "<function=" in t and "<parameter=" in t:
        return QWEN3_CODER
    if "[TOOL_CALLS]" in t:
        return MISTRAL_V11 if "[ARGS]" in t else MISTRAL
    if "<|start_header_id|>" in t and ("[func_name1(" in t or "python_start" in t):
        return LLAMA3_PYTHONIC
    if "<|start_header_id|>" in t and '"parameters"' in t:
        return LLAMA3_JSON
    if "<tool_call>[" in t:  # a JSON list of calls in one block
        return SMOLLM2
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


# vLLM names some of these formats differently (``vllm serve --tool-call-parser``). SmolLM2's
# ``<tool_call>[{"name": ..., "arguments": ...}]</tool_call>`` list is what vLLM's ``xlam`` parser reads (a JSON list,
# also inside <tool_call> tags); it has no parser of that name. A lone object without the list is not read by it.
_VLLM_PARSERS = {"gpt-oss": "openai", "glm": "glm45", "llama3_pythonic": "pythonic", "kimi": "kimi_k2",
                 "seed": "seed_oss", "smollm2": "xlam"}


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
