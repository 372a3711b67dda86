"""The run-wide tool limiter alone: 1,000 episodes at concurrency 256, each making tool calls that take a
simulated service time, through the limiter's Ray actor, and through nothing (the baseline) in the same run.

    .venv/bin/python benchmarks/bench_tool_limits.py [--episodes 1000] [--concurrency 256] [--calls 4]
        [--service 0.02] [--cap 16] [--rate 200]

Starts a local Ray (2 logical CPUs, no dashboard). Three workloads, same episodes:

* ``none``: no limiter, the calls just take their service time (the baseline).
* ``run, unbound``: the run-wide limiter with a cap and rate no episode reaches (10,000 and none): what a
  lease costs a call (acquire, awaited; release, sent without waiting).
* ``run, cap``: ``max_concurrency=--cap``: the in-flight peak against it.
* ``run, rate``: ``rate_limit=--rate``: the achieved call rate against it, after the first one-second burst.

Prints, for each: wall time, calls/s, the in-flight peak, and the time a call spent getting its slot
(p50 / p99 / mean); the overhead per call is the unbound run's wall time over the baseline's, per call.
No tool server, no network beyond Ray's loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time

from agentrl.tools.config import ServerSpec
from agentrl.tools.traffic import percentile


class Load:
    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.waits: list[float] = []
        self.granted: list[float] = []


async def workload(args, gate_factory) -> dict:
    load, episodes = Load(), asyncio.Semaphore(args.concurrency)
    gate = gate_factory()

    async def call() -> None:
        asked = time.perf_counter()
        async with gate() if gate else _nothing():
            load.waits.append(time.perf_counter() - asked)
            load.granted.append(time.perf_counter())
            load.in_flight += 1
            load.peak = max(load.peak, load.in_flight)
            await asyncio.sleep(args.service)
            load.in_flight -= 1

    async def episode() -> None:
        async with episodes:
            for _ in range(args.calls):
                await call()

    started = time.perf_counter()
    await asyncio.gather(*(episode() for _ in range(args.episodes)))
    wall = time.perf_counter() - started
    waits = sorted(load.waits)
    late = [t for t in load.granted if t - started >= 2.0]  # past the bucket's one-second burst
    steady = len(late) / (max(late) - min(late)) if len(late) > 1 else float("nan")
    return {"wall_s": wall, "calls": len(waits), "calls_per_s": len(waits) / wall, "peak": load.peak, "steady": steady,
            "slot_p50_ms": percentile(waits, 50) * 1000, "slot_p99_ms": percentile(waits, 99) * 1000,
            "slot_mean_ms": sum(waits) / len(waits) * 1000}


class _nothing:
    async def __aenter__(self):
        return None

    async def __aexit__(self, *exc):
        return False


async def main(args) -> None:
    from agentrl.tools.limits import RunLimits, RunGate

    results = {}
    results["none"] = await workload(args, lambda: None)
    unbound = RunLimits("bench-unbound", lease_s=15.0)
    spec = ServerSpec(name="bench", url="http://127.0.0.1:9/", max_concurrency=10_000, rate_limit=None)
    results["run, unbound"] = await workload(args, lambda: RunGate(spec, unbound).slot)
    capped = RunLimits("bench-capped", lease_s=15.0)
    spec = ServerSpec(name="bench", url="http://127.0.0.1:9/", max_concurrency=args.cap, rate_limit=None)
    results["run, cap"] = await workload(args, lambda: RunGate(spec, capped).slot)
    rated = RunLimits("bench-rated", lease_s=15.0)
    spec = ServerSpec(name="bench", url="http://127.0.0.1:9/", max_concurrency=10_000, rate_limit=args.rate)
    results["run, rate"] = await workload(args, lambda: RunGate(spec, rated).slot)
    for limits in (unbound, capped, rated):
        await limits.aclose()

    print(f"{args.episodes} episodes x {args.calls} calls, {args.concurrency} episodes at once, service time "
          f"{args.service * 1000:g} ms a call; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'workload':<14} {'wall s':>7} {'calls/s':>8} {'peak':>5} {'slot p50 ms':>11} {'p99 ms':>8} {'mean ms':>8}")
    for name, r in results.items():
        print(f"{name:<14} {r['wall_s']:7.2f} {r['calls_per_s']:8.1f} {r['peak']:5d} {r['slot_p50_ms']:11.2f} "
              f"{r['slot_p99_ms']:8.2f} {r['slot_mean_ms']:8.2f}")
    base, unb, cap, rate = results["none"], results["run, unbound"], results["run, cap"], results["run, rate"]
    calls = base["calls"]
    print(f"overhead per call (unbound limiter vs none, wall time): "
          f"{(unb['wall_s'] - base['wall_s']) / calls * 1000:.3f} ms of wall time over {calls} calls "
          f"({args.concurrency} at once); a call's own wait for its slot: mean {unb['slot_mean_ms']:.2f} ms")
    print(f"max_concurrency {args.cap}: peak {cap['peak']} in flight")
    print(f"rate_limit {args.rate:g}/s (one second of burst): {rate['calls']} calls in {rate['wall_s']:.2f} s "
          f"({rate['calls_per_s']:.1f}/s; at most {args.rate * rate['wall_s'] + args.rate:.0f} calls allowed in that "
          f"time); after the first 2 s {rate['steady']:.1f} calls/s ({rate['steady'] / args.rate:.1%} of the rate)")

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--service", type=float, default=0.02)
    parser.add_argument("--cap", type=int, default=16)
    parser.add_argument("--rate", type=float, default=200.0)
    a = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    try:
        asyncio.run(main(a))
    finally:
        ray.shutdown()
