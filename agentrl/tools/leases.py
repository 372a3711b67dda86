"""The run-wide tool limiter's state: per server, slots (``max_concurrency``) and a token bucket
(``rate_limit``), lent out as leases that expire with the process that holds them.

    table = LeaseTable(lease_s=15.0)
    wait = await table.acquire("search", 4, 10.0, holder="node1:1234:ab12", lease_id="l-1")  # slot held
    await asyncio.sleep(wait)       # the token bucket's wait, taken by the caller, slot in hand
    ...                             # the call
    table.release("l-1")

A holder (one agent-loop process's hub) sends ``heartbeat(holder)`` every ``lease_s / 5`` seconds; a holder not
heard from for ``lease_s`` is taken for dead: its leases return to the pool and its waiting requests are
dropped (``expire``, run every ``lease_s / 5`` seconds by the actor). So a process killed with ``kill -9``
holds its slots for at most ``lease_s`` (plus one reaper period) after its last heartbeat. Waiting requests
are served first come, first served. The rate is a GCRA token bucket with one second of burst, as
aiolimiter's ``AsyncLimiter(rate, 1.0)`` that limits each process on its own.

:class:`LeaseTable` is plain asyncio (tested without Ray); :func:`actor_class` wraps it in the Ray actor every
process of a run shares (:mod:`agentrl.tools.limits`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

DEFAULT_LEASE_S = 15.0
IDLE_EXIT_S = 30.0  # the actor ends itself after this long with no holder and no lease (every process gone)


class LimitMismatch(ValueError):
    """Two processes of one run declare different limits for one server."""


@dataclass
class _Pool:
    cap: int
    rate: float | None
    in_use: int = 0
    peak: int = 0
    granted: int = 0
    expired: int = 0
    tat: float = 0.0  # the GCRA's theoretical arrival time
    waiters: deque = field(default_factory=deque)  # (lease_id, holder, future)


class LeaseTable:
    def __init__(self, lease_s: float = DEFAULT_LEASE_S, clock=time.monotonic, idle_exit_s: float = IDLE_EXIT_S) -> None:
        self.lease_s = lease_s
        self.idle_exit_s = idle_exit_s
        self._clock = clock
        self.pools: dict[str, _Pool] = {}
        self.leases: dict[str, tuple[str, str]] = {}  # lease id -> (server, holder)
        self.holders: dict[str, float] = {}  # holder -> when last heard from
        self.evicted: dict[str, int] = {}  # holder -> leases taken back from it while it was silent
        self.last_activity = clock()

    def _pool(self, server: str, cap: int, rate: float | None) -> _Pool:
        pool = self.pools.get(server)
        if pool is None:
            pool = self.pools[server] = _Pool(cap, rate)
        elif (pool.cap, pool.rate) != (cap, rate):
            raise LimitMismatch(f"tool server {server!r}: this process asks for max_concurrency={cap}, "
                                f"rate_limit={rate}, but the run's limiter holds max_concurrency={pool.cap}, "
                                f"rate_limit={pool.rate} from the process that came first; every process of a "
                                f"run must read the same tools config")
        return pool

    def heartbeat(self, holder: str) -> int:
        """The holder is alive. Returns how many of its leases were taken back while it was silent (0 normally)."""
        self.holders[holder] = self._clock()
        self.last_activity = self._clock()
        return self.evicted.pop(holder, 0)

    async def acquire(self, server: str, cap: int, rate: float | None, holder: str, lease_id: str) -> float:
        """Wait for a slot of ``server``; returns the seconds the caller must still wait for a token (slot held)."""
        pool = self._pool(server, cap, rate)
        self.heartbeat(holder)
        if lease_id in self.leases:
            return 0.0
        if pool.in_use < pool.cap and not pool.waiters:
            self._grant(pool, server, lease_id, holder)
        else:
            future = asyncio.get_running_loop().create_future()
            pool.waiters.append((lease_id, holder, future))
            try:
                await future
            except asyncio.CancelledError:
                self.cancel(lease_id)
                raise
        return self._token_wait(pool)

    def _grant(self, pool: _Pool, server: str, lease_id: str, holder: str) -> None:
        pool.in_use += 1
        pool.granted += 1
        pool.peak = max(pool.peak, pool.in_use)
        self.leases[lease_id] = (server, holder)

    def _token_wait(self, pool: _Pool) -> float:
        if not pool.rate:
            return 0.0
        now = self._clock()
        interval = 1.0 / pool.rate
        burst = max(1.0, pool.rate)  # one second's worth of calls may go at once
        tat = max(pool.tat, now)
        wait = max(0.0, tat - (burst - 1) * interval - now)
        pool.tat = tat + interval
        return wait

    def _dispatch(self, server: str, pool: _Pool) -> None:
        while pool.in_use < pool.cap and pool.waiters:
            lease_id, holder, future = pool.waiters.popleft()
            if future.done():  # cancelled meanwhile
                continue
            self._grant(pool, server, lease_id, holder)
            future.set_result(None)

    def release(self, lease_id: str) -> bool:
        """Give a slot back (False if the lease is unknown: released already, or expired)."""
        held = self.leases.pop(lease_id, None)
        self.last_activity = self._clock()
        if held is None:
            return False
        server, _ = held
        pool = self.pools[server]
        pool.in_use -= 1
        self._dispatch(server, pool)
        return True

    def cancel(self, lease_id: str) -> None:
        """The caller gave up: release the lease if it was granted, or leave the queue."""
        if self.release(lease_id):
            return
        for pool in self.pools.values():
            for entry in list(pool.waiters):
                if entry[0] == lease_id:
                    pool.waiters.remove(entry)
                    if not entry[2].done():
                        entry[2].cancel()

    def expire(self) -> int:
        """Take back the leases (and drop the waiting requests) of holders silent for ``lease_s``."""
        cutoff = self._clock() - self.lease_s
        for holder in [h for h, seen in self.holders.items() if seen < cutoff]:
            del self.holders[holder]
        for pool in self.pools.values():  # first the queue, so that no slot freed below goes to the dead
            for entry in [e for e in pool.waiters if e[1] not in self.holders]:
                pool.waiters.remove(entry)
                entry[2].cancel()
        taken = 0
        for lease_id, (server, holder) in list(self.leases.items()):
            if holder not in self.holders:
                self.release(lease_id)
                self.pools[server].expired += 1
                self.evicted[holder] = self.evicted.get(holder, 0) + 1
                taken += 1
        return taken

    def idle(self) -> bool:
        return not self.leases and not self.holders and self._clock() - self.last_activity > self.idle_exit_s

    def stats(self) -> dict:
        return {"lease_s": self.lease_s, "holders": len(self.holders), "servers": {
            name: {"max_concurrency": p.cap, "rate_limit": p.rate, "in_use": p.in_use, "peak": p.peak,
                   "granted": p.granted, "expired": p.expired, "waiting": len(p.waiters)}
            for name, p in self.pools.items()}}


class RunLimiter:
    """The Ray actor around a :class:`LeaseTable` (async: one event loop serves every process's requests)."""

    def __init__(self, lease_s: float = DEFAULT_LEASE_S, idle_exit_s: float = IDLE_EXIT_S) -> None:
        self.table = LeaseTable(lease_s, idle_exit_s=idle_exit_s)
        self._reaper: asyncio.Task | None = None

    def _watch(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(self.table.lease_s / 5)
            self.table.expire()
            if self.table.idle():  # no process of the run is left: a detached actor must end itself
                import ray

                ray.kill(ray.get_runtime_context().current_actor)
                return

    async def ping(self, holder: str | None = None) -> float:
        """The lease time; with ``holder``, its first heartbeat (so that the actor is not idle from then on)."""
        self._watch()
        if holder is not None:
            self.table.heartbeat(holder)
        return self.table.lease_s

    async def acquire(self, server: str, cap: int, rate: float | None, holder: str, lease_id: str) -> float:
        self._watch()
        return await self.table.acquire(server, cap, rate, holder, lease_id)

    async def release(self, lease_id: str) -> None:
        self.table.cancel(lease_id)

    async def heartbeat(self, holder: str) -> int:
        self._watch()
        return self.table.heartbeat(holder)

    async def stats(self) -> dict:
        return self.table.stats()


def actor_class():
    """:class:`RunLimiter` as a Ray actor class: no CPU of its own, many requests waiting at once."""
    import ray

    return ray.remote(num_cpus=0, max_concurrency=100_000)(RunLimiter)
