"""The demo's training config, written the README's way, for the tests that run `agentrl train` on it
(tests/e2e/test_train.py trains it; tests/core/test_train_refuses.py breaks one thing and expects a refusal).

    config = write_config(tmp_path, demo, max_steps=1)   # demo: the build of tests/conftest.py
"""

from __future__ import annotations

from pathlib import Path

import yaml

STEPS = 3


def write_config(tmp_path: Path, demo: dict, **agentrl) -> Path:
    """``tmp_path``/config.yaml: the demo model and data, calculator tool, math + tool_use rewards, 2 prompts x 4
    samples for :data:`STEPS` steps, a checkpoint each step; ``agentrl`` keys replace the block's."""
    block = {
        "name": "e2e", "model": demo["model_path"], "train_data": demo["train_path"],
        "tools": ["calculator"],
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0}],
        "batch_size": 2, "samples_per_prompt": 4, "max_steps": STEPS, "save_every": 1,
        "max_prompt_length": 320, "max_response_length": 64, "learning_rate": 5e-4,
        "run_dir": str(tmp_path / "run"), "agent": {"max_turns": 2, "max_tool_calls": 2},
    }
    block.update(agentrl)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"agentrl": block}))
    return path
