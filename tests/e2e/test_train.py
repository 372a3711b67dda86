"""End to end: `agentrl train` runs verl's real GRPO trainer on the CPU with the real calculator MCP server.

A small demo build (short warm-up) stands in for a real model; everything else is the real thing:
verl's main_ppo, Ray, the agentrl_cpu rollout, the agent loop, MCP over stdio, the reward presets.
The run is interrupted with SIGINT after its first checkpoint and then resumed to the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

AGENTRL = [sys.executable, "-m", "agentrl.cli"]
STEPS = 3


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from agentrl.demo import build

    return build(str(tmp_path_factory.mktemp("demo")), warmup_steps=30, eval_samples=0, log=lambda m: None)


def write_config(tmp_path: Path, demo: dict, **agentrl) -> Path:
    block = {
        "name": "e2e", "model": demo["model_path"], "train_data": demo["train_path"],
        "tools": ["calculator"],
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0}],
        "batch_size": 2, "samples_per_prompt": 4, "max_steps": STEPS, "save_every": 1,
        "max_prompt_length": 320, "max_response_length": 64, "learning_rate": 5e-4,
        "run_dir": str(tmp_path / "run"), "agent": {"max_turns": 2, "max_tool_calls": 2},
    }
    block.update(agentrl)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"agentrl": block}))
    return path


def ray_processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
    return [p for p in out if "raylet" in p or "gcs_server" in p]


def wait_for(predicate, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"agentrl exited early with {proc.returncode}:\n{proc.stdout.read()}")
        time.sleep(2)
    proc.kill()
    raise AssertionError("timed out")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_train_interrupt_and_resume(tmp_path, demo):
    config = write_config(tmp_path, demo)
    run = tmp_path / "run"
    status_file = run / "checkpoint_status.json"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    first = subprocess.Popen(AGENTRL + ["train", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env)
    wait_for(status_file.exists, 900, first)
    first.send_signal(signal.SIGINT)  # what Ctrl-C does
    out1, _ = first.communicate(timeout=180)
    assert first.returncode == 130, out1
    assert "interrupted" in out1
    assert ray_processes() == [], "Ray outlived the interrupted run"
    step_at_interrupt = json.loads(status_file.read_text())["step"]
    assert step_at_interrupt >= 1

    second = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, env=env, timeout=1200)
    out2 = second.stdout + second.stderr
    assert second.returncode == 0, out2
    assert f"resuming {run} from checkpoint step" in out2
    assert f"step {STEPS}/{STEPS}" in out2 and "eta" in out2 and "reward" in out2

    # the run directory
    for name in ("config.yaml", "training.log", "metrics.jsonl", "rollouts.jsonl", "agentrl_spec.json"):
        assert (run / name).exists(), name
    status = json.loads(status_file.read_text())
    assert status["complete"] and status["step"] == STEPS
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(status["hf_model"])
    AutoTokenizer.from_pretrained(status["hf_model"])

    metrics = read_jsonl(run / "metrics.jsonl")
    assert metrics[-1]["step"] == STEPS
    assert {m["step"] for m in metrics} >= set(range(step_at_interrupt + 1, STEPS + 1))
    for key in ("reward_mean", "reward_std", "reward/math", "response_length", "kl", "advantages_mean", "loss",
                "entropy", "grad_norm", "learning_rate", "tool_calls_per_rollout", "step_time", "unscorable"):
        assert key in metrics[-1], key

    rollouts = read_jsonl(run / "rollouts.jsonl")
    assert len(rollouts) >= STEPS * 2 * 4 - 2 * 4 * step_at_interrupt
    ids = [r["rollout_id"] for r in rollouts]
    assert len(ids) == len(set(ids))
    r = rollouts[-1]
    for key in ("prompt_id", "step", "messages", "trajectory", "reward", "components", "tool_calls"):
        assert key in r
    assert r["messages"][0]["role"] in ("system", "user")
    assert set(r["components"]) == {"math", "tool_use"}
    called = [s for x in rollouts for s in x["trajectory"] if s["tool_calls"]]
    for step in called:  # every tool call the model made got a result from the real calculator server
        assert len(step["tool_results"]) >= len(step["tool_calls"])


@pytest.mark.parametrize("change, needle", [
    ({"rewards": [{"name": "maths"}]}, "unknown reward 'maths'"),
    ({"tools": ["calculater"]}, "calculater"),
    ({"train_data": "/nonexistent/train.jsonl"}, "/nonexistent/train.jsonl"),
    ({"run_dir": "/proc/version/run"}, "not writable"),
])
def test_bad_input_fails_before_training(tmp_path, demo, change, needle):
    config = write_config(tmp_path, demo, **change)
    result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stdout + result.stderr
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_row_is_reported_with_file_and_line(tmp_path, demo):
    data = tmp_path / "train.jsonl"
    good = Path(demo["train_path"]).read_text().splitlines()[:5]
    data.write_text("\n".join(good + ['{"metadata": {"expected_answer": "3"}}']) + "\n")
    config = write_config(tmp_path, demo, train_data=str(data))
    result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert f"{data}:6" in result.stderr and 'no "messages" key' in result.stderr


def test_dead_tool_server_makes_rollouts_unscorable_not_zero(tmp_path, demo):
    """Every rollout's tool server is dead: the step must still train (no NaN), count every rollout as
    unscorable with the cause, and never record a 0 reward for them."""
    dead = {"dead": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"], "retries": 1}}
    config = write_config(tmp_path, demo, tools=dead, max_steps=1, save_every=0)
    result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    run = tmp_path / "run"
    rollouts = read_jsonl(run / "rollouts.jsonl")
    assert rollouts and all(r["unscorable"] and "dead" in r["unscorable"] for r in rollouts)
    assert all(r["reward"] is None for r in rollouts)
    metrics = read_jsonl(run / "metrics.jsonl")[-1]
    assert metrics["unscorable"] == metrics["rollouts"] == len(rollouts)
    assert metrics["reward_mean"] is None
    for key in ("loss", "grad_norm", "entropy"):  # a finite update: the unscorable rollouts got advantage 0
        assert metrics[key] is not None and metrics[key] == metrics[key], key
    assert "unscorable" in result.stdout


def test_one_trainer_per_run_directory(tmp_path, demo):
    """A second `agentrl train` on a run directory in use fails before touching it."""
    import fcntl

    config = write_config(tmp_path, demo)
    run = tmp_path / "run"
    run.mkdir()
    with open(run / ".agentrl.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "already running" in result.stderr
    assert not (run / "config.yaml").exists()


def test_kill_9_then_resume(tmp_path, demo):
    """`kill -9` of agentrl (no chance to clean up): verl and Ray must still go, and a rerun resumes."""
    config = write_config(tmp_path, demo, max_steps=2)
    run = tmp_path / "run"
    proc = subprocess.Popen(AGENTRL + ["train", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    wait_for((run / "checkpoint_status.json").exists, 900, proc)
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 120
    while ray_processes() and time.monotonic() < deadline:
        time.sleep(2)
    assert ray_processes() == [], "verl and Ray outlived a killed agentrl"
    second = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=1200)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming" in second.stdout
    assert json.loads((run / "checkpoint_status.json").read_text())["step"] == 2


def zygotes() -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines()
    return {int(line.split(None, 1)[0]) for line in out if "agentrl.sandbox.zygote" in line}


def test_sandboxed_reward_file_scores_inside_verl(tmp_path, demo):
    """The `custom` preset is a reward file: it runs in the sandbox that verl's agent-loop worker starts.
    Every rollout gets a real score from it, the isolation was reported before the run, and no sandbox
    process outlives the run."""
    before = zygotes()
    config = write_config(tmp_path, demo, max_steps=1, save_every=0,
                          rewards=[{"name": "math", "weight": 1.0}, {"name": "custom", "weight": 0.5}])
    result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sandbox isolation: strong" in result.stderr
    run = tmp_path / "run"
    assert json.loads((run / "sandbox_isolation.json").read_text())["landlock_fs"]["ok"]
    rollouts = read_jsonl(run / "rollouts.jsonl")
    assert rollouts and all(r["unscorable"] is None for r in rollouts), [r["unscorable"] for r in rollouts]
    assert all(r["components"]["custom"] in (0.0, 1.0) for r in rollouts)
    metrics = read_jsonl(run / "metrics.jsonl")[-1]
    assert "reward/custom" in metrics and metrics["unscorable"] == 0
    deadline = time.monotonic() + 30
    while zygotes() - before and time.monotonic() < deadline:
        time.sleep(1)
    assert zygotes() - before == set(), "sandbox workers outlived the training run"
