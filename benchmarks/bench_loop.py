"""agentrl's own CPU per agent turn at GPU-scale concurrency, with a model that answers instantly.

    .venv/bin/python benchmarks/bench_loop.py [--rollouts 1024] [--turns 4] [--calls 2] [--waves 3]

The real agent loop (``agentrl.agent_loop.AgentrlAgentLoop``, built by its constructor as verl's
agent-loop worker builds it) runs ``--rollouts`` rollouts at once. A stand-in shaped like verl's server
manager (``generate(request_id, prompt_ids=, sampling_params=) -> TokenOutput``) answers every turn at
once with pre-tokenised text: ``--calls`` hermes tool calls per turn, then a final answer on the last
turn. The tool calls go to the agentrl-calculator MCP server over streamable HTTP on 127.0.0.1, and the
demo's rewards (math + tool_use) score every rollout; every rollout is appended to rollouts.jsonl.
What is left is agentrl's own work (plus verl's token builder and parser the loop calls), so the CPU
this process spends divided by the turns is agentrl's cost per turn. The MCP server runs in its own
process and is not counted.

Prints, for each wave: wall time, rollouts/s, turns, CPU ms per turn (this process, all threads), the
RSS after the wave (the same workload again must not grow it without bound). Then one more wave under
cProfile, its CPU split by where the code lives: loop (agent loop, verl's token builder, tokenizer,
asyncio), parsing (tool-call parser, JSON), tools client (agentrl.tools, mcp, httpx), rewards, logging
(rollouts.jsonl). Baselines in the same run: the bare MCP SDK client making the same tool calls (CPU per
call, the floor for tool traffic) and ``runlog.append_rollout`` alone (records/s).
Target (issue #17): agentrl's own work <= 2 ms CPU per turn.
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


def make_loop(spec_path: Path, server, tokenizer, response_length: int):
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from agentrl.agent_loop import AgentrlAgentLoop

    config = OmegaConf.create({
        "agentrl": {"spec": str(spec_path)},
        "actor_rollout_ref": {"rollout": {"response_length": response_length, "prompt_length": 2048,
                                          "calculate_log_probs": True}},
        "data": {"apply_chat_template_kwargs": {}},
    })
    return AgentrlAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                            processor=None, dataset_cls=None, data_config=DictConfigWrap(config.data),
                            hf_model_type="qwen2")


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
    ("logging", ("agentrl/runlog.py",)),
    ("rewards", ("agentrl/rewards/", "agentrl/presets/", "/presets/", "sympy", "math_verify", "latex2sympy")),
    ("tools client", ("agentrl/tools/", "/mcp/", "/httpx", "/httpcore", "/anyio/", "/h11/", "/pydantic",
                      "/sse_starlette", "/opentelemetry/", "/jsonschema/", "/referencing/", "/sniffio/")),
    ("parsing", ("tool_parser", "/json/", "agentrl/trajectory.py", "/re/")),
    ("loop", ("agentrl/agent_loop.py", "verl/", "transformers/", "tokenizers", "jinja2", "omegaconf", "copy.py",
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
    from agentrl import runlog

    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"rollout_id": "r", "prompt_id": "p", "step": 1, "messages": row(0)["messages"] * 8,
              "trajectory": [{"response": "x" * 200, "tool_calls": [], "tool_results": []}] * 4,
              "reward": 1.0, "components": {"math": 1.0}, "unscorable": None}
    started = time.perf_counter()
    for _ in range(n):
        runlog.append_rollout(str(run_dir), record)
    return n / (time.perf_counter() - started)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rollouts", type=int, default=1024)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--waves", type=int, default=3)
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from agentrl.runner import resolve_model

    model_path, _ = resolve_model("demo")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    port = free_port()
    server_proc = start_server(port)
    url = f"http://127.0.0.1:{port}/mcp"
    work = Path(tempfile.mkdtemp(prefix="agentrl-bench-loop-"))
    spec_path = work / "spec.json"
    spec_path.write_text(json.dumps({
        "run_dir": str(work), "tools": {"calculator": {"url": url, "max_concurrency": 256}}, "tool_allow": None,
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5}],
        "agent": {"max_turns": args.turns, "max_tool_calls": args.turns * args.calls,
                  "max_parallel_calls": args.calls, "max_tool_result_chars": 4000, "tool_parser": "hermes",
                  "simulated_user": None},
    }))
    server = InstantServer(tokenizer, args.turns, args.calls)
    print(f"{args.rollouts} concurrent rollouts x {args.turns} turns x {args.calls} tool calls/turn; "
          f"load {os.getloadavg()[0]:.1f}; cores {os.cpu_count()}", flush=True)
    try:
        async def run_all() -> tuple[list, cProfile.Profile, float, float]:
            loop_factory = lambda: make_loop(spec_path, server, tokenizer, 4096)  # noqa: E731
            rows = []
            for n in range(args.waves):
                wall, cpu, turns = await wave(loop_factory, server, args.rollouts)
                rss = psutil.Process().memory_info().rss / 2**20
                rows.append((n + 1, wall, cpu, turns, rss))
                print(f"wave {n + 1}: {wall:6.2f} s wall, {args.rollouts / wall:7.1f} rollouts/s, {turns} turns, "
                      f"{cpu / turns * 1000:5.2f} ms CPU/turn, RSS {rss:7.1f} MiB", flush=True)
            profile = cProfile.Profile(time.process_time)  # CPU, not wall (epoll waits are not work)
            profile.enable()
            _, pcpu, pturns = await wave(loop_factory, server, args.rollouts)
            profile.disable()
            return rows, profile, pcpu, pturns

        rows, profile, pcpu, pturns = asyncio.run(run_all())
        bare = asyncio.run(bare_client_cpu(url, 2000))
    finally:
        server_proc.terminate()
        server_proc.wait(timeout=10)
    steady = rows[1:] or rows
    per_turn = sum(r[2] for r in steady) / sum(r[3] for r in steady) * 1000
    totals = split(profile)
    whole = sum(totals.values()) or 1.0
    log = work / "rollouts.jsonl"
    written = sum(1 for _ in log.open())
    print(f"\nagentrl's CPU per turn (waves 2..{args.waves}): {per_turn:.2f} ms   (target <= 2 ms)")
    print(f"RSS after each wave: {', '.join(f'{r[4]:.0f}' for r in rows)} MiB")
    print(f"CPU split of a profiled wave ({pcpu / pturns * 1000:.2f} ms/turn with the profiler's overhead):")
    for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {name:13s} {seconds / whole * 100:5.1f}%   {seconds / pturns * 1000:6.3f} ms/turn")
    print(f"rollouts.jsonl: {written} records, {log.stat().st_size / 2**20:.1f} MiB; "
          f"append_rollout alone: {runlog_rate(work / 'alone'):.0f} records/s")
    print(f"baseline: the bare MCP SDK client, {bare * 1000:.2f} ms CPU per tool call "
          f"= {bare * 1000 * args.calls * (args.turns - 1) / args.turns:.2f} ms per model turn at "
          f"{args.calls * (args.turns - 1)} calls a rollout: the SDK's own floor, inside 'tools client' above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
