"""MCP tools for rollouts: declare servers, open per-rollout sessions, call tools with traffic control.

The MCP SDK is imported only by :mod:`agentrl.tools.client`.
"""

from agentrl.tools.config import ServerSpec, ToolConfigError, parse_servers_config
from agentrl.tools.hub import ToolCall, ToolHub, ToolInfraError, ToolResult, truncate
from agentrl.tools.session import RolloutSession

__all__ = [
    "RolloutSession",
    "ServerSpec",
    "ToolCall",
    "ToolConfigError",
    "ToolHub",
    "ToolInfraError",
    "ToolResult",
    "parse_servers_config",
    "truncate",
]
