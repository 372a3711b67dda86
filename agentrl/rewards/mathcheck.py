"""Is a math answer equal to the expected one?

``score_answer(pred, gold)`` tries, in order: a numeric comparison of both sides read by ``mathnorm``
(exact fractions, relative tolerance, percents, currency, magnitude words, tuples/sets/intervals), then a
symbolic comparison by math_verify + sympy in a child process with a hard deadline. A comparison that
runs out of time raises ``Unscorable`` ("could not score"), never returns 0. Safe off the main thread
and inside Ray workers: no signal.alarm anywhere in this process.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from collections import OrderedDict
from fractions import Fraction

from agentrl.deadline import DeadlineExceeded, call_with_deadline
from agentrl.rewards.errors import Unscorable
from agentrl.rewards.mathextract import extract_final_answer, last_boxed
from agentrl.rewards.mathnorm import Num, Seq, parse_value

__all__ = ["extract_final_answer", "score_answer", "numbers_match", "SymbolicPool", "symbolic_equal"]

DEFAULT_TOLERANCE = 1e-6


def _close(a, b, tol: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):  # infinities
        return a == b
    if a == b:
        return True
    return abs(a - b) <= Fraction(tol) * max(abs(b), abs(a)) if tol else False


def _rounds_to(exact, shown: Num) -> bool:
    """``shown`` is a decimal with >= 2 places and ``exact`` rounds to it."""
    d = shown.decimals
    if d is None or d < 2 or isinstance(exact, float) or isinstance(shown.value, float):
        return False
    gap, half = abs(exact - shown.value), Fraction(1, 2 * 10**d)
    return gap < half or gap == half and abs(shown.value) > abs(exact)  # a tie rounds half away from zero


def numbers_match(pred: Num, gold: Num, tol: float) -> bool:
    preds = [pred.value] + ([pred.alt] if pred.alt is not None else [])
    golds = [gold.value] + ([gold.alt] if gold.alt is not None else [])
    if any(_close(p, g, tol) for p in preds for g in golds):
        return True
    # the less precise side (a decimal with >= 2 places) is the other side rounded
    if pred.decimals is not None and (gold.decimals is None or gold.decimals > pred.decimals):
        if _rounds_to(gold.value, pred):
            return True
    if gold.decimals is not None and (pred.decimals is None or pred.decimals > gold.decimals):
        return _rounds_to(pred.value, gold)
    return False


def values_match(pred, gold, tol: float) -> bool:
    if isinstance(pred, Num) and isinstance(gold, Num):
        return numbers_match(pred, gold, tol)
    if not (isinstance(pred, Seq) and isinstance(gold, Seq)) or len(pred.items) != len(gold.items):
        return False
    unordered = {pred.kind, gold.kind} <= {"set", "list"}
    if not unordered:
        if pred.kind != gold.kind:
            return False
        return all(values_match(p, g, tol) for p, g in zip(pred.items, gold.items))
    left = list(pred.items)
    for g in gold.items:
        hit = next((i for i, p in enumerate(left) if values_match(p, g, tol)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


def near_miss(pred, gold, window: float) -> float:
    """Credit in [0, 0.5] for a scalar within ``window`` relative error of the gold value."""
    if not (isinstance(pred, Num) and isinstance(gold, Num)) or isinstance(gold.value, float) or gold.value == 0:
        return 0.0
    if isinstance(pred.value, float):
        return 0.0
    rel = abs(pred.value - gold.value) / abs(gold.value)
    return float(max(Fraction(0), 1 - rel / Fraction(window))) * 0.5


class SymbolicPool:
    """Child processes running ``_mathworker``; a request past its deadline kills its child."""

    def __init__(self, size: int = 2) -> None:
        self.size = max(1, size)
        self._free: list[subprocess.Popen] = []
        self._count = 0
        self._cond = threading.Condition()
        self._cache: OrderedDict = OrderedDict()

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
                self._cache.move_to_end(key)
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
            if len(self._cache) > 4096:
                self._cache.popitem(last=False)
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


def score_answer(pred: str, gold: str, tolerance: float | None = None, partial_credit=None, timeout: float = 5.0) -> float:
    """1.0 if ``pred`` equals ``gold``; a near-miss credit when asked; else 0.0. Raises Unscorable on timeout."""
    gold = str(gold).strip()
    boxed = last_boxed(gold)
    gold = boxed if boxed is not None else gold
    tol = DEFAULT_TOLERANCE if tolerance is None else float(tolerance)
    pv, gv = parse_value(pred), parse_value(gold)
    if pv is not None and gv is not None:
        if values_match(pv, gv, tol):
            return 1.0
        if partial_credit:
            window = 0.1 if partial_credit is True else float(partial_credit)
            return near_miss(pv, gv, window)
        return 0.0
    if gv is not None and isinstance(gv, Num) and pv is None and not any(c.isdigit() for c in pred):
        return 0.0  # a numeric gold and an answer without a single digit ("correct")
    if symbolic_equal(gold, pred, timeout):
        return 1.0
    # "1.732" for \sqrt{3}: a decimal with >= 2 places that is the symbolic gold rounded
    if isinstance(pv, Num) and (pv.decimals or 0) >= 2 and gv is None:
        value = symbolic_equal(gold, "", timeout, numeric=True)
        if value is not None and _rounds_to(Fraction(value), pv):
            return 1.0
    return 0.0
