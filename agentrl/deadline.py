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
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable


class DeadlineExceeded(TimeoutError):
    """The call did not finish in time; the message names it and the deadline."""


def _start(fn: Callable[[], Any], name: str, done: Callable[[bool, Any], None]) -> None:
    def target() -> None:
        try:
            value, ok = fn(), True
        except BaseException as exc:  # carried to the caller
            value, ok = exc, False
        done(ok, value)

    threading.Thread(target=target, name=f"deadline-{name}", daemon=True).start()


def call_with_deadline(fn: Callable[[], Any], timeout: float, name: str = "call") -> Any:
    """``fn()``, or ``DeadlineExceeded`` after ``timeout`` seconds; an exception ``fn`` raises is re-raised."""
    box: dict = {}
    finished = threading.Event()

    def done(ok: bool, value: Any) -> None:
        box["ok"], box["value"] = ok, value
        finished.set()

    _start(fn, name, done)
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

    _start(fn, name, done)
    try:
        return await asyncio.wait_for(fut, timeout)
    except asyncio.TimeoutError:
        raise DeadlineExceeded(f"{name}: timeout after {timeout:g}s") from None
