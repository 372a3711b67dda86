"""The demo's calculator tools as the chat template sees them (a leaf module: the demo's other modules import it).

    from agentrl.demo.tools import CALCULATOR_TOOLS, CALCULATOR_TOOL_NAMES
"""

from __future__ import annotations

from typing import Any


def _binary_tool(name: str, description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"a": {"title": "A", "type": "number"}, "b": {"title": "B", "type": "number"}},
                "required": ["a", "b"],
                "title": f"{name}Arguments",
            },
        },
    }


# The calculator MCP server's tools exactly as agentrl's tool session lists them to the chat
# template when a row restricts the rollout to them (metadata.allowed_tools = CALCULATOR_TOOL_NAMES):
# plugins/agentrl-calculator derives each schema from the type hints (float -> "number") and the
# docstring. The demo model is trained on this system prompt and calls the tools with integer
# arguments; the server answers with the plain number, e.g. "85".
CALCULATOR_TOOL_NAMES = ["add", "subtract", "multiply"]
CALCULATOR_TOOLS: list[dict[str, Any]] = [
    _binary_tool("add", "Add two numbers: a + b."),
    _binary_tool("subtract", "Subtract b from a: a - b."),
    _binary_tool("multiply", "Multiply two numbers: a * b."),
]
