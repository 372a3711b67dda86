"""The agentrl plugin: registers the stdio calculator as tool server "calculator".

Kept apart from the server so that loading agentrl plugins never imports the MCP SDK.
"""

import sys

from agentrl.hookspecs import hookimpl


@hookimpl
def register_tool_servers(register):
    register(
        "calculator",
        {"command": sys.executable, "args": ["-m", "agentrl_calculator"]},
        description="add, subtract, multiply, divide, power, sqrt and evaluate (arithmetic expressions)",
    )
