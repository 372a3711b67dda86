"""Everything of agentrl that touches verl, in one package.

verl loads ``agentrl.verl.plugin`` (entry point group ``verl.plugins``) in every process that imports verl; it
registers, through verl's own registries:

- ``agent_loop``: the ``agentrl`` agent loop (verl's ``AgentLoopBase``);
- ``grpo``: the ``agentrl_grpo`` advantage estimator (unscorable rollouts kept out of their group);
- ``cpu/``: the ``cpu`` platform and the ``agentrl_cpu`` transformers rollout (no GPU);
- ``pacing``: the replay buffer's poll interval.

``args`` turns an agentrl config into verl's Hydra overrides, ``gpu_plan`` plans a GPU run, ``dryrun`` composes
and validates verl's config without training.

This module itself imports nothing of verl: verl imports its plugins while it is itself being imported.
"""
