"""Load test: N concurrent rollouts making tool calls against a local streamable-HTTP MCP server.

    .venv/bin/python benchmarks/bench_tools.py [--rollouts 256] [--calls 4] [--parallel 2]

Starts the agentrl-calculator over HTTP on 127.0.0.1, then in one run measures the same workload twice:
``direct`` through one bare ``mcp.Client`` session, and ``toolhub`` through ToolHub (one rollout session
per rollout, concurrency cap, timeout, retries, breaker, truncation). Prints calls/s, p50/p99 latency
per call, errors, and the latency ToolHub adds. Traffic goes to loopback only and the run is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time

from mcp import Client  # the baseline is the bare SDK client

from agentrl.tools import ToolCall, ToolHub
from agentrl.tools.traffic import percentile


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "agentrl_calculator", "--http", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"calculator server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("calculator server did not start within 60 s")


def summary(name: str, latencies: list[float], errors: int, wall: float) -> dict:
    lat = sorted(latencies)
    calls = len(lat) + errors
    return {"name": name, "calls": calls, "errors": errors, "calls_per_s": calls / wall if wall else 0.0,
            "p50_ms": (percentile(lat, 50) or 0) * 1000, "p99_ms": (percentile(lat, 99) or 0) * 1000, "wall_s": wall}


async def direct(url: str, rollouts: int, calls: int, parallel: int) -> tuple:
    latencies: list[float] = []
    errors = 0
    async with Client(url, cache=None) as client:
        await client.list_tools()

        async def one(i: int, k: int) -> None:
            nonlocal errors
            start = time.perf_counter()
            try:
                result = await asyncio.wait_for(client.call_tool("add", {"a": i, "b": k}, meta={"agentrl/rollout_id": f"r{i}"}), 60)
                if result.is_error:
                    errors += 1
                    return
            except Exception:
                errors += 1
                return
            latencies.append(time.perf_counter() - start)

        async def rollout(i: int) -> None:
            for turn in range(calls // parallel):
                await asyncio.gather(*(one(i, turn * parallel + j) for j in range(parallel)))

        wall = time.perf_counter()
        await asyncio.gather(*(rollout(i) for i in range(rollouts)))
        wall = time.perf_counter() - wall
    return latencies, errors, wall, None


async def through_hub(url: str, rollouts: int, calls: int, parallel: int) -> tuple:
    latencies: list[float] = []
    errors = 0
    hub = ToolHub.from_config({"calc": {"url": url, "max_concurrency": rollouts * parallel, "timeout": 60}})
    async with hub:
        async with hub.rollout("warmup") as s:
            await s.tool_schemas()

        async def timed(session, call: ToolCall):
            start = time.perf_counter()
            result = await session.call(call)
            return result, time.perf_counter() - start

        async def rollout(i: int) -> None:
            nonlocal errors
            try:
                async with hub.rollout(f"r{i}") as s:
                    for turn in range(calls // parallel):
                        batch = [ToolCall(f"c{j}", "add", {"a": i, "b": turn * parallel + j}) for j in range(parallel)]
                        for result, seconds in await asyncio.gather(*(timed(s, c) for c in batch)):
                            if result.is_error:
                                errors += 1
                            else:
                                latencies.append(seconds)
            except Exception:
                errors += calls
        wall = time.perf_counter()
        await asyncio.gather(*(rollout(i) for i in range(rollouts)))
        wall = time.perf_counter() - wall
        metrics = hub.metrics()["calc"]
    return latencies, errors, wall, metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=256)
    parser.add_argument("--calls", type=int, default=4, help="tool calls per rollout")
    parser.add_argument("--parallel", type=int, default=2, help="tool calls per turn, run concurrently")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each side, order alternating")
    args = parser.parse_args()
    port = free_port()
    server = start_server(port)
    url = f"http://127.0.0.1:{port}/mcp"
    totals = {"direct": [[], 0, 0.0], "toolhub": [[], 0, 0.0]}
    metrics = None
    try:
        for r in range(args.rounds):  # alternate the order so neither side always runs on a warmer server
            order = [("direct", direct), ("toolhub", through_hub)]
            for name, fn in order if r % 2 == 0 else order[::-1]:
                lat, errors, wall, m = asyncio.run(fn(url, args.rollouts, args.calls, args.parallel))
                totals[name][0] += lat
                totals[name][1] += errors
                totals[name][2] += wall
                metrics = m or metrics
    finally:
        server.terminate()
        server.wait(10)
    d = summary("direct (bare mcp.Client)", *totals["direct"])
    h = summary("toolhub", *totals["toolhub"])
    print(f"{args.rollouts} concurrent rollouts x {args.calls} calls ({args.parallel} per turn) x {args.rounds} rounds, "
          f"agentrl-calculator over streamable HTTP on 127.0.0.1, {os.cpu_count()} CPUs")
    print(f"{'':26} {'calls':>6} {'errors':>6} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'wall s':>7}")
    for r in (d, h):
        print(f"{r['name']:26} {r['calls']:>6} {r['errors']:>6} {r['calls_per_s']:>9.1f} {r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f} {r['wall_s']:>7.2f}")
    print(f"added by ToolHub: p50 {h['p50_ms'] - d['p50_ms']:+.1f} ms, p99 {h['p99_ms'] - d['p99_ms']:+.1f} ms, "
          f"throughput {100 * (h['calls_per_s'] / d['calls_per_s'] - 1) if d['calls_per_s'] else 0:+.1f}%")
    print(f"ToolHub metrics (last round): {metrics}")


if __name__ == "__main__":
    main()
