"""math_verify + sympy in killable child processes: the symbolic side of the math preset's comparison.

    symbolic_equal(r"\\frac{1}{2}", "0.5")              # True, asked of a pooled ``_mathworker`` child
    symbolic_equal(r"\\pi", "", numeric=True)            # "3.14159...": the gold's decimal value (or None)
    symbolic_equal(gold, pred, timeout=5.0)              # Unscorable past the deadline; the child is killed

A process-wide :class:`SymbolicPool` (``AGENTRL_MATH_WORKERS`` children, 2 by default) answers each request
with a hard deadline and remembers answers (least recently used first out); inside the sandbox, which
spawns nothing, a thread bounded by the same deadline does it. :mod:`agentrl.rewards.mathcheck` asks here only
what its own readings cannot settle.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading

import cachetools

from agentrl.deadline import DeadlineExceeded, call_with_deadline
from agentrl.rewards.errors import Unscorable

__all__ = ["SymbolicPool", "clear_pool_caches", "symbolic_equal"]

CACHE_SIZE = 4096  # symbolic comparisons a pool remembers, least recently used first out


class SymbolicPool:
    """Child processes running ``_mathworker``; a request past its deadline kills its child."""

    def __init__(self, size: int = 2) -> None:
        self.size = max(1, size)
        self._free: list[subprocess.Popen] = []
        self._count = 0
        self._cond = threading.Condition()
        self._cache: cachetools.LRUCache = cachetools.LRUCache(maxsize=CACHE_SIZE)  # (gold, pred, numeric) -> equal

    STARTUP_TIMEOUT = 120.0  # importing sympy + math_verify on a loaded machine can take a while

    def _spawn(self) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "HOME", "LANG", "VIRTUAL_ENV")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentrl.rewards._mathworker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        try:
            self._read_line(proc, self.STARTUP_TIMEOUT, f"symbolic checker did not start within {self.STARTUP_TIMEOUT:g}s")
        except Unscorable:
            proc.kill()
            proc.wait()
            raise
        return proc

    def _acquire(self) -> subprocess.Popen:
        with self._cond:
            while True:
                if self._free:
                    return self._free.pop()
                if self._count < self.size:
                    self._count += 1
                    break
                self._cond.wait()
        try:
            return self._spawn()
        except Exception:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, proc: subprocess.Popen | None) -> None:
        with self._cond:
            if proc is None:
                self._count -= 1
            else:
                self._free.append(proc)
            self._cond.notify()

    def equal(self, gold: str, pred: str, timeout: float, numeric: bool = False):
        key = (gold, pred, numeric)
        with self._cond:
            if key in self._cache:
                return self._cache[key]
        proc = self._acquire()
        try:
            reply = self._ask(proc, {"gold": gold, "pred": pred, "numeric": numeric}, timeout)
        except BaseException:
            proc.kill()
            proc.wait()
            self._release(None)
            raise
        self._release(proc)
        if "error" in reply:
            raise Unscorable(f"symbolic comparison failed: {reply['error']}")
        with self._cond:
            self._cache[key] = reply["value"]
        return reply["value"]

    @staticmethod
    def _read_line(proc: subprocess.Popen, timeout: float, on_timeout: str) -> dict:
        import time

        fd, buf = proc.stdout.fileno(), b""
        deadline = time.monotonic() + timeout
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Unscorable(on_timeout)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise Unscorable("symbolic checker process exited unexpectedly")
            buf += chunk
        return json.loads(buf)

    def _ask(self, proc: subprocess.Popen, request: dict, timeout: float) -> dict:
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        return self._read_line(proc, timeout, f"timeout after {timeout:g}s comparing {request['pred'][:60]!r} "
                                              f"with {request['gold'][:60]!r}")

    def clear_caches(self) -> None:
        """Forget every answer compared so far, here and in the idle workers (benchmarks time cold passes)."""
        with self._cond:
            self._cache.clear()
            for proc in self._free:
                self._ask(proc, {"clear": True, "pred": "", "gold": ""}, 30.0)

    def close(self) -> None:
        with self._cond:
            for proc in self._free:
                proc.kill()
                proc.wait()
            self._count -= len(self._free)
            self._free.clear()


_POOL: SymbolicPool | None = None
_POOL_LOCK = threading.Lock()


def _compare_in_thread(gold: str, pred: str, timeout: float, numeric: bool = False):
    from agentrl.rewards._mathworker import compare, numeric_value

    work = (lambda: numeric_value(gold)) if numeric else (lambda: compare(gold, pred))
    try:
        return call_with_deadline(work, timeout, "math compare")
    except DeadlineExceeded:
        raise Unscorable(f"timeout after {timeout:g}s comparing {pred[:60]!r} with {gold[:60]!r}") from None


def symbolic_equal(gold: str, pred: str, timeout: float = 5.0, numeric: bool = False):
    """math_verify + sympy equality in a killable child process; Unscorable past ``timeout`` seconds.

    With ``numeric=True``: the numeric value of ``gold`` as a string of digits (or None if not a real constant).
    """
    global _POOL
    if "agentrl.sandbox.child" in sys.modules:
        # Inside the sandbox there are no child processes to spawn, and the sandbox's own deadline kills us.
        return _compare_in_thread(gold, pred, timeout, numeric)
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = SymbolicPool(int(os.environ.get("AGENTRL_MATH_WORKERS", "2")))
    try:
        return _POOL.equal(gold, pred, timeout, numeric)
    except OSError:  # cannot start a child here; a thread still bounds the wait (but cannot be killed)
        return _compare_in_thread(gold, pred, timeout, numeric)


def clear_pool_caches() -> None:
    """Forget the comparisons the pool has answered (here and in its idle workers)."""
    if _POOL is not None:
        _POOL.clear_caches()
