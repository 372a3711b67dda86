"""ToolHub: every tool call of every rollout in this process goes through here.

    hub = ToolHub.from_config({"calc": {"command": "python", "args": ["-m", "agentrl_calculator"]}})
    async with hub.rollout("r-1") as session:
        schemas = await session.tool_schemas()
        results = await session.call_many([ToolCall("c0", "add", {"a": 1, "b": 2})])
    await hub.aclose()

Two outcomes only. A tool error (bad arguments, an ``isError`` result, an unknown tool, arguments that are
not a JSON object) is a :class:`ToolResult` with ``is_error=True`` and text the model can learn from. A
failure of the infrastructure (unreachable, crashed and not back, 5xx after retries, timeout, circuit open)
raises :class:`ToolInfraError`: the rollout cannot be scored, and must never be scored 0.

One shared MCP session per server serves all rollouts; a server declared ``"stateful": true`` gets one
session per rollout instead, closed when the rollout ends however it ends. A hub belongs to the event
loop that first uses it and keeps no state outside itself.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from agentrl.tools.config import ServerSpec, parse_servers_config
from agentrl.tools.limits import RunLimits, gate_for, on_ray
from agentrl.tools.pushback import pushback_wait
from agentrl.tools.connections import new_connection
from agentrl.tools.session import RolloutSession, restarted
from agentrl.backoff import backoff
from agentrl.tools.traffic import CircuitBreaker, ServerStats
from agentrl.tools.types import (  # noqa: F401  (ToolCall, ToolResult, truncate re-exported)
    CallOutcome, ToolCall, ToolInfraError, ToolResult, ToolSpec, TransportFailure, truncate)

DEFAULT_MAX_RESULT_CHARS = 16_000


class _Server:
    """Runtime state of one server inside one hub."""

    def __init__(self, spec: ServerSpec, run_limits: RunLimits | None = None) -> None:
        self.spec = spec
        self.breaker = CircuitBreaker(spec.circuit_failures, spec.circuit_reset)
        self.stats = ServerStats()
        self.gate = gate_for(spec, run_limits)  # max_concurrency and rate_limit, per run or per process
        self.lock = asyncio.Lock()
        self.shared: Any = None  # a Connection or a FunctionConnection
        self.tools: list[ToolSpec] | None = None
        self.probe: asyncio.Task | None = None  # checks the server while its circuit is open


class ToolHub:
    def __init__(self, specs: dict[str, ServerSpec], *, max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
                 run_key: str | None = None) -> None:
        """``run_key`` (the run directory): on Ray, the limits of servers with ``"limit_scope": "run"`` hold for
        every process of the run that gives the same key (:mod:`agentrl.tools.limits`)."""
        self.specs = dict(specs)
        self.max_result_chars = max_result_chars
        self.run_key = run_key
        self.run_limits: RunLimits | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: dict[str, _Server] = {}
        self._catalog: dict[str, tuple[str, ToolSpec]] | None = None
        self._catalog_lock: asyncio.Lock | None = None
        self._sessions: set[RolloutSession] = set()

    @classmethod
    def from_config(cls, servers: Any, *, allow: dict[str, list[str]] | None = None, max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS, pm=None,
                    run_key: str | None = None) -> "ToolHub":
        """``servers``: the mcpServers dict (or ``{"mcpServers": ...}``, a JSON file path, plugin names)."""
        return cls(parse_servers_config(servers, allow=allow, pm=pm), max_result_chars=max_result_chars, run_key=run_key)

    # -- plumbing -------------------------------------------------------------------------------
    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            if self.run_key and on_ray() and any(spec.limit_scope == "run" for spec in self.specs.values()):
                self.run_limits = RunLimits(self.run_key)
            self._servers = {name: _Server(spec, self.run_limits) for name, spec in self.specs.items()}
            self._catalog_lock = asyncio.Lock()
        elif self._loop is not loop:
            raise RuntimeError("this ToolHub belongs to another event loop; create one ToolHub per event loop")

    def _server(self, name: str) -> _Server:
        self._bind()
        return self._servers[name]

    async def _shared(self, srv: _Server):
        if srv.shared is not None and srv.shared.alive:
            return srv.shared
        async with srv.lock:
            if srv.shared is None or not srv.shared.alive:
                if srv.shared is not None:
                    restarted(srv, srv.shared, "its connection closed")
                    await srv.shared.close()
                conn = new_connection(srv.spec)
                await conn.start()
                srv.shared = conn
            return srv.shared

    async def _discard_shared(self, srv: _Server, conn, why: str = "") -> None:
        async with srv.lock:
            if srv.shared is conn:
                srv.shared = None
                restarted(srv, conn, why or "its connection was lost")
        await conn.close()

    def _watch(self, srv: _Server) -> None:
        """While the circuit is open, probe the server in the background (a fresh connection and
        ``tools/list``; for an HTTP endpoint a GET of its URL) every ``first_reset`` seconds, and
        close the circuit at the first answer: calls fail fast meanwhile, and a recovered server is used
        again at once, however long the breaker's own wait has grown."""
        if srv.probe is None or srv.probe.done():
            srv.probe = asyncio.create_task(self._probe(srv), name=f"agentrl-probe-{srv.spec.name}")

    async def _probe(self, srv: _Server) -> None:
        while srv.breaker.state != "closed":
            await asyncio.sleep(max(srv.breaker.first_reset, 0.2))
            conn = new_connection(srv.spec)
            try:
                await asyncio.wait_for(self._probe_once(conn), srv.spec.timeout)
            except Exception:  # still down (or still not answering)
                await conn.close()
                continue
            if srv.breaker.state == "closed":  # a trial call got through first: keep its session
                await conn.close()
                return
            srv.breaker.success()
            if srv.spec.stateful or srv.spec.function:
                await conn.close()
                return
            async with srv.lock:  # the probe's session replaces one that may have gone stale meanwhile
                old, srv.shared = srv.shared, conn
            if old is not None:
                await old.close()
            return

    @staticmethod
    async def _probe_once(conn) -> None:
        await conn.start()
        if hasattr(conn, "probe"):
            await conn.probe()
        else:
            await conn.list_tools()

    async def server_tools(self, name: str, session: "RolloutSession | None" = None) -> list[ToolSpec]:
        """The tools ``name`` lists, after its allow-list (cached for the hub's life).

        A stateful server is listed through ``session``'s own MCP session (it would open one anyway),
        or through a throwaway one.
        """
        srv = self._server(name)
        if srv.tools is None:
            lister = (session or RolloutSession(self, "(tools/list)")) if srv.spec.stateful else None
            try:
                tools = await self._attempt(srv, "tools/list", lambda conn: conn.list_tools(), lister)
            finally:
                if lister is not None and lister is not session:
                    await lister.aclose()
            allow = srv.spec.tools
            srv.tools = [t for t in tools if allow is None or t.name in allow]
        return srv.tools

    async def catalog(self, session: "RolloutSession | None" = None) -> dict[str, tuple[str, ToolSpec]]:
        """Exposed tool name -> (server, tool). Names are prefixed ``server.tool`` only where two servers clash."""
        self._bind()
        if self._catalog is not None:
            return self._catalog
        async with self._catalog_lock:
            if self._catalog is None:
                listed = {name: await self.server_tools(name, session) for name in self.specs}
                counts: dict[str, int] = {}
                for tools in listed.values():
                    for t in tools:
                        counts[t.name] = counts.get(t.name, 0) + 1
                self._catalog = {
                    (t.name if counts[t.name] == 1 else f"{server}.{t.name}"): (server, t)
                    for server, tools in listed.items() for t in tools
                }
            return self._catalog

    async def invoke(self, server: str, tool: str, arguments: dict, rollout_id: str | None,
                     session: "RolloutSession | None" = None, call_id: str | None = None) -> CallOutcome:
        """Call one tool with the server's concurrency cap, timeout, retries and circuit breaker."""
        srv = self._server(server)
        return await self._attempt(srv, repr(tool), lambda conn: conn.call_tool(tool, arguments, rollout_id, call_id=call_id),
                                   session, record=True)

    async def _attempt(self, srv: _Server, what: str, op, session: "RolloutSession | None", record: bool = False) -> Any:
        """Run ``op(connection)``: cap, timeout, retries with backoff on transport failures, breaker.

        The call's ``deadline`` (``ServerSpec.call_deadline``) starts with its first attempt and bounds every
        attempt, retry and wait after it; 429 and 503 (push-back) are retried after their ``Retry-After`` until
        it, without counting against ``retries`` (without ``Retry-After`` they are ordinary retried failures). A call that runs out of time raises ``ToolInfraError``
        (kind ``deadline``): the rollout is unscorable."""
        spec, attempt, pushed = srv.spec, 0, 0
        per_rollout = spec.stateful and session is not None
        deadline: float | None = None
        while True:
            if not srv.breaker.allow():
                self._watch(srv)
                srv.stats.record(0.0, "circuit_open")
                wait = srv.breaker.retry_after()
                raise ToolInfraError(spec.name, f"circuit open after {srv.breaker.consecutive} consecutive failures; "
                                     + (f"failing fast for {wait:.1f}s more" if wait else "a trial call is under way")
                                     + " (a probe checks the server every second)", "circuit_open")
            conn = None
            async with srv.gate.slot():
                start = time.perf_counter()
                if deadline is None:
                    deadline = time.monotonic() + spec.call_deadline
                left = deadline - time.monotonic()
                if left <= 0:
                    srv.stats.record(0.0, "deadline")
                    raise ToolInfraError(spec.name, f"{what}: the call's deadline of {spec.call_deadline:g}s passed "
                                         f"before attempt {attempt + pushed + 1} ({spec.name!r}'s \"deadline\")", "deadline")
                try:
                    conn = await (session.connection(srv) if per_rollout else self._shared(srv))
                    result = await asyncio.wait_for(op(conn), min(spec.timeout, left))
                except asyncio.TimeoutError:
                    srv.breaker.failure()
                    srv.stats.record(time.perf_counter() - start, "timeout")
                    if left < spec.timeout:
                        raise ToolInfraError(spec.name, f"no answer to {what} within the {left:.1f}s left of the call's "
                                             f"deadline ({spec.call_deadline:g}s)", "deadline") from None
                    raise ToolInfraError(spec.name, f"no answer to {what} within {spec.timeout}s", "timeout") from None
                except TransportFailure as failure:
                    srv.breaker.failure()
                    srv.stats.record(time.perf_counter() - start, failure.kind)
                    if conn is not None and failure.connection_lost:
                        await (session.discard(srv, conn, str(failure)) if per_rollout
                               else self._discard_shared(srv, conn, str(failure)))
                    if not failure.retryable:
                        raise ToolInfraError(spec.name, failure) from failure
                    if failure.pushback and failure.retry_after is not None:
                        pushed += 1
                        wait = pushback_wait(failure.retry_after, pushed)
                        left = deadline - time.monotonic()
                        if wait >= left:
                            asked = "" if failure.retry_after is None else f" (it asked for {failure.retry_after:g}s)"
                            raise ToolInfraError(spec.name, f"{failure}; the next try would start in {wait:.1f}s{asked}, "
                                                 f"past the call's deadline ({left:.1f}s of {spec.call_deadline:g}s "
                                                 f"left, after {pushed} push-backs). Raise the server's \"deadline\", "
                                                 f"or send less: \"max_concurrency\", \"rate_limit\"", "deadline") from failure
                    elif attempt >= spec.retries:
                        raise ToolInfraError(spec.name, failure) from failure
                    else:
                        attempt += 1
                        wait = backoff(attempt)
                    srv.stats.retries += 1
                except BaseException:  # cancelled (or a bug): no verdict on the server's health
                    srv.breaker.abandon()
                    raise
                else:
                    srv.breaker.success()
                    if record:
                        srv.stats.record(time.perf_counter() - start, "tool_error" if result.is_error else "ok")
                    return result
            await asyncio.sleep(wait)

    @asynccontextmanager
    async def rollout(self, rollout_id: str, allowed_tools: list[str] | None = None) -> AsyncIterator["RolloutSession"]:
        """A session for one rollout; its per-rollout MCP sessions close on exit, cancellation included."""
        self._bind()
        session = RolloutSession(self, rollout_id, allowed_tools)
        self._sessions.add(session)
        try:
            yield session
        finally:
            self._sessions.discard(session)
            await session.aclose()

    def metrics(self) -> dict:
        """Per server: calls, ok, errors by kind, retries, restarts, latency p50/p99 (ms), circuit state."""
        return {name: (srv.stats.snapshot(srv.breaker)) for name, srv in self._servers.items()} or {
            name: ServerStats().snapshot() for name in self.specs
        }

    async def aclose(self) -> None:
        for srv in self._servers.values():
            if srv.probe is not None and not srv.probe.done():
                srv.probe.cancel()
                await asyncio.wait({srv.probe})
        for session in list(self._sessions):
            await session.aclose()
        for srv in self._servers.values():
            if srv.shared is not None:
                conn, srv.shared = srv.shared, None
                await conn.close()
        if self.run_limits is not None:
            await self.run_limits.aclose()

    async def __aenter__(self) -> "ToolHub":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

