"""Smoke tests before training, for ``agentrl tools list|call|check CONFIG``.

Each helper takes what :func:`agentrl.tools.parse_servers_config` takes (a dict, a JSON file path,
plugin names), runs its own event loop, and returns text for the terminal.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from agentrl.tools.hub import ToolCall, ToolHub, ToolInfraError


def _summary(description: str, width: int = 72) -> str:
    line = (description or "").strip().splitlines()[0] if (description or "").strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def list_tools(servers: Any) -> str:
    """Every tool of every server, as ``server.tool(args) - description``."""

    async def main() -> str:
        async with ToolHub.from_config(servers) as hub:
            lines = []
            for name, spec in hub.specs.items():
                where = spec.url or " ".join([spec.command or "", *spec.args])
                lines.append(f"{name}  ({spec.transport}: {where})")
                for tool in await hub.server_tools(name):
                    props = ", ".join((tool.input_schema.get("properties") or {}).keys())
                    lines.append(f"  {name}.{tool.name}({props})  {_summary(tool.description)}".rstrip())
            return "\n".join(lines)

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


def check(servers: Any) -> tuple[str, bool]:
    """Connect to every server, list its tools, time it; ``ok`` is False if any server failed."""

    async def one(hub: ToolHub, name: str) -> tuple[str, bool]:
        start = time.perf_counter()
        try:
            tools = await hub.server_tools(name)
        except ToolInfraError as exc:
            return f"FAIL {name}: {exc.kind}: {exc.cause}", False
        ms = (time.perf_counter() - start) * 1000
        if not tools:
            return f"FAIL {name}: connected in {ms:.0f} ms but lists no tools (check its `tools` allow-list)", False
        return f"ok   {name}: {len(tools)} tools in {ms:.0f} ms ({', '.join(t.name for t in tools[:8])}{' ...' if len(tools) > 8 else ''})", True

    async def main() -> tuple[str, bool]:
        async with ToolHub.from_config(servers) as hub:
            rows = await asyncio.gather(*(one(hub, name) for name in hub.specs))
        ok = all(good for _, good in rows) and bool(rows)
        tail = f"{sum(g for _, g in rows)}/{len(rows)} servers ok"
        return "\n".join([line for line, _ in rows] + [tail]), ok

    return asyncio.run(main())
