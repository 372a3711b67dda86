"""The keys of a tool server entry, declared: what each holds, its default and its bounds (pydantic).

    entry = validated(ServerEntry, {"command": "python", "timeout": 0}, "tool server", "calc")
    # ToolConfigError: tool server 'calc': timeout must be a number >= 0.001, got 0
    entry = validated(FunctionEntry, {"url": "http://127.0.0.1:8000/search"}, "function tool", "search")
    entry.timeout, entry.rate_limit                  # 600.0, 50.0: an Agent RFT endpoint's defaults

:class:`ServerEntry` is an ``mcpServers`` entry (stdio ``command`` or streamable-HTTP ``url``), :class:`FunctionEntry`
an Agent RFT function tool (a plain HTTP endpoint). :func:`validated` turns pydantic's findings into the one
message a reader needs: which entry, which key, what it must be, what it got (unknown keys: the known ones).
What needs the environment (``${VAR}``) or more than one key (``command`` or ``url``) is
:mod:`agentrl.tools.config`'s.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, TypeVar

from annotated_types import Ge
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrl.errors import AgentrlError

DEFAULT_FUNCTION_QPS = 50.0


class ToolConfigError(AgentrlError, ValueError):
    """A tool server declaration is wrong; the message names the server, the key and the fix."""


class _Limits(BaseModel):
    """Traffic control, the same for both kinds of entry (:mod:`agentrl.tools.traffic`, :mod:`agentrl.tools.limits`)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    headers: Optional[dict[str, Any]] = None
    max_concurrency: int = Field(32, ge=1)
    timeout: float = Field(60.0, ge=0.001)
    connect_timeout: float = Field(30.0, ge=0.001)
    retries: int = Field(3, ge=0)
    circuit_failures: int = Field(5, ge=1)
    circuit_reset: float = Field(30.0, ge=0.0)
    rate_limit: Optional[float] = Field(None, ge=0.001)  # calls per second; None: no cap
    deadline: Optional[float] = Field(None, ge=0.001)  # seconds for one call, retries and waits included
    limit_scope: Literal["run", "process"] = "run"
    description: Any = None
    disabled: Any = None
    type: Any = None


class ServerEntry(_Limits):
    """One ``mcpServers`` entry: a stdio ``command`` (with ``args``, ``env``, ``cwd``) or a streamable-HTTP ``url``."""

    command: Any = None
    args: list[str | int | float] = []
    env: Optional[dict[str, Any]] = None
    cwd: Any = None
    url: Any = None
    transport: Any = None
    tools: Optional[list[str]] = None  # allow-list; None: every tool the server lists
    stateful: Any = False  # one MCP session per rollout instead of one shared session


class FunctionEntry(_Limits):
    """One Agent RFT function tool: ``name``, the ``url`` calls are POSTed to, its schema or an OpenAPI document."""

    name: Any = None
    url: Any = None
    parameters: Optional[dict[str, Any]] = None
    openapi: Optional[str] = None
    timeout: float = Field(600.0, ge=0.001)  # the Agent RFT contract's 10 minutes
    rate_limit: Optional[float] = Field(DEFAULT_FUNCTION_QPS, ge=0.001)  # its ~50 calls per second


# what a key must be, where "a number >= n" does not say it
_MUST = {
    "args": "args must be a list of strings",
    "tools": "tools must be a list of tool names",
    "env": "env must be an object of strings",
    "headers": "headers must be an object of strings",
    "openapi": "openapi must be a path or URL of an OpenAPI document",
    "parameters": 'parameters must be a JSON schema object such as {"type": "object", "properties": '
                  '{"query": {"type": "string"}}}',
    "limit_scope": 'limit_scope must be "run" (max_concurrency and rate_limit for all agent-loop processes '
                   'together) or "process" (for each one)',
}

Entry = TypeVar("Entry", ServerEntry, FunctionEntry)


def _got(value: Any, key: str) -> str:
    return type(value).__name__ if key in ("env", "headers") else repr(value)


def _must(model: type[BaseModel], key: str) -> str | None:
    """"timeout must be a number >= 0.001", from the field's own declaration; None for a key of no number."""
    field = model.model_fields.get(key)
    bound = next((m.ge for m in (field.metadata if field else []) if isinstance(m, Ge)), None)
    if bound is None:
        return None
    kind = "an integer" if field.annotation in (int, "int") else "a number"
    return f"{key} must be {kind} >= {bound}"


def validated(model: type[Entry], raw: dict, what: str, name: str) -> Entry:
    """``raw`` as ``model``; a ToolConfigError naming ``what`` ``name``, the key, what it must be and what it got."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden")
    if unknown:
        raise ToolConfigError(f"{what} {name!r}: unknown key(s) {unknown}. Known keys: {sorted(model.model_fields)}") \
            from None
    order = list(model.model_fields)
    first = min(errors, key=lambda e: order.index(e["loc"][0]) if e["loc"] and e["loc"][0] in order else len(order))
    key = str(first["loc"][0]) if first["loc"] else "(entry)"
    value = raw.get(key)
    must = _MUST.get(key) or _must(model, key) or f"{key}: {first['msg']}"
    raise ToolConfigError(f"{what} {name!r}: {must}, got {_got(value, key)}") from None
