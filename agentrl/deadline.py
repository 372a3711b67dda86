"""Run a blocking call with a deadline, from sync or async code, on or off the main thread.

    >>> call_with_deadline(lambda: 6 * 7, 1.0)
    42
    >>> import time
    >>> call_with_deadline(lambda: time.sleep(5), 0.1, "slow")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    agentrl.deadline.DeadlineExceeded: slow: timeout after 0.1s

The call runs in a daemon thread; past the deadline the caller gets ``DeadlineExceeded`` and the thread is
abandoned (Python cannot stop a thread: code that must really be stopped runs in a process that can be
killed, as the sandbox and the math checker do). Signals are not used, so it works in any thread.
Threads are reused: one that finishes its call waits for the next (up to ``MAX_IDLE`` wait), so a reward
called for every rollout does not start a thread each time; an abandoned one never comes back.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Callable

MAX_IDLE = 64  # finished threads kept waiting for the next call; more than this end


class DeadlineExceeded(TimeoutError):
    """The call did not finish in time; the message names it and the deadline."""


class _Runner:
    """A daemon thread running one call at a time; idle between calls, gone when the pool is full."""

    _idle: list["_Runner"] = []
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="agentrl-deadline", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            fn, done = self.jobs.get()
            try:
                value, ok = fn(), True
            except BaseException as exc:  # carried to the caller
                value, ok = exc, False
            fn = None  # nothing of the call is kept while idle
            done(ok, value)
            value = done = None
            with _Runner._lock:
                if len(_Runner._idle) >= MAX_IDLE:
                    return
                _Runner._idle.append(self)


def _start(fn: Callable[[], Any], done: Callable[[bool, Any], None]) -> None:
    with _Runner._lock:
        runner = _Runner._idle.pop() if _Runner._idle else None
    (runner or _Runner()).jobs.put((fn, done))


def call_with_deadline(fn: Callable[[], Any], timeout: float, name: str = "call") -> Any:
    """``fn()``, or ``DeadlineExceeded`` after ``timeout`` seconds; an exception ``fn`` raises is re-raised."""
    box: dict = {}
    finished = threading.Event()

    def done(ok: bool, value: Any) -> None:
        box["ok"], box["value"] = ok, value
        finished.set()

    _start(fn, done)
    if not finished.wait(timeout):
        raise DeadlineExceeded(f"{name}: timeout after {timeout:g}s")
    if not box["ok"]:
        raise box["value"]
    return box["value"]


async def acall_with_deadline(fn: Callable[[], Any], timeout: float, name: str = "call") -> Any:
    """Like ``call_with_deadline`` without blocking the event loop."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not fut.done():
            fut.set_result(value) if ok else fut.set_exception(value)

    def done(ok: bool, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:  # the loop closed after the deadline passed
            pass

    _start(fn, done)
    try:
        return await asyncio.wait_for(fut, timeout)
    except asyncio.TimeoutError:
        raise DeadlineExceeded(f"{name}: timeout after {timeout:g}s") from None
