"""The tool schemas each row's prompt offers, worked out as the agent loop works them out, for the commands that
render prompts outside a rollout: `agentrl data check` (prompt lengths) and `agentrl models warmup` (the prompts
its demonstrations follow).

A rollout offers the served tools its session lets through (the row's ``metadata.allowed_tools``, matched by
:func:`agentrl.tools.session._allowed`), less any a declared tool names, then the row's declared tools
(:func:`agentrl.dataset.offered_tools`). Here the same session filter runs against the configured servers, once per
distinct ``allowed_tools`` list."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from agentrl.dataset import declared_tools, offered_tools
from agentrl.errors import AgentrlError


class ServerDown(AgentrlError):
    """A configured tool server did not start or list its tools: the prompts cannot be rendered as rollouts
    render them."""


def _key(allowed: Any) -> Optional[tuple[str, ...]]:
    return None if allowed is None else tuple(str(a) for a in allowed)


def offered_per_row(tools: Any, allow: Any, metadatas: list[dict], where: str = "the config") -> list[Optional[list[dict]]]:
    """For each row's metadata, the tool schemas its prompt offers (None: no tools). ``tools``/``allow``: the
    config's ``agentrl.tools`` and ``tool_allow`` (no tools configured: declared tools only). Starts the servers
    once and lists their tools; a server that does not answer is a :class:`ServerDown` naming ``where``."""
    served: dict[Optional[tuple[str, ...]], list[dict]] = {}
    if tools:
        from agentrl.tools.hub import ToolHub
        from agentrl.tools.types import ToolInfraError

        keys = list(dict.fromkeys(_key(m.get("allowed_tools")) for m in metadatas))

        async def main() -> None:
            hub = ToolHub.from_config(tools, allow=allow)
            try:
                for key in keys:
                    async with hub.rollout("agentrl-offers", allowed_tools=None if key is None else list(key)) as session:
                        served[key] = await session.tool_schemas()
            finally:
                await hub.aclose()

        try:
            asyncio.run(main())
        except ToolInfraError as exc:
            raise ServerDown(f"{where}: agentrl.tools: {exc}. Run `agentrl tools check {where}` to see each "
                             f"server's output") from None
    return [offered_tools(served.get(_key(m.get("allowed_tools"))), declared_tools(m)) for m in metadatas]
