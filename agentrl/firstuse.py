"""One process at a time builds what is made on first use (the demo build, a packaged model's import).

    with one_at_a_time(cache / ".demo.lock", "building the demo", log):
        if not done():   # look again: the process that held the lock may have made it meanwhile
            make()

Two commands started together on a fresh machine (`agentrl train` beside `agentrl eval`, or two test processes)
would otherwise write the same folder at once. The lock is a file lock (``filelock``): the kernel releases it if
its holder dies, so an interrupted build never blocks the next one.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable, Iterator


@contextlib.contextmanager
def one_at_a_time(lock_path: str | os.PathLike, what: str, log: Callable[[str], None]) -> Iterator[None]:
    """Hold ``lock_path``; says once that it waits when another process holds it (``what`` names the work)."""
    from filelock import FileLock, Timeout

    os.makedirs(os.path.dirname(os.fspath(lock_path)) or ".", exist_ok=True)
    lock = FileLock(os.fspath(lock_path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log(f"another process is {what}: waiting for it to finish")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
