"""Rewards: the ``grade(sample, item) -> float | None`` contract, presets, and weighted sets.

    from agentrl.rewards import load_reward, RewardSet

    math = load_reward("math")                       # a preset or plugin name
    mine = load_reward("reward.py")                  # your file, run in the sandbox
    math({"final_answer": "\\\\boxed{7}"}, {"metadata": {"expected_answer": "7"}})   # -> 1.0

    rewards = RewardSet.from_config([
        {"name": "math", "weight": 1.0},
        {"name": "llm_judge", "weight": 0.5, "model": "openai/gpt-4o-mini", "env": ["OPENAI_API_KEY"]},
        {"name": "tool_use", "weight": 0},           # weight 0: logged, not trained on
    ])
    result = rewards.score(sample, item)             # ScoreResult(score, components, unscorable, ...)

``None`` from a reward means "does not apply" and is left out. ``Unscorable`` (raised, or reported in
``ScoreResult.unscorable``) means "could not score" and is never a 0.
"""

from __future__ import annotations

from pathlib import Path

from agentrl.rewards.errors import Unscorable
from agentrl.rewards.errors import RewardConfigError
from agentrl.rewards.loading import Reward
from agentrl.rewards.resolve import load_reward
from agentrl.rewards.rewardset import RewardSet, ScoreResult

# Modules a preset file (and so a file written by `agentrl reward new`) imports when it runs in the sandbox.
# The sandbox allow-list must admit these top-level imports, and the zygote should preimport the helpers
# (agentrl.rewards.mathcheck imports subprocess/select/threading internally; inside the sandbox it compares
# in a thread instead of spawning). Judge presets also need NETWORK = True and read their key via getenv().
SANDBOX_IMPORTS = (
    "re", "json", "math", "fractions",
    "agentrl.rewards", "agentrl.rewards.errors", "agentrl.rewards.mathcheck", "agentrl.rewards.mathextract",
    "agentrl.rewards.mathnorm", "agentrl.rewards.codecheck", "agentrl.rewards.codelayouts", "agentrl.rewards.toolcheck", "agentrl.rewards.judge",
    "sympy", "math_verify",  # the symbolic math check (run in a child process by mathcheck)
    "litellm",  # llm_judge / tool_use with a judge; such files also set NETWORK = True
)


def presets() -> dict[str, Path]:
    """Every registered reward that ships a copyable file (``source=`` in its registration), by name."""
    from agentrl import plugins

    return {name: Path(entry.extra["source"]) for name, entry in plugins.rewards().items() if entry.extra.get("source")}


def preset_source(name: str) -> str:
    """The text of a preset file, for ``agentrl reward new --preset NAME > reward.py``."""
    table = presets()
    if name not in table:
        from agentrl.plugins import unknown_name_error

        raise unknown_name_error("preset", name, list(table))
    return table[name].read_text()


def __getattr__(name: str):
    if name == "PRESETS":  # the preset names, asked of the plugin hook each time: no second table
        return tuple(presets())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["load_reward", "RewardSet", "ScoreResult", "Unscorable", "Reward", "RewardConfigError",
           "preset_source", "presets", "SANDBOX_IMPORTS"]
