"""Tool-call parsers verl 0.9.1 lacks, registered in verl's own parser registry.

    ToolParser.get_tool_parser("llama3_json", tokenizer)      # {"name": ..., "parameters": {...}}
    ToolParser.get_tool_parser("llama3_pythonic", tokenizer)  # [add(a=1, b=2)]
    ToolParser.get_tool_parser("mistral", tokenizer)          # [TOOL_CALLS][{...}]  or  [TOOL_CALLS]add[ARGS]{...}
    ToolParser.get_tool_parser("smollm2", tokenizer)          # <tool_call>[{"name": ..., "arguments": {...}}]</tool_call>
    ToolParser.get_tool_parser("gpt-oss", tokenizer)          # harmony, every form (replaces verl's)
    ToolParser.get_tool_parser("kimi", tokenizer)             # Kimi K2 sections, strict JSON (replaces verl's)
    ToolParser.get_tool_parser("deepseek_v3", tokenizer)      # <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...} (V3 and V3.1)
    ToolParser.get_tool_parser("granite", tokenizer)          # <|tool_call|>[{"name": ..., "arguments": {...}}]
    ToolParser.get_tool_parser("seed", tokenizer)             # Seed-OSS, calls inside <seed:think> ignored (replaces verl's)

verl's own ``gpt-oss`` parser only finds calls whose recipient sits in the channel after an analysis message
(``<|start|>assistant<|channel|>commentary to=functions.X …``). gpt-oss's chat template renders the recipient in
the role header (``<|start|>assistant to=functions.X<|channel|>commentary json…``), and a turn may call a tool
directly, with no analysis first (the generation prompt already holds ``<|start|>assistant``). The parser here
reads every harmony message of the turn, so all three forms parse, and a call whose arguments are not JSON is
left out (``agentrl.families`` reports it to the model) instead of reaching the tool as a raw string.

verl's ``qwen3_coder`` and ``glm`` parsers are kept, with one change: a ``<tool_call>`` block that
``agentrl.families`` finds malformed is removed before they parse, so a half-written call is reported to the model
rather than run with whatever arguments could be salvaged. verl's ``hermes`` parser is kept too, without the calls
whose arguments are not a JSON object (reported once, by ``agentrl.families``).

The format logic lives in :mod:`agentrl.families` (verl-free); these classes only decode and adapt.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from verl.experimental.agent_loop.tool_parser import (FunctionCall, GLMToolParser, HermesToolParser, Qwen3XMLToolParser,
                                                      ToolParser)

from agentrl import callformats, families
from agentrl.callcheck import json_arguments


class _TextParser(ToolParser):
    """Decode the turn with special tokens kept, find calls with a function of ``agentrl.families``."""

    find: Callable[[str], Any]

    def _text(self, responses_ids: list[int]) -> str:
        text = self.tokenizer.decode(responses_ids, skip_special_tokens=False)
        pad = getattr(self.tokenizer, "pad_token", None)
        return text.replace(pad, "") if pad else text

    def _calls(self, text: str) -> list[dict]:
        try:
            return type(self).find(text) or []
        except Exception:  # noqa: BLE001 - malformed: no call; the agent loop tells the model why
            return []

    async def extract_tool_calls(self, responses_ids: list[int], tools: Any = None) -> tuple[str, list[FunctionCall]]:
        text = self._text(responses_ids)
        calls = self._calls(text)
        out = []
        for c in calls:
            try:  # values JSON cannot carry are left out here; agentrl.families reports them to the model
                out.append(FunctionCall(name=c["name"], arguments=json.dumps(c["arguments"], ensure_ascii=False,
                                                                             allow_nan=False), tool_call_id=c.get("id")))
            except (TypeError, ValueError):
                continue
        return text, out


@ToolParser.register("llama3_json")
class Llama3JsonToolParser(_TextParser):
    find = staticmethod(families.llama_json_calls)


@ToolParser.register("smollm2")
class SmolLM2ToolParser(_TextParser):
    find = staticmethod(families.smollm2_calls)


@ToolParser.register("llama3_pythonic")
class Llama3PythonicToolParser(_TextParser):
    find = staticmethod(families.pythonic_calls)


@ToolParser.register("mistral")
class MistralToolParser(_TextParser):
    find = staticmethod(families.mistral_calls)


@ToolParser.register("kimi")
class KimiToolParser(_TextParser):
    """verl's runs a call whose arguments are not JSON with ``{}`` and keeps the section in the answer."""

    find = staticmethod(families.kimi_calls)

    @property
    def stop_token_ids(self) -> list[int]:
        token_id = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        return [token_id] if isinstance(token_id, int) and token_id >= 0 and token_id != self.tokenizer.unk_token_id else []


@ToolParser.register("seed")
class SeedToolParser(_TextParser):
    """verl's runs a call quoted inside ``<seed:think>``."""

    find = staticmethod(families.seed_calls)


@ToolParser.register("deepseek_v3")
@ToolParser.register("deepseek_v31")
class DeepSeekV3ToolParser(_TextParser):
    find = staticmethod(families.deepseek_calls)


@ToolParser.register("granite")
class GraniteToolParser(_TextParser):
    find = staticmethod(families.granite_calls)


@ToolParser.register("gpt-oss")
class GptOssToolParser(_TextParser):
    find = staticmethod(lambda text: families.harmony_calls(text)[0])

    @property
    def stop_token_ids(self) -> list[int]:
        # <|call|> ends a tool call; gpt-oss's generation_config lists only <|return|> and <|endoftext|>
        token_id = self.tokenizer.convert_tokens_to_ids("<|call|>")
        return [token_id] if isinstance(token_id, int) and token_id >= 0 and token_id != self.tokenizer.unk_token_id else []


class _StrictBlocks:
    """verl's XML parsers take what they can from a broken block (``add`` with no arguments); a block
    ``agentrl.families`` finds malformed is removed first, so it is reported to the model and not run."""

    family: families.Family

    async def extract_tool_calls(self, responses_ids: list[int], tools: Any = None) -> tuple[str, list[FunctionCall]]:
        text = self.tokenizer.decode(responses_ids, skip_special_tokens=False)
        wrapped = families.wrap_bare_functions(text) if self.family is families.QWEN3_CODER else text
        if self.family.malformed(wrapped) or wrapped != text:
            wrapped = families.TOOL_CALL_BLOCK.sub(
                lambda m: m.group(0) if not self.family.malformed(m.group(0)) else "", wrapped)
            responses_ids = self.tokenizer.encode(wrapped, add_special_tokens=False)
        return await super().extract_tool_calls(responses_ids, tools)


@ToolParser.register("hermes")
class StrictHermesToolParser(HermesToolParser):
    """verl's, without the calls whose arguments are not a JSON object (``"hello"``, ``NaN``): verl hands them on,
    where the call gate refused them a second time; ``agentrl.families`` reports each such block once."""

    async def extract_tool_calls(self, responses_ids: list[int], tools: Any = None) -> tuple[str, list[FunctionCall]]:
        text, calls = await super().extract_tool_calls(responses_ids, tools)
        return text, [c for c in calls if _json_object(c.arguments)]


def _json_object(arguments: str) -> bool:
    try:
        json_arguments(arguments)
    except ValueError:
        return False
    return True


@ToolParser.register("qwen3_coder")
class StrictQwen3CoderToolParser(_StrictBlocks, Qwen3XMLToolParser):
    """Values are trimmed as Qwen3-Coder's own parser trims them (verl's does the same); a boolean parameter
    written indented (``  true``) or in another case is read as the boolean, and one that is neither true nor
    false reaches the tool as written, where verl (and vLLM, SGLang) turn it into ``false``."""

    family = families.QWEN3_CODER

    async def extract_tool_calls(self, responses_ids: list[int], tools: Any = None) -> tuple[str, list[FunctionCall]]:
        text, calls = await super().extract_tool_calls(responses_ids, tools)
        written = callformats.qwen3_coder_values(self.tokenizer.decode(responses_ids, skip_special_tokens=False))
        if not tools or len(written) != len(calls):
            return text, calls
        return text, [_with_booleans(call, name, values, tools) for call, (name, values) in zip(calls, written)]


def _with_booleans(call: FunctionCall, name: str, values: dict[str, str], tools: Any) -> FunctionCall:
    if call.name != name.strip():
        return call
    schema = next((t.function.parameters.properties for t in tools if t.function.name == call.name), {}) or {}
    booleans = {key for key, prop in schema.items() if str(getattr(prop, "type", "")).lower() in ("boolean", "bool")}
    arguments = json.loads(call.arguments)
    arguments.update({key: callformats.xml_boolean(raw) for key, raw in values.items() if key in booleans})
    return FunctionCall(name=call.name, arguments=json.dumps(arguments, ensure_ascii=False), tool_call_id=call.tool_call_id)


@ToolParser.register("glm")
class StrictGLMToolParser(_StrictBlocks, GLMToolParser):
    family = families.GLM45

    @staticmethod
    def _convert_arg_value(raw_value: str) -> Any:
        """verl strips every value; GLM's template writes string values verbatim (see ``glm_value``)."""
        return callformats.glm_value(raw_value)

    async def extract_tool_calls(self, responses_ids: list[int], tools: Any = None) -> tuple[str, list[FunctionCall]]:
        text = self.tokenizer.decode(responses_ids, skip_special_tokens=False)
        unescaped = callformats.glm_unescape(text)  # GLM-4.6's literal \n between its markup
        if unescaped != text:
            responses_ids = self.tokenizer.encode(unescaped, add_special_tokens=False)
        return await super().extract_tool_calls(responses_ids, tools)


def tool_schemas(schemas: list[dict] | None) -> list | None:
    """The tool schemas as verl's parsers take them (``qwen3_coder`` types arguments from them).

    MCP schemas may leave ``type`` out (``anyOf`` for optional values); the first non-null type of the
    ``anyOf`` is used, else ``object``, which the parser decodes as JSON or a Python literal.
    """
    if not schemas:
        return None
    from verl.tools.schemas import OpenAIFunctionToolSchema

    out = []
    for schema in schemas:
        fn = dict(schema.get("function") or {})
        params = dict(fn.get("parameters") or {"type": "object", "properties": {}})
        props = {}
        for key, prop in (params.get("properties") or {}).items():
            prop = dict(prop)
            if "type" not in prop:
                kinds = [p.get("type") for p in prop.get("anyOf", []) if isinstance(p, dict) and p.get("type") not in (None, "null")]
                prop["type"] = kinds[0] if kinds else "object"
            props[key] = prop
        params.update(type=params.get("type") or "object", properties=props)
        fn.update(description=fn.get("description") or "", parameters=params)
        out.append(OpenAIFunctionToolSchema.model_validate({"type": "function", "function": fn}))
    return out
