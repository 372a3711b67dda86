"""Weight sync to verl's vLLM rollout that fails with its cause instead of hanging.

verl's ``ServerAdapter.update_weights`` asks the vLLM server to receive (``update_weights_from_ipc``, a Ray call
it awaits only at the end) and meanwhile sends the weights bucket by bucket over a ZMQ REQ socket, waiting after
each bucket for the receiver's acknowledgement with a blocking ``recv()``. When the receiver fails (a weight that
does not load, a vLLM worker that died), no acknowledgement ever comes: the trainer waits forever, its event loop
blocked, and the run hangs with the cause sitting unread in the Ray call.

:class:`GuardedSender` is verl's sender with that wait bounded: every acknowledgement is awaited in short
polls, and between polls the receiving call is checked. A failed receiver stops the sync at once with its error;
an acknowledgement that takes longer than ``AGENTRL_WEIGHT_SYNC_TIMEOUT`` seconds (default 600) stops it too.
``agentrl.verl.vllm_adapter.GuardedServerAdapter`` sends with it; the plugin registers that adapter as verl's
``vllm`` rollout class, so every vLLM run (GPU or CPU) uses it.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import zmq

from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightSender  # imports no vLLM

from agentrl.errors import AgentrlError

POLL_MS = 500


class WeightSyncError(AgentrlError):
    """Weights could not reach the rollout server; the message has the server's error or the wait that ran out."""


def sync_timeout() -> float:
    return float(os.environ.get("AGENTRL_WEIGHT_SYNC_TIMEOUT", "600"))


class _GuardedSocket:
    """A ZMQ socket whose sends and receives give up when ``check`` raises or ``timeout`` seconds pass. (A REQ
    socket's send blocks too, until a receiver has connected: a vLLM worker that failed first never does.)"""

    def __init__(self, socket: zmq.Socket, check: Callable[[], None], timeout: float) -> None:
        self._socket = socket
        self._check = check
        self._timeout = timeout

    def _wait(self, event: int, what: str) -> None:
        deadline = time.monotonic() + self._timeout
        while not self._socket.poll(POLL_MS, event):
            self._check()
            if time.monotonic() > deadline:
                raise WeightSyncError(
                    f"the rollout server did not {what} within {self._timeout:.0f} s (AGENTRL_WEIGHT_SYNC_TIMEOUT); "
                    f"its receiving call has not returned either")

    def recv(self, *args: Any, **kwargs: Any) -> Any:
        self._wait(zmq.POLLIN, "acknowledge a weight bucket")
        return self._socket.recv(*args, **kwargs)

    def send_pyobj(self, *args: Any, **kwargs: Any) -> Any:
        self._wait(zmq.POLLOUT, "connect to take the weights")
        return self._socket.send_pyobj(*args, **kwargs)

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


def describe(error: BaseException) -> str:
    """The error with the ones it happened while handling, first cause first. verl's receiver cleans up in a
    ``finally`` that can fail on its own (shared memory still viewed by the failed bucket: "cannot close exported
    pointers exist"), which would otherwise hide the error that stopped the sync."""
    chain: list[BaseException] = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    return "; then ".join(f"{type(e).__name__}: {e}" for e in reversed(chain))


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
            raise WeightSyncError(f"the rollout server failed while receiving weights: {describe(error)}") from error
        raise WeightSyncError("the rollout server stopped receiving weights before the trainer sent them all")

    return check
