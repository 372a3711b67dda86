"""Weight sync to verl's vLLM rollout that fails with its cause instead of hanging.

verl's ``ServerAdapter.update_weights`` asks the vLLM server to receive (``update_weights_from_ipc``, a Ray call
it awaits only at the end) and meanwhile sends the weights bucket by bucket over a ZMQ REQ socket, waiting after
each bucket for the receiver's acknowledgement with a blocking ``recv()``. When the receiver fails (a weight that
does not load, a vLLM worker that died), no acknowledgement ever comes: the trainer waits forever, its event loop
blocked, and the run hangs with the cause sitting unread in the Ray call.

:class:`GuardedServerAdapter` is verl's adapter with that wait bounded: every acknowledgement is awaited in short
polls, and between polls the receiving call is checked. A failed receiver stops the sync at once with its error;
an acknowledgement that takes longer than ``AGENTRL_WEIGHT_SYNC_TIMEOUT`` seconds (default 600) stops it too.
The plugin registers it as verl's ``vllm`` rollout class, so every vLLM run (GPU or CPU) uses it.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Optional

import torch
import zmq

from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightSender
from verl.workers.rollout.vllm_rollout.vllm_rollout import ServerAdapter

from agentrl.errors import AgentrlError

logger = logging.getLogger(__name__)
POLL_MS = 500


class WeightSyncError(AgentrlError):
    """Weights could not reach the rollout server; the message has the server's error or the wait that ran out."""


def sync_timeout() -> float:
    return float(os.environ.get("AGENTRL_WEIGHT_SYNC_TIMEOUT", "600"))


class _GuardedSocket:
    """A ZMQ socket whose ``recv`` gives up when ``check`` raises or ``timeout`` seconds pass."""

    def __init__(self, socket: zmq.Socket, check: Callable[[], None], timeout: float) -> None:
        self._socket = socket
        self._check = check
        self._timeout = timeout

    def recv(self, *args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + self._timeout
        while not self._socket.poll(POLL_MS, zmq.POLLIN):
            self._check()
            if time.monotonic() > deadline:
                raise WeightSyncError(
                    f"the rollout server did not acknowledge a weight bucket within {self._timeout:.0f} s "
                    f"(AGENTRL_WEIGHT_SYNC_TIMEOUT); its receiving call has not returned either")
        return self._socket.recv(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._socket, name)


class GuardedSender(BucketedWeightSender):
    """verl's bucketed sender whose every wait for the receiver is bounded by ``check`` and a timeout."""

    def __init__(self, *args: Any, check: Callable[[], None], timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._check = check
        self._timeout = timeout

    def _init_socket(self) -> None:
        super()._init_socket()
        self.socket = _GuardedSocket(self.socket, self._check, self._timeout)

    def _cleanup(self) -> None:
        if isinstance(self.socket, _GuardedSocket):
            self.socket.setsockopt(zmq.LINGER, 0)  # a receiver that is gone never takes the unsent bucket
            self.socket = self.socket._socket
        super()._cleanup()


def receiver_check(future: Any) -> Callable[[], None]:
    """A check that raises :class:`WeightSyncError` with the receiver's error once its Ray call has ended.
    The receiver returns only after the last acknowledgement, so a call that ended while the sender still
    waits has failed, or returned early without taking the weights."""
    done = future.future() if hasattr(future, "future") else future  # a Ray ObjectRef, or a concurrent Future

    def check() -> None:
        if not done.done():
            return
        error = done.exception()
        if error is not None:
            raise WeightSyncError(f"the rollout server failed while receiving weights: {error}") from error
        raise WeightSyncError("the rollout server stopped receiving weights before the trainer sent them all")

    return check


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
