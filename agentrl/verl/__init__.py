"""Everything of agentrl that touches verl, in one package.

verl loads ``agentrl.verl.plugin`` (entry point group ``verl.plugins``) in every process that imports verl; it
registers, through verl's own registries:

- ``agent_loop``: the ``agentrl`` agent loop (verl's ``AgentLoopBase``);
- ``grpo``: the ``agentrl_grpo`` advantage estimator (unscorable rollouts kept out of their group);
- ``cpu/``: the ``cpu`` platform and the ``agentrl_cpu`` transformers rollout (no GPU);
- ``pacing``: the replay buffer's poll interval.

``reward``: ``compute_score``, agentrl's rewards as verl's reward function (``pkg://agentrl.verl``).

``args`` turns an agentrl config into verl's Hydra overrides, ``gpu_plan`` plans a GPU run, ``dryrun`` composes
and validates verl's config without training.

This module itself imports nothing of verl: verl imports its plugins while it is itself being imported.
"""


def __getattr__(name: str):
    # ``reward.custom_reward_function.path=pkg://agentrl.verl`` (name ``compute_score``): verl's reward
    # function, imported when verl asks for it
    if name == "compute_score":
        from agentrl.verl.reward import compute_score

        return compute_score
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
