"""agentrl: train tool-using LLM agents with reinforcement learning (verl GRPO) on your own hardware.

    agentrl train configs/demo.yaml          # the CPU demo
    from agentrl import load_reward          # a reward as a callable (sample, item) -> float | None
"""

__version__ = "0.1.0"


def load_reward(spec, **options):
    """A preset name, a plugin-registered name, or a path to a file defining ``grade(sample, item)``.

    Returns a callable ``(sample, item) -> float | None`` that accepts plain dicts. See ``agentrl.rewards``.
    """
    from agentrl.rewards import load_reward as _load_reward

    return _load_reward(spec, **options)


__all__ = ["load_reward", "__version__"]
