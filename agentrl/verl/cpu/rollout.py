"""The CPU rollout backend: a Ray actor serving token-in/token-out generation from a transformers model.

It plugs into the two registries verl's trainer reads: ``RolloutReplicaRegistry`` (the replica that
launches servers) and the rollout-class table (the adapter living in the trainer worker, which pushes
fresh weights to the server after every update). Selected with ``actor_rollout_ref.rollout.name=agentrl_cpu``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Generator, Optional

import ray
import torch

from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica

from agentrl.verl.cpu.server import CpuRolloutServer, server_actor_name

logger = logging.getLogger(__name__)


class CpuRolloutReplica(RolloutReplica):
    """Launches one CpuRolloutServer per replica (CPU replicas are single-node)."""

    async def launch_servers(self) -> None:
        name = server_actor_name(self.replica_rank) + self.name_suffix
        server = ray.remote(CpuRolloutServer).options(
            name=name, num_cpus=0, max_concurrency=self.max_concurrency,
        ).remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        await server.launch_server.remote()
        self.servers = [server]
        self._server_handle = server
        address, _ = await server.get_server_address.remote()
        self._server_address = address

    def rollout_worker_use_gpu(self) -> bool:
        return False


class CpuServerAdapter(BaseRollout):
    """Lives in the trainer worker; pushes the trained weights to its rollout server."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1, **_: Any) -> None:
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        world = int(self.config.tensor_model_parallel_size) * int(self.config.data_parallel_size)
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.is_leader_rank = rank % world == 0
        self._server = None

    def _server_handle(self):
        if self._server is None:
            self._server = ray.get_actor(server_actor_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    @torch.no_grad()
    async def update_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None],
                             wire_format: str = "named_tensors", global_steps: Optional[int] = None,
                             **kwargs: Any) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"the agentrl CPU rollout takes wire_format='named_tensors', got {wire_format!r}")
        started = time.perf_counter()
        state = {}
        for name, tensor in weights:
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", copy=True)
        if not self.is_leader_rank:
            return None
        await self._server_handle().load_weights.remote(state, global_steps)
        logger.info("weights synced to rollout in %.3fs (%d tensors)", time.perf_counter() - started, len(state))
        return None
