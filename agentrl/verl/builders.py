"""verl's Continuous Token builder, fitted to chat templates with constraints verl's synthetic renders break.

verl renders each appended message as a suffix diff against a synthetic prefix: a user message after
``[system, user]``, a group of tool results after ``[system, user, assistant calling them all]``. Two published
templates refuse those prefixes:

- Mistral's require user and assistant to alternate, so ``[system, user] + [user]`` raises; a user message
  (a simulated user's reply) is rendered after ``[user, assistant]`` instead, without the tool list, which these
  templates move to the *last* user message and which the token stream already holds at its start;
- Llama 3.x's and gpt-oss's render one call per assistant message (Llama raises "This model only supports
  single tool-calls at once!"), so a group of results is rendered one result at a time, each after an
  assistant making that one call.

And a template on a model_type verl does not know that renders a newline after the token generation stops at
(ChatML's ``<|im_end|>\n`` on SmolLM2's ``llama``, Granite's ``<|end_of_text|>\n``) gets verl's ChatML boundary
for that token; one that renders none (Kimi K2's ``<|im_end|><|im_system|>``) keeps verl's generic builder.

    builder = fit_builder(loop.continuous_token_builder, family)
"""

from __future__ import annotations

from typing import Any

from agentrl.families import Family

_USER = {"role": "user", "content": "continuous token synthetic user"}
_ASSISTANT = {"role": "assistant", "content": "continuous token synthetic assistant"}


def _turn_end(tokenizer: Any) -> str | None:
    """The special token the template closes an assistant turn with, when it renders a newline after it (the
    model stops before that newline); None when it renders none, or the template cannot say."""
    marker = "continuous token synthetic assistant"
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "u"}, {"role": "assistant", "content": marker},
                                              {"role": "user", "content": "v"}], tokenize=False)
    except Exception:  # noqa: BLE001 - a template that refuses this conversation: verl's builder as it is
        return None
    tail = text[text.find(marker) + len(marker):] if marker in text else ""
    ends = [t for t in tokenizer.all_special_tokens if t and tail.startswith(t + "\n")]
    return max(ends, key=len) if ends else None


def _chatml(builder: Any) -> Any:
    """verl's ChatML boundary (its Qwen builder) for a template on a model_type verl gives the generic builder
    (SmolLM2 is ``llama``, Granite ``granite``) that renders a newline after its end-of-turn token: the model stops
    at the token, so without it the newline is dropped before every appended tool or user turn, and the model
    trains on a sequence its template never renders. The token and the newline are read from the template."""
    from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder, QwenContinuousTokenBuilder

    tokenizer = builder.tokenizer
    if type(builder) is not ContinuousTokenBuilder:
        return type(builder)
    end_token = _turn_end(tokenizer)
    newline = tokenizer.encode("\n", add_special_tokens=False)
    end = tokenizer.convert_tokens_to_ids(end_token) if end_token else None
    if len(newline) != 1 or end is None or end == tokenizer.unk_token_id:
        return type(builder)
    builder._newline_id, builder._im_end_id = newline[0], end
    builder.__class__ = QwenContinuousTokenBuilder
    return QwenContinuousTokenBuilder


def fit_builder(builder: Any, family: Family) -> Any:
    """The builder, its class swapped for a subclass that respects ``family``'s template (or as it was)."""
    base = _chatml(builder)
    overrides: dict[str, Any] = {}
    if family.alternating:
        def _tokenize_single_non_tool(self, message, *, tools=None, add_generation_prompt=False):
            if message.get("role") != "user":
                return base._tokenize_single_non_tool(self, message, tools=tools, add_generation_prompt=add_generation_prompt)
            return self.render_delta_token_id([_USER, _ASSISTANT], [message], add_generation_prompt=add_generation_prompt)
        overrides["_tokenize_single_non_tool"] = _tokenize_single_non_tool
    if family.one_call_per_turn:
        def _tokenize_tool_group(self, tool_messages, *, previous_messages, tools=None, add_generation_prompt=False):
            ids: list[int] = []
            for n, message in enumerate(tool_messages):
                ids += base._tokenize_tool_group(
                    self, [message], previous_messages=previous_messages + tool_messages[:n], tools=tools,
                    add_generation_prompt=add_generation_prompt and n == len(tool_messages) - 1)
            return ids
        overrides["_tokenize_tool_group"] = _tokenize_tool_group
    if overrides:
        builder.__class__ = type(f"{base.__name__}For{family.name.title().replace('-', '').replace('.', '')}",
                                 (base,), overrides)
    return builder
