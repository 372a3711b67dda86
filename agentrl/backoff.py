"""One backoff schedule for every retry loop in agentrl: exponential, capped, with full jitter.

    backoff(1)                        # uniform(0, 0.1): before the first retry
    backoff(3, base=1.0, cap=30.0)    # uniform(0, 4.0): before the third
    await asyncio.sleep(backoff(n))   # where the caller is async (the judge, the tool hub)
    time.sleep(backoff(n, base=0.4))  # where it is not (a grader runs in a worker thread)

Full jitter (a uniform wait up to the exponential bound) spreads the callers one failure turned away, so a
recovering server is not met by all of them at once. Used by the tool hub (:mod:`agentrl.tools.hub`, and
:mod:`agentrl.tools.pushback` when a 429/503 names no ``Retry-After``), the LLM judge
(:mod:`agentrl.rewards.judge`) and the endpoint grader (:mod:`agentrl.rewards.modelgraders`). No I/O here.
"""

from __future__ import annotations

import random


def backoff(attempt: int, base: float = 0.1, cap: float = 5.0) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): ``uniform(0, min(cap, base * 2**(attempt-1)))``."""
    if attempt < 1:
        raise ValueError(f"backoff: attempt counts retries from 1, got {attempt}")
    return random.uniform(0, min(cap, base * (2 ** (attempt - 1))))
