"""The CPU demo: a tiny tool-calling model, its arithmetic task data and a warm-up, built offline.

    from agentrl.demo import build
    paths = build("runs/demo")   # {"model_path", "train_path", "val_path"}

or ``python -m agentrl.demo.build runs/demo``.
"""

from __future__ import annotations

from typing import Any

from agentrl.demo.builder import build
from agentrl.demo.tools import CALCULATOR_TOOL_NAMES, CALCULATOR_TOOLS


def base_success_rate(model_path: str, rows: list[dict], n_samples: int = 4, temperature: float = 1.0, **kwargs: Any):
    """Sampled success and tool-use rates of a demo model; see :mod:`agentrl.demo.evaluate`."""
    from agentrl.demo.evaluate import base_success_rate as _rate

    return _rate(model_path, rows, n_samples, temperature=temperature, **kwargs)


__all__ = ["CALCULATOR_TOOLS", "CALCULATOR_TOOL_NAMES", "build", "base_success_rate"]
