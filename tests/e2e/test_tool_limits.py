"""End to end: one tool cap for the whole run across verl's agent-loop processes.

The real verl trainer runs 2 steps on the CPU with the demo model (the only fake: it stands in for a real model,
warmed up to call add / subtract / multiply) and ``agentrl.rollout_workers: 2``: two agent-loop processes. Their
tools are HTTP endpoints of tests/tools/servers/traffic_server.py on loopback, which answers after a
heavy-tailed latency, pushes back with 429 and ``Retry-After`` on a fifth of the calls, and records how many
calls each tool had in flight at once. With ``max_concurrency: 1`` no tool ever has two, though two processes
send; both processes use the run's limiter; no rollout is lost or unscorable for the 429s.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from runs import AGENTRL  # tests/e2e/runs.py

SERVER = Path(__file__).resolve().parent.parent / "tools" / "servers" / "traffic_server.py"


def test_two_agent_loop_processes_share_one_tool_cap_and_lose_nothing_to_429s(tmp_path):
    from agentrl.demo import CALCULATOR_TOOLS

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port), "--p50", "0.3", "--p99", "3",
                               "--p429", "0.2", "--retry-after", "0.3"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "the tool server did not start"
                time.sleep(0.2)
        base = f"http://127.0.0.1:{port}"
        # the schemas the demo model was warmed up on; one call at a time for the whole run
        tools = [{"name": t["function"]["name"], "url": f"{base}/{t['function']['name']}", "max_concurrency": 1,
                  "description": t["function"]["description"], "parameters": t["function"]["parameters"]}
                 for t in CALCULATOR_TOOLS]
        block = {
            "name": "e2e-limits", "model": "demo", "train_data": "demo", "tools": tools, "rollout_workers": 2,
            "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0}],
            "batch_size": 2, "samples_per_prompt": 2, "max_steps": 2, "save_every": 0,
            "max_prompt_length": 320, "max_response_length": 64, "learning_rate": 5e-4,
            "run_dir": str(tmp_path / "run"), "agent": {"max_turns": 2, "max_tool_calls": 2},
        }
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"agentrl": block}))
        result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=1500)
        stats = httpx.get(f"{base}/stats").json()
    finally:
        server.terminate()
        server.wait(10)
    out = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, out
    rollouts = [json.loads(line) for line in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 8 and all(r["unscorable"] is None for r in rollouts), [r["unscorable"] for r in rollouts]
    assert all(r["reward"] is not None for r in rollouts)
    results = [res for r in rollouts for s in r["trajectories"] for res in s["tool_results"]]
    assert results and not any(res["is_error"] and "429" in res["content"] for res in results)
    assert stats["answered"] >= 2, stats  # the demo model called the tools
    # each tool is an endpoint of its own with max_concurrency 1: never two calls of one at once, from two processes
    assert stats["route_peak"] and all(peak == 1 for peak in stats["route_peak"].values()), stats
    log = (tmp_path / "run" / "training.log").read_text(errors="replace")
    users = set(re.findall(r"tool limits for the whole run: process (\d+) ", log))
    assert len(users) == 2, log[-3000:]  # both agent-loop processes went through the run's limiter
    print(f"tool server: {stats['calls']} requests, {stats['pushed_back']} answered 429, peak per tool "
          f"{stats['route_peak']}, all tools together {stats['peak']}")
