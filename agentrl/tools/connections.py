"""The one place that picks a connection class for a server: an MCP session or an HTTP function tool's client.

    conn = new_connection(spec)                        # ToolSpec of a server in the hub's config
    conn = new_connection(spec, rollout_id="r-1")      # a stateful server's per-rollout session
    await conn.start(); await conn.call_tool("add", {"a": 1}); await conn.close()

:mod:`agentrl.tools.client` (MCP) and :mod:`agentrl.tools.http` (function tools) import the shared values from
:mod:`agentrl.tools.types`; the hub and the rollout session import this factory, so nothing below imports back up.
Each class is imported only when a server of its kind is used (an HTTP-only config never loads the MCP SDK).
"""

from __future__ import annotations


def new_connection(spec, rollout_id: str | None = None):
    """A connection to ``spec``: an MCP session, or an HTTP function tool's client."""
    if spec.function:
        from agentrl.tools.http import FunctionConnection

        return FunctionConnection(spec, rollout_id)
    from agentrl.tools.client import Connection

    return Connection(spec, rollout_id=rollout_id)
