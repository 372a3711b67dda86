"""Register the CPU rollout with verl by name only, without importing it.

verl imports its plugins while ``verl`` itself is being imported; the rollout module imports verl,
so it is named here as a dotted path and a lazy loader, and imported when verl first asks for it.
"""

from agentrl.verl.cpu import ROLLOUT_NAME as NAME


def _load_replica():
    from agentrl.verl.cpu.rollout import CpuRolloutReplica

    return CpuRolloutReplica


def register() -> None:
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    base._ROLLOUT_REGISTRY[(NAME, "async")] = "agentrl.verl.cpu.rollout.CpuServerAdapter"
    # verl's vLLM rollout, with a weight sync that fails with its cause instead of hanging (GPU and CPU alike)
    base._ROLLOUT_REGISTRY[("vllm", "async")] = "agentrl.verl.vllm_adapter.GuardedServerAdapter"
    RolloutReplicaRegistry.register(NAME, _load_replica)
