"""How many calls a tool server gets at once (``max_concurrency``) and per second (``rate_limit``): across the
whole run, or in each process on its own.

    hub = ToolHub.from_config(servers, run_key="/runs/demo")   # in an agent-loop process of a run on Ray
    # every attempt of every call: async with gate.slot(): ...  (the hub does it)

``"limit_scope": "run"`` (a server's default) holds the limits for every agent-loop process on every node
together, when the process runs on Ray and its hub was given the run's key (verl's agent-loop workers are):
one Ray actor per run (``agentrl-tool-limits-<hash of the run directory>``, namespace ``agentrl``) lends
slots and tokens as leases (:mod:`agentrl.tools.leases`). Each process heartbeats every ``lease_s / 5``; a
process killed with ``kill -9`` gives its slots back ``lease_s`` (``AGENTRL_TOOL_LEASE_S``, default 15 s) after
its last heartbeat. A process that cannot reach the actor does not go on unlimited: the call fails as
infrastructure (``ToolInfraError`` kind ``limiter``, the rollout unscorable) saying why, and the next call
looks the actor up again (making a new one if it is gone). The actor is detached, so that a killed worker does
not take it along, and ends itself 30 s after the last process of the run stopped heartbeating. ``"limit_scope":
"process"``, or a process without Ray (the local engine, a test), limits each process on its own (an
``asyncio.Semaphore`` and aiolimiter's token bucket): N processes then send up to N x ``max_concurrency``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import sys
import uuid
from contextlib import asynccontextmanager
from typing import AsyncIterator

from aiolimiter import AsyncLimiter

from agentrl.tools.config import ServerSpec, ToolConfigError
from agentrl.tools.leases import DEFAULT_LEASE_S
from agentrl.tools.types import ToolInfraError

NAMESPACE = "agentrl"
CONNECT_TIMEOUT_S = 60.0


def lease_seconds() -> float:
    raw = os.environ.get("AGENTRL_TOOL_LEASE_S", "")
    try:
        value = float(raw) if raw else DEFAULT_LEASE_S
    except ValueError:
        raise ToolConfigError(f"AGENTRL_TOOL_LEASE_S={raw!r} is not a number of seconds (default {DEFAULT_LEASE_S:g})") from None
    if not value > 0:
        raise ToolConfigError(f"AGENTRL_TOOL_LEASE_S={raw!r} must be more than 0 seconds")
    return value


def actor_name(run_key: str) -> str:
    return "agentrl-tool-limits-" + hashlib.sha1(run_key.encode()).hexdigest()[:12]


def on_ray() -> bool:
    """Is this process connected to a Ray cluster (a Ray worker, or a driver after ``ray.init``)?"""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


class LocalGate:
    """This process's own limits: a semaphore and a token bucket."""

    scope = "process"

    def __init__(self, spec: ServerSpec) -> None:
        self.sem = asyncio.Semaphore(spec.max_concurrency)
        self.limiter = AsyncLimiter(spec.rate_limit, 1.0) if spec.rate_limit else None

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self.sem:
            if self.limiter is not None:
                await self.limiter.acquire()
            yield


class RunGate:
    """One server's share of the run's limiter."""

    scope = "run"

    def __init__(self, spec: ServerSpec, limits: "RunLimits") -> None:
        self.spec = spec
        self.limits = limits

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        lease = await self.limits.acquire(self.spec)
        try:
            yield
        finally:
            self.limits.release(lease)


class RunLimits:
    """This event loop's client of the run's limiter actor: one holder id and one heartbeat task."""

    def __init__(self, run_key: str, lease_s: float | None = None) -> None:
        self.run_key = run_key
        self.name = actor_name(run_key)
        self.lease_s = lease_s or lease_seconds()
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._actor = None
        self._lock = asyncio.Lock()
        self._beat: asyncio.Task | None = None
        self.taken_back = 0  # leases the actor took back while this process was silent

    def _unreachable(self, server: str, cause: BaseException | str) -> ToolInfraError:
        return ToolInfraError(server, (
            f"cannot reach the run-wide tool limiter (Ray actor {self.name!r} in namespace {NAMESPACE!r}, for run "
            f"{self.run_key!r}): {cause}. It holds max_concurrency and rate_limit for every agent-loop process of "
            f"the run, so no call goes out without it; check the Ray cluster (`ray status`), or give the server "
            f"\"limit_scope\": \"process\" to limit each process on its own"), "limiter")

    async def connect(self, server: str = "(limiter)") -> None:
        async with self._lock:
            if self._actor is not None:
                return
            from agentrl.tools.leases import actor_class

            try:
                actor = actor_class().options(name=self.name, namespace=NAMESPACE, lifetime="detached",
                                              get_if_exists=True).remote(self.lease_s)
                self.lease_s = await asyncio.wait_for(_awaitable(actor.ping.remote(self.holder)), CONNECT_TIMEOUT_S)
            except asyncio.TimeoutError:
                raise self._unreachable(server, f"no answer within {CONNECT_TIMEOUT_S:g}s") from None
            except Exception as exc:
                raise self._unreachable(server, f"{type(exc).__name__}: {exc}") from exc
            self._actor = actor
            self._beat = asyncio.create_task(self._heartbeat(), name="agentrl-tool-limits-heartbeat")
            print(f"agentrl: tool limits for the whole run: process {os.getpid()} on {socket.gethostname()} uses "
                  f"{self.name!r} (lease {self.lease_s:g}s)", file=sys.stderr, flush=True)

    async def acquire(self, spec: ServerSpec) -> str:
        """A lease on one slot of ``spec``'s server (and its token, waited for here)."""
        if self._actor is None:
            await self.connect(spec.name)
        actor, lease = self._actor, uuid.uuid4().hex
        try:
            wait = await _awaitable(actor.acquire.remote(spec.name, spec.max_concurrency, spec.rate_limit,
                                                               self.holder, lease))
            if wait > 0:
                await asyncio.sleep(wait)
        except asyncio.CancelledError:
            self.release(lease)
            raise
        except Exception as exc:
            self.release(lease)
            cause = getattr(exc, "cause", None)
            from agentrl.tools.leases import LimitMismatch

            if isinstance(cause, LimitMismatch):
                raise ToolConfigError(str(cause)) from None
            await self._forget()  # this call fails; the next one looks for the run's limiter again
            raise self._unreachable(spec.name, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}") from exc
        return lease

    def release(self, lease: str) -> None:
        """Fire and forget: the slot goes back as soon as the actor reads it (or with the lease, if it never does)."""
        try:
            self._actor.release.remote(lease)
        except Exception:  # the actor is gone, and the leases with it
            pass

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 5)
            try:
                lost = await asyncio.wait_for(_awaitable(self._actor.heartbeat.remote(self.holder)), self.lease_s)
            except asyncio.TimeoutError:
                continue
            except Exception as exc:  # calls say so, one by one, when they next ask for a slot
                print(f"agentrl: the run-wide tool limiter {self.name!r} did not answer a heartbeat: "
                      f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}", file=sys.stderr, flush=True)
                continue
            if lost:
                self.taken_back += lost
                print(f"agentrl: the run-wide tool limiter took back {lost} slot(s) of this process (pid {os.getpid()}), "
                      f"silent for more than its lease of {self.lease_s:g}s: calls still running in them went over the "
                      f"cap. A process this busy needs a longer lease: AGENTRL_TOOL_LEASE_S", file=sys.stderr, flush=True)

    async def _forget(self) -> None:
        """Drop a limiter that did not answer: the next call looks it up again by name, and makes a new one if it
        is gone (one that ended itself, idle, between two attempts of a run; or one lost with its node, when the
        calls other processes still have in flight are unknown to the new one until they end)."""
        async with self._lock:
            self._actor = None
            beat, self._beat = self._beat, None
        if beat is not None and beat is not asyncio.current_task():
            beat.cancel()

    async def stats(self) -> dict:
        if self._actor is None:
            await self.connect()
        return await _awaitable(self._actor.stats.remote())

    async def aclose(self) -> None:
        beat, self._beat = self._beat, None
        if beat is not None:
            beat.cancel()
            await asyncio.wait({beat})


def _awaitable(ref):
    """A Ray ObjectRef as an asyncio future of the running loop."""
    return asyncio.wrap_future(ref.future())


def gate_for(spec: ServerSpec, run: RunLimits | None):
    return RunGate(spec, run) if run is not None and spec.limit_scope == "run" else LocalGate(spec)
