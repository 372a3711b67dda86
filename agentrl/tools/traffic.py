"""Traffic control for one tool server: circuit breaker and metrics (the backoff schedule: :mod:`agentrl.backoff`). No I/O here."""

from __future__ import annotations

import time
from collections import Counter, deque


class CircuitBreaker:
    """Opens after ``failures`` consecutive infrastructure failures, for a while that starts short and doubles.

    The first opening lasts ``first_reset`` seconds (1 s, or ``reset`` if smaller); when the time is up one
    trial call is let through (half-open): success closes the circuit, failure opens it again for twice as
    long, up to ``reset``. So a server that comes back is used again within about a second, and one that
    stays down is probed at most every ``reset`` seconds.
    """

    def __init__(self, failures: int, reset: float, clock=time.monotonic, first_reset: float = 1.0) -> None:
        self.threshold = failures
        self.max_reset = reset
        self.first_reset = min(first_reset, reset)
        self.reset = self.first_reset
        self._clock = clock
        self.consecutive = 0
        self.opened_at: float | None = None
        self._trial = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if self._clock() - self.opened_at >= self.reset else "open"

    def allow(self) -> bool:
        """May a call go out now? (Claims the single half-open trial.)"""
        state = self.state
        if state == "closed":
            return True
        if state == "half-open" and not self._trial:
            self._trial = True
            return True
        return False

    def retry_after(self) -> float:
        return 0.0 if self.opened_at is None else max(0.0, self.reset - (self._clock() - self.opened_at))

    def success(self) -> None:
        self.consecutive = 0
        self.opened_at = None
        self._trial = False
        self.reset = self.first_reset

    def abandon(self) -> None:
        """A call ended without a verdict (cancelled): give the half-open trial back."""
        self._trial = False

    def failure(self) -> None:
        self.consecutive += 1
        if self._trial:  # the server is still down: wait longer before the next trial
            self.reset = min(self.max_reset, self.reset * 2)
        if self._trial or self.consecutive >= self.threshold:
            self.opened_at = self._clock()
        self._trial = False


def percentile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


class ServerStats:
    """Per-server counters: calls, errors by kind, retries, restarts, latency (last 10,000 calls)."""

    def __init__(self, window: int = 10_000) -> None:
        self.calls = 0
        self.ok = 0
        self.tool_errors = 0
        self.errors: Counter[str] = Counter()
        self.retries = 0
        self.restarts = 0
        self.latencies: deque[float] = deque(maxlen=window)

    def record(self, seconds: float, outcome: str) -> None:
        """``outcome`` is "ok", "tool_error", or an infrastructure failure kind."""
        self.calls += 1
        self.latencies.append(seconds)
        if outcome == "ok":
            self.ok += 1
        elif outcome == "tool_error":
            self.tool_errors += 1
            self.errors["tool_error"] += 1
        else:
            self.errors[outcome] += 1

    def snapshot(self, breaker: CircuitBreaker | None = None) -> dict:
        lat = sorted(self.latencies)
        p50, p99 = percentile(lat, 50), percentile(lat, 99)
        out = {
            "calls": self.calls,
            "ok": self.ok,
            "errors": dict(self.errors),
            "retries": self.retries,
            "restarts": self.restarts,
            "latency_p50_ms": None if p50 is None else round(p50 * 1000, 2),
            "latency_p99_ms": None if p99 is None else round(p99 * 1000, 2),
        }
        if breaker is not None:
            out["circuit"] = breaker.state
        return out
