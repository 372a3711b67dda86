"""The CPU demo: a tiny tool-calling model, its arithmetic task data and a warm-up, built offline.

    from agentrl.demo import build
    paths = build("runs/demo")   # {"model_path", "train_path", "val_path"}

or ``python -m agentrl.demo.build runs/demo``.
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


def base_success_rate(model_path: str, rows: list[dict], n_samples: int = 4, temperature: float = 1.0, **kwargs: Any):
    """Sampled success and tool-use rates of a demo model; see :mod:`agentrl.demo.evaluate`."""
    from agentrl.demo.evaluate import base_success_rate as _rate

    return _rate(model_path, rows, n_samples, temperature=temperature, **kwargs)


from agentrl.demo.builder import build  # noqa: E402  (after CALCULATOR_TOOLS, which it imports)

__all__ = ["CALCULATOR_TOOLS", "CALCULATOR_TOOL_NAMES", "build", "base_success_rate"]
