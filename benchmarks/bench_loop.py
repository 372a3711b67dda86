"""agentrl's own CPU per agent turn at GPU-scale concurrency, with a model that answers instantly.

    .venv/bin/python benchmarks/bench_loop.py [--rollouts 1024] [--turns 4] [--calls 2] [--waves 3]

The real agent loop (``agentrl.verl.agent_loop.AgentrlAgentLoop``, built by its constructor as verl's
agent-loop worker builds it, once per rollout) runs ``--rollouts`` rollouts at once. A stand-in shaped
like verl's server manager (``generate(request_id, prompt_ids=, sampling_params=) -> TokenOutput``)
answers every turn at once with pre-tokenised text: ``--calls`` hermes tool calls per turn, then a final
answer on the last turn. The demo's rewards (math + tool_use) score every rollout, and every rollout is
appended to rollouts.jsonl. It runs on the event loop Ray gives its workers (uvloop), in a process whose
garbage collector agentrl has settled as it does in verl's workers (``agentrl.worker.settle_gc``).

Two workloads, same run:

* ``agentrl``: the ToolHub's connections answer in this process (a stand-in for the MCP session), so
  the CPU this process spends divided by the model turns is agentrl's own work: the loop, verl's token
  builder and parser that it calls, the hub (caps, timeouts, breaker, truncation), rewards, logging.
  Target (issue #17): <= 2 ms CPU per turn. Baseline: the same with Python's default collector.
* ``with MCP``: the tool calls go through the MCP SDK client to the agentrl-calculator server over
  streamable HTTP on 127.0.0.1 (the server runs in its own process and is not counted). What this adds
  over ``agentrl`` is the SDK's client and the HTTP stack; the bare SDK client making the same calls is
  measured too (CPU per call).

For each wave: wall time, rollouts/s, CPU ms per turn (this process, all threads) and the RSS after the
wave (the same workload again must not grow it without bound). Then one more wave of each workload under
cProfile, its CPU split by where the code lives: loop (agent loop, verl's token builder, tokenizer),
parsing (tool-call parser, JSON), tools client (agentrl.tools, mcp, httpx), rewards, logging
(rollouts.jsonl), event loop. Also the rate of ``RunDir.append_rollout`` alone.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tools import free_port, start_server  # noqa: E402  (the same loopback calculator server)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


class InstantServer:
    """verl's server manager, answering at once: ``calls`` tool calls a turn, an answer on the last turn."""

    def __init__(self, tokenizer, turns: int, calls: int) -> None:
        call = '<tool_call>\n{"name": "add", "arguments": {"a": 20, "b": 3}}\n</tool_call>'
        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.tool_turn = tokenizer.encode("\n".join([call] * calls), add_special_tokens=False) + [end]
        self.answer = tokenizer.encode("The answer is 23", add_special_tokens=False) + [end]
        self.turns = turns
        self.seen: dict[str, int] = {}
        self.calls = 0  # model turns answered: the benchmark's unit

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.calls += 1
        turn = self.seen.get(request_id, 0)
        self.seen[request_id] = turn + 1
        ids = self.answer if turn >= self.turns - 1 else self.tool_turn
        if turn >= self.turns - 1:
            self.seen.pop(request_id, None)
        return TokenOutput(token_ids=list(ids), log_probs=[-0.1] * len(ids), stop_reason="completed",
                           extra_fields={"global_steps": 1, "min_global_steps": 1, "max_global_steps": 1})


class InstantConnection:
    """The ToolHub's connection answering in this process: ``add`` at once, no SDK, no socket."""

    alive = True

    def __init__(self, spec, rollout_id=None) -> None:
        self.spec = spec

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def list_tools(self):
        from agentrl.tools.types import ToolSpec

        schema = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                  "required": ["a", "b"]}
        return [ToolSpec("add", "Add two numbers.", schema)]

    async def call_tool(self, name, arguments, rollout_id, call_id=None):
        from agentrl.tools.types import CallOutcome

        return CallOutcome(str(arguments["a"] + arguments["b"]), False)


def make_loop(spec_path: Path, server, tokenizer, response_length: int):
    from agentrl.verl.agent_loop import local_config, local_loop

    config = local_config(str(spec_path), prompt_length=2048, response_length=response_length)
    return local_loop(config, server, tokenizer, "qwen2")


def row(i: int) -> dict:
    return {"id": f"p{i}", "messages": [{"role": "user", "content": f"What is 20 + 3? ({i})"}],
            "metadata": {"expected_answer": "23", "expected_tools": [{"name": "add"}]}}


async def wave(loop_factory, server: InstantServer, rollouts: int) -> tuple[float, float, int]:
    """One batch of concurrent rollouts: (wall seconds, CPU seconds of this process, model turns)."""
    proc = psutil.Process()
    cpu0, wall0, calls0 = proc.cpu_times(), time.perf_counter(), server.calls

    async def one(i: int) -> None:
        out = await loop_factory().run({"temperature": 1.0}, extra_info={"agentrl_row": json.dumps(row(i))})
        assert out.extra_fields["agentrl_unscorable"] == 0, "a rollout was unscorable: see rollouts.jsonl"

    await asyncio.gather(*(one(i) for i in range(rollouts)))
    cpu1 = proc.cpu_times()
    return time.perf_counter() - wall0, (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system), server.calls - calls0


CATEGORIES = [  # first match wins: (category, substrings of the code's file path)
    ("logging", ("agentrl/runlog.py", "agentrl/rundir.py", "agentrl/record.py")),
    ("rewards", ("agentrl/rewards/", "agentrl/presets/", "/presets/", "sympy", "math_verify", "latex2sympy")),
    ("tools client", ("agentrl/tools/", "/mcp/", "/httpx", "/httpcore", "/anyio/", "/h11/", "/pydantic",
                      "/sse_starlette", "/opentelemetry/", "/jsonschema/", "/referencing/", "/sniffio/")),
    ("parsing", ("tool_parser", "/json/", "agentrl/trajectory.py", "/re/")),
    ("loop", ("agentrl/verl/agent_loop.py", "agentrl/episode.py", "verl/", "transformers/", "tokenizers", "jinja2", "omegaconf", "copy.py",
              "dataclasses.py", "uuid.py")),
    ("event loop, sockets", ("asyncio/", "selectors.py", "socket.py")),
]


def _category(filename: str) -> str:
    return next((c for c, keys in CATEGORIES if any(k in filename for k in keys)), "other")


def split(profile: cProfile.Profile) -> dict[str, float]:
    """CPU seconds by category. Built-in functions (no file) count for the code that called them."""
    stats = pstats.Stats(profile)
    totals: dict[str, float] = {}
    for (filename, _, _), (_, _, tottime, _, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if filename == "~" and callers:
            for (caller_file, _, _), caller_stats in callers.items():
                name = _category(caller_file)
                totals[name] = totals.get(name, 0.0) + caller_stats[2]
            continue
        name = _category(filename)
        totals[name] = totals.get(name, 0.0) + tottime
    return totals


async def bare_client_cpu(url: str, calls: int) -> float:
    from mcp import Client

    proc = psutil.Process()
    async with Client(url, cache=None) as client:
        await client.list_tools()
        cpu0 = sum(proc.cpu_times()[:2])
        await asyncio.gather(*(client.call_tool("add", {"a": i, "b": 3}) for i in range(calls)))
        return (sum(proc.cpu_times()[:2]) - cpu0) / calls


def runlog_rate(run_dir: Path, n: int = 2000) -> float:
    from agentrl.rundir import RunDir

    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"rollout_id": "r", "prompt_id": "p", "step": 1, "messages": row(0)["messages"] * 8,
              "trajectories": [{"response": "x" * 200, "tool_calls": [], "tool_results": []}] * 4,
              "reward": 1.0, "components": {"math": 1.0}, "unscorable": None}
    started = time.perf_counter()
    for _ in range(n):
        RunDir(run_dir).append_rollout(record)
    return n / (time.perf_counter() - started)


def write_spec(path: Path, run_dir: Path, url: str, args) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "run_dir": str(run_dir), "tools": {"calculator": {"url": url}}, "tool_allow": None,  # defaults left unset
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5}],
        "agent": {"max_turns": args.turns, "max_tool_calls": args.turns * args.calls,
                  "max_parallel_calls": args.calls, "max_tool_result_chars": 4000, "tool_parser": "hermes",
                  "simulated_user": None},
    }))
    return path


async def waves(name: str, loop_factory, server: InstantServer, args, count: int) -> list[tuple]:
    rows = []
    for n in range(count):
        wall, cpu, turns = await wave(loop_factory, server, args.rollouts)
        rss = psutil.Process().memory_info().rss / 2**20
        rows.append((n + 1, wall, cpu, turns, rss))
        print(f"{name:>9s} wave {n + 1}: {wall:6.2f} s wall, {args.rollouts / wall:6.1f} rollouts/s, "
              f"{cpu / turns * 1000:5.2f} ms CPU/turn, RSS {rss:6.0f} MiB", flush=True)
    return rows


async def profiled(loop_factory, server: InstantServer, args) -> tuple[dict, int]:
    profile = cProfile.Profile(time.process_time)  # CPU, not wall (epoll waits are not work)
    profile.enable()
    _, _, turns = await wave(loop_factory, server, args.rollouts)
    profile.disable()
    return split(profile), turns


def per_turn(rows: list[tuple]) -> float:
    steady = rows[1:] or rows  # the first wave pays for imports, connections and caches
    return sum(r[2] for r in steady) / sum(r[3] for r in steady) * 1000


def print_split(title: str, totals: dict, turns: int) -> None:
    whole = sum(totals.values()) or 1.0
    print(f"{title} ({whole / turns * 1000:.2f} ms/turn with the profiler's overhead):")
    for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {name:20s} {seconds / whole * 100:5.1f}%   {seconds / turns * 1000:6.3f} ms/turn")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rollouts", type=int, default=1024)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--waves", type=int, default=3)
    ap.add_argument("--no-mcp", action="store_true", help="only agentrl's own work (e.g. many --waves for memory)")
    args = ap.parse_args()

    import gc

    from ray._private.async_compat import get_new_event_loop  # the loop Ray gives an async actor
    from transformers import AutoTokenizer

    import agentrl.tools.hub as hub_module
    from agentrl.runner import resolve_model

    model_path, _ = resolve_model("demo")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    port = free_port()
    server_proc = start_server(port)
    url = f"http://127.0.0.1:{port}/mcp"
    work = Path(tempfile.mkdtemp(prefix="agentrl-bench-loop-"))
    own_spec = write_spec(work / "own.json", work / "own", url, args)
    mcp_spec = write_spec(work / "mcp.json", work / "mcp", url, args)
    server = InstantServer(tokenizer, args.turns, args.calls)
    loop = get_new_event_loop()
    asyncio.set_event_loop(loop)
    print(f"{args.rollouts} concurrent rollouts x {args.turns} turns x {args.calls} tool calls/turn; "
          f"event loop {type(loop).__module__}.{type(loop).__name__}; load {os.getloadavg()[0]:.1f}; "
          f"cores {os.cpu_count()}", flush=True)
    real_connection = hub_module.new_connection
    try:
        own = lambda: make_loop(own_spec, server, tokenizer, 4096)  # noqa: E731
        with_mcp = lambda: make_loop(mcp_spec, server, tokenizer, 4096)  # noqa: E731
        hub_module.new_connection = InstantConnection
        own_rows = loop.run_until_complete(waves("agentrl", own, server, args, args.waves))
        own_split = loop.run_until_complete(profiled(own, server, args))
        hub_module.new_connection = real_connection
        mcp_rows, mcp_split = [], ({}, 1)
        if not args.no_mcp:
            mcp_rows = loop.run_until_complete(waves("with MCP", with_mcp, server, args, args.waves))
            mcp_split = loop.run_until_complete(profiled(with_mcp, server, args))
        frozen, threshold = gc.get_freeze_count(), gc.get_threshold()
        gc.unfreeze()
        gc.set_threshold(700, 10, 10)  # Python's defaults
        hub_module.new_connection = InstantConnection
        base_rows = loop.run_until_complete(waves("baseline", own, server, args, max(2, args.waves)))
        hub_module.new_connection = real_connection
        bare = loop.run_until_complete(bare_client_cpu(url, 2000))
    finally:
        hub_module.new_connection = real_connection
        server_proc.terminate()
        server_proc.wait(timeout=10)
        loop.close()
    own_ms, base_ms = per_turn(own_rows), per_turn(base_rows)
    calls_per_turn = args.calls * (args.turns - 1) / args.turns
    print(f"\nagentrl's own CPU per turn: {own_ms:.2f} ms   (target <= 2 ms; waves 2..{args.waves}; "
          f"collector settled: {frozen} objects frozen, threshold {threshold})")
    print(f"baseline, Python's default collector: {base_ms:.2f} ms per turn")
    if mcp_rows:
        mcp_ms = per_turn(mcp_rows)
        print(f"with the MCP SDK client and a loopback server: {mcp_ms:.2f} ms per turn, {mcp_ms - own_ms:.2f} ms "
              f"of it the SDK and HTTP ({(mcp_ms - own_ms) / calls_per_turn:.2f} ms per call)")
    print(f"the bare MCP SDK client alone: {bare * 1000:.2f} ms CPU per call = "
          f"{bare * 1000 * calls_per_turn:.2f} ms per turn at {calls_per_turn:g} calls a turn")
    for name, rows in (("agentrl", own_rows), ("with MCP", mcp_rows), ("baseline", base_rows)):
        if rows:
            print(f"RSS after each wave, {name}: {', '.join(f'{r[4]:.0f}' for r in rows)} MiB")
    print_split("\nCPU split of a profiled agentrl wave", own_split[0], own_split[1])
    if mcp_rows:
        print_split("CPU split of a profiled wave with MCP", mcp_split[0], mcp_split[1])
    log = work / "own" / "rollouts.jsonl"
    written = sum(1 for _ in log.open())
    print(f"rollouts.jsonl (agentrl): {written} records, {log.stat().st_size / 2**20:.1f} MiB; "
          f"append_rollout alone: {runlog_rate(work / 'alone'):.0f} records/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
