"""verl 0.9.1's LoRA weight sync on vLLM 0.31: a ``vllm.general_plugins`` entry point (every vLLM process).

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
