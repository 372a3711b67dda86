"""MCP tools for rollouts: declare servers, open per-rollout sessions, call tools with traffic control.

The MCP SDK is imported only by :mod:`agentrl.tools.client`, and only when something here is first used:
loading the ``builtin_tools`` plugin (``agentrl.tools.builtin``) must stay cheap.
"""

from importlib import import_module

_EXPORTS = {
    "ServerSpec": "config",
    "ToolConfigError": "config",
    "parse_servers_config": "config",
    "ToolCall": "types",
    "ToolHub": "hub",
    "ToolInfraError": "types",
    "ToolResult": "types",
    "truncate": "types",
    "RolloutSession": "session",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentrl.tools' has no attribute {name!r}")
    value = getattr(import_module(f"agentrl.tools.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
