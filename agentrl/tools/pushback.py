"""Server push-back: a 429 or 503 answer, and how long its ``Retry-After`` asks the caller to wait.

    retry_after_seconds("7")                                  # 7.0
    retry_after_seconds("Fri, 27 Nov 2026 16:00:05 GMT", now)  # seconds from ``now`` until then (0 if past)
    retry_after_seconds("soon")                               # None: not a delay, backoff decides alone
    pushback_wait(7.0, attempt=1)                             # 7 s plus up to 10% (or 0.1 s) of jitter

A call pushed back with ``Retry-After`` is retried, however many ``retries`` the server allows, for as long as
the call's ``deadline`` leaves room; a wait that would end past the deadline ends the call at once, as an
infrastructure failure (the rollout is unscorable, never scored 0). A 429 or 503 without ``Retry-After`` is an
ordinary failure: it spends one of the ``retries``, after the hub's exponential backoff with full jitter (a
server that answers 503 to everything is down, not busy). No I/O here.
"""

from __future__ import annotations

import random
import time
from email.utils import parsedate_to_datetime

from agentrl.backoff import backoff

PUSHBACK_STATUSES = (429, 503)
MAX_RETRY_AFTER = 3600.0  # a longer ask is taken as an hour (the deadline ends the call long before)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds to wait: delay-seconds or an HTTP date (RFC 9110 10.2.3); None if absent
    or unreadable (the backoff schedule then decides)."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(MAX_RETRY_AFTER, max(0.0, seconds))


def pushback_wait(retry_after: float | None, attempt: int) -> float:
    """How long to wait before retry ``attempt`` (1-based) of a pushed-back call: what ``Retry-After`` asks
    plus jitter (up to 10% of it, at least 0.1 s), so that the callers it turned away do not come back
    together; without ``Retry-After``, the exponential backoff with full jitter."""
    if retry_after is None:
        return backoff(attempt)
    return retry_after + random.uniform(0, max(0.1, 0.1 * retry_after))
