"""RolloutSession: the tools one rollout sees, and its own MCP sessions to stateful servers."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from agentrl.tools.connections import new_connection
from agentrl.tools.types import ToolCall, ToolInfraError, ToolResult, truncate

if TYPE_CHECKING:
    from agentrl.tools.hub import ToolHub, _Server


def restarted(srv: "_Server", conn: Any, why: str) -> None:
    """Count a server's restart and say why on stderr (in training: training.log, echoed on the console),
    with what a stdio server last wrote to its stderr."""
    srv.stats.restarts += 1
    tail = conn.stderr_tail() if hasattr(conn, "stderr_tail") else ""
    print(f"agentrl: tool server {srv.spec.name!r}: {getattr(conn, 'died', '') or why}; "
          f"starting a new session (restart {srv.stats.restarts}){tail}", file=sys.stderr, flush=True)


def _allowed(exposed: str, server: str, tool: str, allowed: list[str] | None) -> bool:
    if allowed is None:
        return True
    return any(a in (exposed, tool, f"{server}.{tool}", f"{server}.*", server) for a in allowed)


def unknown_tool_names(meta: dict, offered: dict[str, list[str]]) -> list[str]:
    """What a row's ``metadata.allowed_tools`` / ``expected_tools`` name that no server offers, each said as
    ``key 'name'``. ``offered``: the tools each server lists, ``{server: [tool, ...]}``. Names match as they
    do in training: ``tool``, ``server.tool``, ``server.*`` or ``server`` (allowed), ``tool`` or its last part
    after ``.`` or ``__`` (expected)."""
    pairs = [(server, tool) for server, tools in offered.items() for tool in tools]
    bad = []
    allowed = meta.get("allowed_tools")
    for name in allowed if isinstance(allowed, list) else []:
        if not any(_allowed(tool, server, tool, [str(name)]) for server, tool in pairs):
            bad.append(f"allowed_tools {name!r}")
    expected = meta.get("expected_tools")
    for entry in expected if isinstance(expected, list) else []:
        name = str(entry.get("name") if isinstance(entry, dict) else entry)
        last = name.split("__")[-1].split(".")[-1]
        if not any(name in (tool, f"{server}.{tool}") or last == tool for server, tool in pairs):
            bad.append(f"expected_tools {name!r}")
    return bad


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number; write a number, null or a string")


def strict_json(text: str) -> Any:
    """`json.loads` without the NaN and Infinity it accepts beyond JSON: a tool call's arguments are the
    model's text, and a NaN in them would reach every grader and the run's record (which refuse it)."""
    return json.loads(text, parse_constant=_not_json)


def _arguments(raw: Any) -> tuple[dict | None, str]:
    """The call's arguments as a dict, or None and the reason the model should read."""
    if raw is None or raw == "":
        return {}, ""
    if isinstance(raw, str):
        try:
            raw = strict_json(raw)
        except json.JSONDecodeError as exc:
            return None, f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})"
        except ValueError as exc:
            return None, f"the arguments are not valid JSON ({exc})"
    if not isinstance(raw, dict):
        return None, f"the arguments must be a JSON object such as {{\"a\": 1}}, got a JSON {type(raw).__name__}"
    return raw, ""


class RolloutSession:
    def __init__(self, hub: "ToolHub", rollout_id: str, allowed_tools: list[str] | None = None) -> None:
        self.hub = hub
        self.rollout_id = rollout_id
        self.allowed_tools = None if allowed_tools is None else list(allowed_tools)
        self._connections: dict[str, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False
        self._tools: dict | None = None
        self.held_back: set[str] = set()  # tools a later scripted user turn offers (agentrl.scripted)

    def hold_back(self, names) -> None:
        """Hide these tools (exposed or server-side names) until :meth:`offer` makes them available."""
        self.held_back |= set(names)
        self._tools = None

    def offer(self, names) -> None:
        """Make held-back tools available from now on (also past the rollout's ``allowed_tools``)."""
        self.held_back -= set(names)
        if self.allowed_tools is not None:
            self.allowed_tools += [n for n in names if n not in self.allowed_tools]
        self._tools = None

    async def setup(self, calls: list[dict]) -> None:
        """Calls made before the model's first turn and never shown to it (a row's ``metadata.tool_setup``):
        a stateful environment initialised from the row. A setup that fails leaves the rollout unscorable."""
        catalog = await self.hub.catalog(self)
        for n, call in enumerate(calls):
            name = call.get("name")
            if name not in catalog:
                raise ToolInfraError("(setup)", f"metadata.tool_setup[{n}] calls {name!r}, which no tool server of "
                                     f"this run offers (served: {', '.join(sorted(catalog))[:300] or 'none'}); "
                                     f"add the server that provides it to the config's tools", "setup")
            server, spec = catalog[name]
            outcome = await self.hub.invoke(server, spec.name, call.get("arguments") or {}, self.rollout_id, self,
                                            call_id=f"setup{n}")
            if outcome.is_error:
                raise ToolInfraError(server, f"metadata.tool_setup[{n}] ({name!r}) failed: {outcome.content[:500]}",
                                     "setup")

    async def tools(self) -> dict[str, tuple[str, Any]]:
        """Exposed name -> (server, ToolSpec), after the rollout's own restriction."""
        if self._tools is None:
            catalog = await self.hub.catalog(self)
            self._tools = {n: st for n, st in catalog.items() if _allowed(n, st[0], st[1].name, self.allowed_tools)
                           and not {n, st[1].name} & self.held_back}
        return self._tools

    async def tool_schemas(self) -> list[dict]:
        """OpenAI-style function schemas for the chat template."""
        return [
            {"type": "function", "function": {
                "name": name,
                "description": spec.description,
                "parameters": spec.input_schema or {"type": "object", "properties": {}},
            }}
            for name, (_, spec) in (await self.tools()).items()
        ]

    async def _resolve(self, name: str) -> tuple[str, str] | None:
        tools = await self.tools()
        if name in tools:
            return tools[name][0], tools[name][1].name
        server, _, tool = name.partition(".")
        for exposed, (srv, spec) in tools.items():  # "server.tool" always works, clash or not
            if srv == server and spec.name == tool:
                return srv, tool
        return None

    async def call(self, call: ToolCall | dict) -> ToolResult:
        """One call. Tool errors come back as ``is_error`` results; infrastructure failures raise ToolInfraError."""
        if isinstance(call, dict):
            call = ToolCall.from_dict(call)
        if self._closed:
            raise RuntimeError(f"rollout {self.rollout_id!r} has ended; its tool session is closed")
        name = call.name if isinstance(call.name, str) else ""
        target = await self._resolve(name) if name else None
        if target is None:
            known = sorted(await self.tools())
            shown = ", ".join(known[:30]) + (" ..." if len(known) > 30 else "")
            return ToolResult(call.id, str(call.name), f"Error: unknown tool {call.name!r}. Available tools: {shown or '(none)'}", True)
        arguments, problem = _arguments(call.arguments)
        if arguments is None:
            return ToolResult(call.id, name, f"Error: cannot call {name!r}: {problem}.", True)
        outcome = await self.hub.invoke(target[0], target[1], arguments, self.rollout_id, self, call_id=call.id)
        return ToolResult(call.id, name, truncate(outcome.content, self.hub.max_result_chars), outcome.is_error)

    async def call_many(self, calls: list[ToolCall | dict]) -> list[ToolResult]:
        """Run calls concurrently; results in call order. Raises the first ToolInfraError once all have ended."""
        outcomes = await asyncio.gather(*(self.call(c) for c in calls), return_exceptions=True)
        for o in outcomes:
            if isinstance(o, BaseException):
                raise o
        return list(outcomes)

    # -- per-rollout connections (stateful servers) --------------------------------------------
    async def connection(self, srv: "_Server"):
        """This rollout's own connection to a stateful server, started (or restarted) on first use; the hub's
        call path takes it here and hands it back through :meth:`discard` when it fails."""
        name = srv.spec.name
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            if self._closed:
                raise ToolInfraError(name, "the rollout ended while a call was starting", "closed")
            conn = self._connections.get(name)
            if conn is None or not conn.alive:
                if conn is not None:
                    restarted(srv, conn, "its connection closed")
                    await conn.close()
                conn = new_connection(srv.spec, rollout_id=self.rollout_id)
                await conn.start()
                self._connections[name] = conn
            return conn

    async def discard(self, srv: "_Server", conn, why: str = "") -> None:
        """Drop a failed connection of this rollout (the next call starts a new one) and say why."""
        if self._connections.get(srv.spec.name) is conn:
            del self._connections[srv.spec.name]
            if not self._closed:
                restarted(srv, conn, why or "its connection was lost")
        await conn.close()

    async def aclose(self) -> None:
        """Close this rollout's MCP sessions (stdio servers are stopped)."""
        self._closed = True
        conns, self._connections = list(self._connections.values()), {}
        cancelled = None
        for conn in conns:
            try:
                await conn.close()
            except asyncio.CancelledError as exc:  # close the rest first, then let the cancellation through
                cancelled = exc
        if cancelled is not None:
            raise cancelled
