"""agentrl's entry in verl's ``verl.plugins`` group: loaded by verl in every process that imports it.

It registers, through verl's own registries and nothing patched on disk:
- the ``cpu`` platform, chosen automatically when no GPU is present (not in a GPU run's processes,
  which carry ``AGENTRL_DEVICE=gpu``);
- the ``agentrl_cpu`` rollout backend (transformers, token-in/token-out, weight sync);
- verl's ``vllm`` rollout class, replaced by ``agentrl.verl.vllm_adapter.GuardedServerAdapter`` (a weight sync
  that fails with its cause instead of hanging);
- the ``agentrl`` agent loop (multi-turn, MCP tools, agentrl rewards);
- the ``agentrl_grpo`` advantage estimator (unscorable rollouts kept out of their group);
- gloo's address on a cluster of several machines (``agentrl.verl.gloo``): the interface of the Ray node's;
- GRPO over rollouts of several sequences (``agentrl.verl.sessions``): one row per rollout in group statistics;
- the replay buffer's poll interval (``agentrl.verl.pacing``): steps no longer wait on a 2-second poll;
- the policy update without zero-advantage sequences (``agentrl.verl.flatgroups``): the same gradient, less compute;
- a watch on the rollout actors (``agentrl.verl.liveness``): one that dies ends the run with its cause, not a hang.

verl swallows plugin import errors at DEBUG level, so failures are logged here at ERROR level with
the cause: a broken plugin must never look like a missing feature.
"""

import logging
import os

logger = logging.getLogger("agentrl.verl.plugin")


def _load() -> None:
    try:
        from agentrl.verl.cpu import platform
        from agentrl.verl.cpu.detect import has_accelerator

        gpu_run = os.environ.get("AGENTRL_DEVICE", "").lower() == "gpu"  # set by a GPU plan, e.g. on a CPU head node
        if (not has_accelerator() and not gpu_run) or os.environ.get("VERL_PLATFORM", "").lower() == platform.NAME:
            platform.activate()
        from agentrl.verl.cpu import registration

        registration.register()
    except Exception:
        logger.exception("agentrl: could not register the CPU platform and rollout with verl")
        raise
    from agentrl.verl import gloo

    gloo.install()  # after the CPU platform's own wrapper, which it wraps
    from agentrl.verl import pacing as verl_pacing

    verl_pacing.install()
    from agentrl.verl import sessions

    sessions.install()  # agentrl_grpo over rollouts of several sequences (agent.program)
    from agentrl.verl import flatgroups

    flatgroups.install()
    from agentrl.verl import liveness

    liveness.install()
    try:
        from agentrl.verl import agent_loop  # noqa: F401  (registers the "agentrl" agent loop)
        from agentrl.verl import grpo  # noqa: F401  (registers the "agentrl_grpo" advantage estimator)
    except Exception:
        logger.exception("agentrl: could not register the agentrl agent loop with verl")
        raise


_load()
