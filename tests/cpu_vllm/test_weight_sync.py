"""The weight sync to verl's vLLM rollout fails with its cause, in bounded time, instead of hanging.

verl's own receiver (``BucketedWeightReceiver``, what vLLM's worker runs) talks to the guarded sender over a real
ZMQ socket and shared memory, as in a CPU run. The receiving Ray call is stood in for by a concurrent Future,
which is what the guard reads from the real ``ObjectRef`` (``ref.future()``). The run-level check (a vLLM whose
weights cannot load stops `agentrl train` with the cause) is in tests/cpu_vllm.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from concurrent.futures import Future

import pytest
import torch

from agentrl.verl.weight_sync import GuardedSender, WeightSyncError, receiver_check


def handle() -> str:
    return f"ipc:///tmp/agentrl-test-weights-{uuid.uuid4().hex}.sock"


def weights() -> list[tuple[str, torch.Tensor]]:
    return [(f"layer.{i}.weight", torch.randn(64, 64)) for i in range(6)]


def send(zmq_handle: str, future: Future, timeout: float = 60.0, items=None) -> None:
    sender = GuardedSender(zmq_handle=zmq_handle, bucket_size_mb=1, use_shm=True, check=receiver_check(future),
                           timeout=timeout)
    asyncio.run(sender.async_send_weights(iter(items or weights())))


def receive_in_thread(zmq_handle: str, on_bucket) -> Future:
    """verl's receiver in a thread; the Future ends as the receiving Ray call would (result or error)."""
    from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver

    future: Future = Future()

    def run() -> None:
        time.sleep(0.2)  # the sender binds first, as in verl
        try:
            BucketedWeightReceiver(zmq_handle, torch.device("cpu"), use_shm=True).receive_weights(on_bucket)
        except BaseException as exc:  # noqa: BLE001 - handed to the sender, as Ray would
            future.set_exception(exc)
        else:
            future.set_result(None)

    threading.Thread(target=run, daemon=True).start()
    return future


def test_weights_arrive_whole():
    got: dict[str, torch.Tensor] = {}
    zmq_handle = handle()
    sent = weights()  # 6 × 16 KiB in 1 MiB buckets, then one more bucket: two acknowledgements
    future = receive_in_thread(zmq_handle, lambda ws, last: got.update((n, t.clone()) for n, t in ws))
    send(zmq_handle, future, items=sent)
    future.result(timeout=10)
    assert set(got) == {n for n, _ in sent} and all(torch.equal(got[n], t) for n, t in sent)


def test_a_receiver_that_fails_stops_the_sync_with_its_error_at_once():
    def fail(ws, last):  # what vLLM's CPU backend did with verl's weights before agentrl kept them
        raise AttributeError("'Parameter' object has no attribute 'weight_loader'")

    zmq_handle = handle()
    future = receive_in_thread(zmq_handle, fail)
    started = time.monotonic()
    with pytest.raises(WeightSyncError, match="failed while receiving weights: AttributeError: 'Parameter' "
                                              "object has no attribute 'weight_loader'"):
        send(zmq_handle, future, timeout=600)
    assert time.monotonic() - started < 30  # the cause arrives within a poll or two, not at the 600 s timeout


def test_a_receiver_that_never_answers_runs_out_of_time():
    never: Future = Future()  # nothing connects and the receiving call never returns
    started = time.monotonic()
    with pytest.raises(WeightSyncError, match="did not connect to take the weights within 2 s"):
        send(handle(), never, timeout=2)
    assert time.monotonic() - started < 30


def test_the_receivers_own_error_is_not_replaced_by_its_cleanup():
    from agentrl.verl.vllm_compat import receiver_keeps_the_cause

    receiver_keeps_the_cause()  # what agentrl's vLLM plugin does in every vLLM process

    def fail(ws, last):
        raise AttributeError("'Parameter' object has no attribute 'weight_loader'")

    zmq_handle = handle()
    future = receive_in_thread(zmq_handle, fail)
    with pytest.raises(WeightSyncError):
        send(zmq_handle, future, timeout=60)
    assert isinstance(future.exception(timeout=10), AttributeError)  # not "cannot close exported pointers exist"


def test_a_receiver_that_takes_a_bucket_and_never_acknowledges_runs_out_of_time():
    import zmq

    zmq_handle = handle()
    stuck: Future = Future()  # its receiving call never returns

    def connect_and_stall() -> None:
        time.sleep(0.2)
        socket = zmq.Context.instance().socket(zmq.REP)
        socket.connect(zmq_handle)
        socket.recv_pyobj()  # the shared-memory bucket's name; no reply ever
        time.sleep(10)
        socket.close(linger=0)

    threading.Thread(target=connect_and_stall, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(WeightSyncError, match="did not acknowledge a weight bucket within 2 s"):
        send(zmq_handle, stuck, timeout=2)
    assert time.monotonic() - started < 30
