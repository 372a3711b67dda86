"""verl 0.9.1 with vLLM 0.31: ``vllm.general_plugins`` entry points, loaded in every vLLM process.

The LoRA sync:

verl loads the trainer's LoRA adapter into vLLM from tensors through its own ``_load_adapter``
(verl/utils/vllm/utils.py), which on vLLM >= 0.25 calls ``WeightsMapper.get_unstacked_mapper()``. vLLM 0.31
renamed that method ``get_rename_mapper`` (the mapper without the stacked renames, for naming LoRA modules, as
its own ``_load_adapter`` now calls it), so every LoRA sync failed with ``'WeightsMapper' object has no attribute
'get_unstacked_mapper'``. The old name is given back, meaning the same thing, where vLLM lacks it.
"""

from __future__ import annotations


def lora_mapper_name() -> None:
    from vllm.model_executor.models.utils import WeightsMapper

    if not hasattr(WeightsMapper, "get_unstacked_mapper") and hasattr(WeightsMapper, "get_rename_mapper"):
        WeightsMapper.get_unstacked_mapper = WeightsMapper.get_rename_mapper


def receiver_keeps_the_cause() -> None:
    """verl's weight receiver (run inside vLLM's worker) releases its shared-memory bucket in a ``finally``.
    When loading a bucket failed, the failed bucket's tensors still view that memory, so the release fails too
    (``BufferError: cannot close exported pointers exist``) and replaces the error that stopped the sync: vLLM
    then reports only the BufferError. Here the first error is raised again, so the run stops with its cause."""
    try:
        from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver
    except Exception:  # verl without a usable vLLM rollout: nothing to keep
        return
    original = BucketedWeightReceiver.receive_weights
    if getattr(original, "agentrl_keeps_cause", False):
        return

    def receive_weights(self, on_bucket_received):
        try:
            return original(self, on_bucket_received)
        except BufferError as exc:
            if exc.__context__ is None:
                raise
            raise exc.__context__ from exc

    receive_weights.agentrl_keeps_cause = True
    BucketedWeightReceiver.receive_weights = receive_weights
