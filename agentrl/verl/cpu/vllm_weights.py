"""vLLM's CPU backend, made able to take new weights after loading: a ``vllm.general_plugins`` entry point.

After loading a model, vLLM's CPU backend packs each linear layer's weight for oneDNN (or its small-GEMM kernel)
and replaces ``layer.weight`` with an empty parameter (``dispatch_cpu_unquantized_gemm(layer,
remove_weight=True)`` in vllm/model_executor/layers/linear.py). The packed copy is all it computes with, so the
memory of the original is saved. But the empty parameter has no ``weight_loader``: verl's weight sync, which loads
the trainer's weights with ``model.load_weights`` after every update, then fails with ``'Parameter' object has no
attribute 'weight_loader'``.

This plugin keeps the weight (``remove_weight=False``), as vLLM already does for the embedding. verl re-runs
``process_weights_after_loading`` after every sync, which packs the new weights again, so generation always uses
the weights just loaded. The cost is one unpacked copy of the linear weights in the vLLM process. vLLM loads
general plugins in every one of its processes; on a GPU platform this does nothing.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def keep_linear_weights() -> None:
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.model_executor.layers import utils

    original = utils.dispatch_cpu_unquantized_gemm
    if getattr(original, "agentrl_keeps_weight", False):
        return

    def dispatch_cpu_unquantized_gemm(layer, remove_weight: bool) -> None:
        original(layer, remove_weight=False)

    dispatch_cpu_unquantized_gemm.agentrl_keeps_weight = True
    utils.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm
    logger.debug("agentrl: vLLM's CPU linear layers keep their weights, so they can be reloaded")
