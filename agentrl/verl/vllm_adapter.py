"""verl's vLLM rollout adapter (it lives in the trainer worker) with a weight sync that cannot hang.

Registered by the plugin as verl's ``vllm`` rollout class; see ``agentrl.verl.weight_sync`` for why and how.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Optional

import torch

from verl.workers.rollout.vllm_rollout.vllm_rollout import ServerAdapter

from agentrl.verl.weight_sync import GuardedSender, receiver_check, sync_timeout

logger = logging.getLogger(__name__)


class GuardedServerAdapter(ServerAdapter):
    """verl's vLLM ``ServerAdapter`` with a weight sync that cannot hang (see the module docstring)."""

    @torch.no_grad()
    async def update_weights(self, weights: Any, global_steps: Optional[int] = None,
                             wire_format: str = "named_tensors", **kwargs: Any) -> None:
        if wire_format != "named_tensors" or not self._has_server:
            # delta syncs need CUDA IPC and go verl's way; ranks without a server send nothing
            return await super().update_weights(weights, global_steps=global_steps, wire_format=wire_format,
                                                 **kwargs)
        # verl's named-tensor path (vllm_rollout.ServerAdapter.update_weights), with the sender guarded
        started = time.time()
        future = await self._execute_method("update_weights_from_ipc", non_block=True,
                                            kwargs={**kwargs, "use_shm": self.use_shm})
        sender = GuardedSender(zmq_handle=self.zmq_handle,
                               bucket_size_mb=self.config.checkpoint_engine.update_weights_bucket_megabytes,
                               use_shm=self.use_shm, check=receiver_check(future), timeout=sync_timeout())
        await sender.async_send_weights(weights)
        await future
        await self.server_handle.clear_kv_cache.remote()
        if global_steps is not None:
            await self.server_handle.set_global_steps.remote(global_steps)
        if self.replica_rank == 0 and self.rollout_rank == 0:
            logger.info("weights synced to vLLM in %.2fs", time.time() - started)
