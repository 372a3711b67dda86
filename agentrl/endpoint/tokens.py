"""Exact tokens for an agent agentrl does not drive: each request's prompt ids and sampled ids, as sequences.

    ledger = TokenLedger(builder)                         # builder: the model's chat-template token builder
    ids = await ledger.prompt(request.messages, request.tools)   # what the model is given this turn
    await ledger.sampled(token_ids, logprobs, served_message)    # what it sampled, and the message served
    ledger.sequences     # [Sequence(prompt_ids, response_ids, mask, logprobs, sampled)], one per history rewrite

A request *continues* the rollout when its messages are the previous request's messages, then the assistant
message the endpoint served for it (text and calls as served; a framework may drop or rename the call ids), then
new tool or user messages. Then the new messages alone are rendered and appended (mask 0) after the sampled ids,
which stay exactly as sampled (mask 1): the rollout stays one sequence. Anything else (reasoning dropped, a
message edited, tool replies merged, a summary in place of history, other tools) starts a new sequence from a
fresh render of the request: the earlier sequences keep their own tokens and share the rollout's reward. Sampled
text is never re-tokenized into a trained sequence.

The builder is the agent loop's (verl's Continuous Token builder, fitted per family by
``agentrl.verl.builders``): ``await build(messages, tools) -> ids`` and ``await append(previous, messages, ids,
mask, logprobs, tools) -> (ids, mask, logprobs)``. Nothing here imports verl.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol


class Builder(Protocol):
    async def build(self, messages: list[dict], tools: Optional[list]) -> list[int]: ...

    async def append(self, previous: list[dict], messages: list[dict], ids: list[int], mask: list[int],
                     logprobs: Optional[list[float]], tools: Optional[list]) -> tuple[list[int], list[int], list]: ...


@dataclass
class Sequence:
    """One training sequence: its prompt, and the response after it (sampled ids mask 1, rendered ids mask 0)."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    sampled: list[list[int]] = field(default_factory=list)  # each request's sampled ids, in order
    requests: int = 0

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    def trained_ids(self) -> list[int]:
        """The response ids the trainer learns from (mask 1)."""
        return [t for t, m in zip(self.response_ids, self.mask) if m]


def _calls(message: dict) -> list[tuple[str, str]]:
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                pass
        out.append((fn.get("name"), json.dumps(args, sort_keys=True)))
    return out


def same_turn(sent: dict, served: dict) -> bool:
    """``sent`` (an assistant message a framework sent back) is the turn the endpoint ``served``."""
    return (sent.get("role") == "assistant" and (sent.get("content") or "").strip() == (served.get("content") or "").strip()
            and _calls(sent) == _calls(served))


def _same(a: dict, b: dict) -> bool:
    keys = ("role", "content", "tool_call_id", "name")
    return all((a.get(k) or None) == (b.get(k) or None) for k in keys) and _calls(a) == _calls(b)


def continues(history: list[dict], served: dict, messages: list[dict]) -> bool:
    """``messages`` is ``history``, the ``served`` turn, then only tool or user messages."""
    n = len(history)
    if len(messages) <= n + 1 or not same_turn(messages[n], served):
        return False
    if not all(_same(a, b) for a, b in zip(history, messages[:n])):
        return False
    return all(m.get("role") in ("tool", "user") for m in messages[n + 1:])


class TokenLedger:
    """The token side of one rollout served through the endpoint."""

    def __init__(self, builder: Builder, response_length: int) -> None:
        self.builder = builder
        self.response_length = response_length
        self.sequences: list[Sequence] = []
        self._history: Optional[list[dict]] = None  # the last request's messages
        self._tools: Any = None
        self._served: Optional[dict] = None
        self.rewrites = 0  # requests that started a new sequence after the first

    async def prompt(self, messages: list[dict], tools: Optional[list]) -> list[int]:
        """The ids the model is given for this request (the current sequence, extended or new)."""
        if (self.sequences and self._served is not None and tools == self._tools
                and continues(self._history or [], self._served, messages)):
            seq = self.sequences[-1]
            previous = list(self._history or []) + [messages[len(self._history or [])]]
            ids, mask, logprobs = await self.builder.append(previous, messages, seq.ids, seq.mask,
                                                            seq.logprobs or None, tools)
            seq.response_ids = ids[len(seq.prompt_ids):]
            seq.mask, seq.logprobs = list(mask), list(logprobs or [])
        else:
            if self.sequences:
                self.rewrites += 1
            self.sequences.append(Sequence(prompt_ids=list(await self.builder.build(messages, tools))))
        self._history, self._tools, self._served = [dict(m) for m in messages], tools, None
        seq = self.sequences[-1]
        seq.requests += 1
        return seq.ids

    def room(self) -> int:
        """Response tokens left in the current sequence."""
        return self.response_length - len(self.sequences[-1].mask) if self.sequences else self.response_length

    def sampled(self, token_ids: list[int], logprobs: Optional[list[float]], served: dict) -> None:
        """The ids the model sampled for the last prompt, and the assistant message served from them."""
        seq = self.sequences[-1]
        seq.response_ids += list(token_ids)
        seq.mask += [1] * len(token_ids)
        if logprobs is not None and len(seq.logprobs) == len(seq.mask) - len(token_ids):
            seq.logprobs += list(logprobs)
        else:
            seq.logprobs = []
        seq.sampled.append(list(token_ids))
        self._served = served

    def sampled_total(self) -> int:
        return sum(len(s) for seq in self.sequences for s in seq.sampled)
