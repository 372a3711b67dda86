"""Smoke tests before training, for ``agentrl tools list|call|check CONFIG``.

Each helper takes what :func:`agentrl.tools.parse_servers_config` takes (a dict, a JSON file path,
plugin names), runs its own event loop, and returns text for the terminal.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from typing import Any

from agentrl.tools.config import parse_servers_config
from agentrl.tools.hub import ToolCall, ToolHub, ToolInfraError, TransportFailure


def _summary(description: str, width: int = 72) -> str:
    line = (description or "").strip().splitlines()[0] if (description or "").strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def list_tools(servers: Any) -> str:
    """Every tool of every server, as ``server.tool(args) - description``. Raises ToolInfraError for a server
    that does not answer."""
    text, failures, _ = list_servers(servers)
    if failures:
        raise failures[0]
    return text


def list_servers(servers: Any) -> tuple[str, list[ToolInfraError], list[dict]]:
    """``(text, failures, records)``: the text lists every server that answered, and one ``FAIL`` line for
    each that did not; records are ``{server, transport, where, tools: [{name, description, input_schema}]}``
    (``error`` instead of ``tools`` for a failed server)."""

    async def main() -> tuple[str, list[ToolInfraError], list[dict]]:
        lines, failures, records = [], [], []
        async with _hub_for_checks(servers) as hub:
            for name, spec in hub.specs.items():
                where = spec.url or " ".join([spec.command or "", *spec.args])
                record = {"server": name, "transport": spec.transport, "where": where}
                records.append(record)
                lines.append(f"{name}  ({spec.transport}: {where})")
                try:
                    tools = await hub.server_tools(name)
                except ToolInfraError as exc:
                    failures.append(exc)
                    record["error"] = f"{exc.kind}: {exc.cause}"
                    lines.append(f"  FAIL {exc.kind}: {exc.cause}")
                    continue
                record["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                                   for t in tools]
                for tool in tools:
                    props = ", ".join((tool.input_schema.get("properties") or {}).keys())
                    lines.append(f"  {name}.{tool.name}({props})  {_summary(tool.description)}".rstrip())
        return "\n".join(lines), failures, records

    return asyncio.run(main())


def call_tool(servers: Any, name: str, args_json: str = "{}") -> tuple[str, bool]:
    """Call ``server.tool`` (or a bare tool name) once; returns ``(text, is_error)``."""
    try:
        arguments = json.loads(args_json or "{}")
    except json.JSONDecodeError as exc:
        return f"arguments are not valid JSON: {exc}", True

    async def main() -> tuple[str, bool]:
        async with ToolHub.from_config(servers, max_result_chars=None) as hub:
            async with hub.rollout(f"cli-{int(time.time())}") as session:
                try:
                    result = await session.call(ToolCall("cli", name, arguments))
                except ToolInfraError as exc:
                    return str(exc), True
                return result.content, result.is_error

    return asyncio.run(main())


def _hub_for_checks(servers: Any) -> ToolHub:
    """A hub that tries each server once: a server that hangs or dies at start fails in ``connect_timeout``
    seconds with its reason, instead of being retried for minutes."""
    return ToolHub({name: replace(spec, retries=0) for name, spec in parse_servers_config(servers).items()})


def check(servers: Any) -> tuple[str, bool]:
    """Connect to every server, list its tools, time it; ``ok`` is False if any server failed."""
    text, ok, _ = check_servers(servers)
    return text, ok


def check_servers(servers: Any) -> tuple[str, bool, dict[str, list[str]]]:
    """:func:`check`, and the tools each server offers (after its allow-list): ``{server: [tool, ...]}``."""
    offered: dict[str, list[str]] = {}

    async def one(hub: ToolHub, name: str) -> tuple[str, bool]:
        start = time.perf_counter()
        try:
            tools = await hub.server_tools(name)
        except ToolInfraError as exc:
            return f"FAIL {name}: {exc.kind}: {exc.cause}", False
        offered[name] = [t.name for t in tools]
        spec = hub.specs[name]
        if spec.function:  # a plain endpoint lists nothing: ask it whether it takes the token, without a real call
            from agentrl.tools.http import FunctionConnection

            conn = FunctionConnection(spec)
            await conn.start()
            try:
                verdict, seen = await conn.check_token()
            except TransportFailure as exc:
                return f"FAIL {name}: {exc.kind}: {exc}", False
            finally:
                await conn.close()
            ms = (time.perf_counter() - start) * 1000
            if verdict is False:
                return f"FAIL {name}: unauthorized: {seen}", False
            if verdict is None:
                return f"??   {name}: POST {spec.url} answered in {ms:.0f} ms, token NOT verified: {seen}", True
            return f"ok   {name}: POST {spec.url} answered in {ms:.0f} ms ({seen})", True
        ms = (time.perf_counter() - start) * 1000
        if not tools:
            return f"FAIL {name}: connected in {ms:.0f} ms but lists no tools (check its `tools` allow-list)", False
        return f"ok   {name}: {len(tools)} tools in {ms:.0f} ms ({', '.join(t.name for t in tools[:8])}{' ...' if len(tools) > 8 else ''})", True

    async def main() -> tuple[str, bool]:
        async with _hub_for_checks(servers) as hub:
            rows = await asyncio.gather(*(one(hub, name) for name in hub.specs))
        ok = all(good for _, good in rows) and bool(rows)
        sure = sum(line.startswith("ok") for line, _ in rows)
        unsure = sum(line.startswith("??") for line, _ in rows)
        tail = f"{sure}/{len(rows)} servers ok" + (f", {unsure} reachable but their token not verified" if unsure else "")
        return "\n".join([line for line, _ in rows] + [tail]), ok

    text, ok = asyncio.run(main())
    return text, ok, offered


def loadtest(servers: Any, name: str, args_json: str = "{}", *, rollouts: int = 64, calls: int = 4,
             parallel: int = 1) -> tuple[str, bool]:
    """Before launch: ``rollouts`` concurrent rollouts each make ``calls`` calls of one tool (``parallel``
    per turn), the way a training step's burst does. ``ok`` is False if any call failed for the server's sake."""
    from agentrl.tools.traffic import percentile

    arguments = json.loads(args_json or "{}")
    parallel = max(1, min(parallel, calls))

    async def main() -> tuple[str, bool]:
        latencies: list[float] = []
        tool_errors = infra = 0
        first_infra = ""
        async with ToolHub.from_config(servers) as hub:
            async def rollout(i: int) -> None:
                nonlocal tool_errors, infra, first_infra
                async with hub.rollout(f"loadtest-{i}") as session:
                    for turn in range(calls // parallel):
                        async def one(j: int) -> None:
                            nonlocal tool_errors, infra, first_infra
                            start = time.perf_counter()
                            try:
                                result = await session.call(ToolCall(f"c{turn}-{j}", name, arguments))
                            except ToolInfraError as exc:
                                infra += 1
                                first_infra = first_infra or str(exc)
                                return
                            latencies.append(time.perf_counter() - start)
                            tool_errors += result.is_error

                        await asyncio.gather(*(one(j) for j in range(parallel)))

            try:
                async with hub.rollout("loadtest-warmup") as session:
                    await session.tools()
            except ToolInfraError as exc:
                return f"cannot start: {exc}\ninfrastructure failures: 1", False
            wall = time.perf_counter()
            await asyncio.gather(*(rollout(i) for i in range(rollouts)))
            wall = time.perf_counter() - wall
            metrics = hub.metrics()
        lat = sorted(latencies)
        total = len(lat) + infra
        p50, p99 = ((percentile(lat, q) or 0) * 1000 for q in (50, 99))
        lines = [
            f"{rollouts} rollouts x {calls // parallel * parallel} calls of {name}: {total} calls in {wall:.2f} s, "
            f"{total / wall if wall else 0:.1f} calls/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms",
            f"tool errors (shown to the model): {tool_errors}; infrastructure failures: {infra}"
            + (f" (first: {first_infra})" if first_infra else ""),
            *(f"{server}: {json.dumps(m)}" for server, m in metrics.items()),
        ]
        return "\n".join(lines), infra == 0

    return asyncio.run(main())
