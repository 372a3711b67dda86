"""The values that cross the tools package: a call the model made, its result, and an infrastructure failure.

    call = ToolCall("c0", "search", {"query": "revenue 2024"})
    result = ToolResult("c0", "search", "13.4%", is_error=False)
    raise ToolInfraError("search", "HTTP 503 after 3 retries", "http_5xx")   # the rollout is unscorable

Kept apart from :mod:`agentrl.tools.hub` and :mod:`agentrl.tools.session` so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ToolCall:
    """A tool call the model made. ``arguments`` should be a dict; a JSON string is parsed."""

    id: str
    name: str
    arguments: Any = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict, default_id: str = "") -> "ToolCall":
        """From ``{"id", "name", "arguments"}`` or the OpenAI shape ``{"id", "function": {"name", "arguments"}}``."""
        fn = d.get("function") if isinstance(d.get("function"), dict) else d
        return cls(str(d.get("id") or default_id), fn.get("name"), fn.get("arguments", {}))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ToolResult:
    id: str
    name: str
    content: str
    is_error: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


class ToolInfraError(Exception):
    """A tool server failed (not the tool): the rollout is unscorable. ``kind`` is the metrics label."""

    def __init__(self, server: str, cause: BaseException | str, kind: str | None = None) -> None:
        self.server = server
        self.cause = cause
        self.kind = kind or getattr(cause, "kind", None) or "infra"
        super().__init__(f"tool server {server!r} failed ({self.kind}): {cause}")


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters plus a visible marker saying how much was dropped."""
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated {len(text) - limit} chars]"


ROLLOUT_HEADER = "X-Agentrl-Rollout-Id"
_NOT_RETRIED = {"unauthorized", "not_mcp"}


class TransportFailure(Exception):
    """The server could not answer (unreachable, crashed, 5xx, closed). ``kind`` is a metrics label.

    ``pushback``: the server said "not now" (429 or 503); ``retry_after``: the seconds its ``Retry-After``
    asked for (None when it gave none). The hub retries push-back until the call's deadline
    (:mod:`agentrl.tools.pushback`)."""

    def __init__(self, kind: str, message: str, *, pushback: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.pushback = pushback
        self.retry_after = retry_after

    @property
    def connection_lost(self) -> bool:
        """Must the session be reopened? (Not for 5xx, 429 or a slow answer: the session itself is fine.)"""
        return self.kind not in {"http_5xx", "rate_limited", "timeout", "unauthorized"}

    @property
    def retryable(self) -> bool:
        """Would trying again help? Not for a refused token or a URL that is not an MCP server."""
        return self.kind not in _NOT_RETRIED


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the server lists it."""

    name: str
    description: str
    input_schema: dict


@dataclass(frozen=True)
class CallOutcome:
    """What the server answered to a tool call, flattened to text."""

    content: str
    is_error: bool


def refused(exc: BaseException) -> bool:
    """Was this (an httpx error, or what it wraps) a refused connection: nothing listens there?"""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ConnectionRefusedError) or "connection refused" in str(exc).lower():
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
