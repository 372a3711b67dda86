"""agentrl.deadline: a blocking call with a deadline, on reused threads."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentrl.deadline import DeadlineExceeded, acall_with_deadline, call_with_deadline


def _runners() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "agentrl-deadline")


def test_calls_return_values_and_raise_what_the_call_raised():
    assert call_with_deadline(lambda: 6 * 7, 5.0) == 42
    with pytest.raises(ZeroDivisionError):
        call_with_deadline(lambda: 1 / 0, 5.0)
    assert asyncio.run(acall_with_deadline(lambda: "ok", 5.0)) == "ok"
    with pytest.raises(KeyError):
        asyncio.run(acall_with_deadline(lambda: {}["missing"], 5.0))


def test_threads_are_reused_not_started_per_call():
    call_with_deadline(lambda: None, 5.0)
    before = _runners()
    threads = [call_with_deadline(threading.current_thread, 5.0) for _ in range(200)]
    assert len({id(t) for t in threads}) <= 2  # not a new thread for each call

    async def many() -> list:
        return await asyncio.gather(*(acall_with_deadline(lambda i=i: i, 5.0) for i in range(50)))

    assert asyncio.run(many()) == list(range(50))
    assert _runners() <= max(before, 50) + 1


def test_a_stuck_call_is_abandoned_and_the_next_call_still_runs():
    release = threading.Event()  # never set: only the deadline can end the wait before its own 60 s
    with pytest.raises(DeadlineExceeded, match="stuck: timeout after 0.2s"):  # a return (False, at 60 s) fails
        call_with_deadline(lambda: release.wait(60), 0.2, "stuck")
    with pytest.raises(DeadlineExceeded):
        asyncio.run(acall_with_deadline(lambda: release.wait(30), 0.2, "stuck"))
    assert call_with_deadline(lambda: "after", 5.0) == "after"  # the stuck threads are not handed this call
    release.set()
