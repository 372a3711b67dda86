"""End to end: a FastAPI server with the Agent RFT tutorial's tool contract trains as agentrl's tool server.

The tools are declared exactly as Agent RFT declares them ([{"name", "url", "headers"}], a bearer token from
${ENV}), their schemas come from the config, and the real verl trainer runs one step on
the CPU with the demo model (built once and cached, as `model: demo` does) standing in for a real model
(the only fake here): it was warmed up to call add / subtract / multiply, which this server serves.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runs import AGENTRL  # tests/e2e/runs.py

SERVER = Path(__file__).resolve().parent.parent / "tools" / "servers" / "rft_server.py"


@pytest.fixture
def rft(tmp_path):
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "calls.jsonl"
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port)],
                            env={**__import__("os").environ, "RFT_TOKEN": "tok-e2e", "RFT_LOG": str(log)})
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "the tool server did not start"
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}", log
    proc.terminate()
    proc.wait(10)


def test_agent_rft_http_tools_train_end_to_end(tmp_path, rft, monkeypatch):
    base, log = rft
    monkeypatch.setenv("RFT_E2E_TOKEN", "tok-e2e")
    auth = {"Authorization": "Bearer ${RFT_E2E_TOKEN}"}
    from agentrl.demo import CALCULATOR_TOOLS

    # the schemas from the config (the demo model was warmed up on exactly these; the OpenAPI path is tested
    # in tests/tools/test_http_tools.py)
    tools = [{"name": t["function"]["name"], "url": f"{base}/{t['function']['name']}", "headers": auth,
              "description": t["function"]["description"], "parameters": t["function"]["parameters"]}
             for t in CALCULATOR_TOOLS]
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    block = {
        "name": "e2e-rft", "model": "demo", "train_data": "demo", "tools": "tools.json",
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0}],
        # the demo model calls a tool in about 1 of 11 samples at step 1 (12 of 128 measured, T=1): 64 rollouts
        # leave a run with no call at all about 0.2% likely (8 rollouts: about 46%, and a CI run met it)
        "batch_size": 8, "samples_per_prompt": 8, "max_steps": 1, "save_every": 0,
        "max_prompt_length": 320, "max_response_length": 64, "learning_rate": 5e-4,
        "run_dir": str(tmp_path / "run"), "agent": {"max_turns": 2, "max_tool_calls": 2},
    }
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"agentrl": block}))

    listed = subprocess.run(AGENTRL + ["tools", "check", str(config)], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "3/3 servers ok" in listed.stdout, listed.stdout + listed.stderr

    result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rollouts = [json.loads(line) for line in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 64 and all(r["unscorable"] is None for r in rollouts), [r["unscorable"] for r in rollouts]
    assert all("passed" in r for r in rollouts)
    steps = [s for r in rollouts for s in r["trajectories"] if s["tool_calls"]]
    assert steps, "the demo model made no tool call"
    results = [res for s in steps for res in s["tool_results"]]
    calls = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    calls = [c for c in calls if c["call_id"] != "agentrl-check"]  # `tools check` probed each endpoint once
    # every call reached the FastAPI server with the rollout id as header and the model's call id
    ids = {r["rollout_id"] for r in rollouts}
    assert calls and all(c["rollout_id"] in ids and c["call_id"] for c in calls), calls[:3]
    answered = [r for r in results if not r["is_error"]]
    assert answered and len(calls) == len(answered)  # 422s (bad arguments) never reach the handler's log
    assert all(r["content"].lstrip("-").replace(".", "").isdigit() for r in answered), answered[:3]
