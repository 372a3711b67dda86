"""End to end on the CPU: `agentrl train` with verl's own vLLM rollout (vLLM's CPU build), and `agentrl eval
--engine vllm`.

Real: verl's main_ppo, Ray, verl's vLLM server replica (async mode) beside the FSDP2 actor, the weight sync
every step, the calculator MCP server, `agentrl eval` with both engines. The model is the demo's small Qwen2
with a short warm-up. Three training runs (full weights, LoRA, and one whose weights cannot load) are the
fewest that cover what users run and the failure that used to hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

AGENTRL = [sys.executable, "-m", "agentrl.cli"]
STEPS = 2
CORRELATION = 0.99  # verl's training/rollout_actor_probs_pearson_corr: vLLM's log-probs against the actor's


def train(tmp_path: Path, demo: dict, env: dict | None = None, timeout: float = 900, **agentrl) -> tuple:
    block = {
        "name": "vllm", "model": demo["model_path"], "train_data": demo["train_path"], "val_data": demo["val_path"],
        "tools": ["calculator"], "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5}],
        "batch_size": 2, "samples_per_prompt": 4, "max_steps": STEPS, "save_every": STEPS,
        "max_prompt_length": 320, "max_response_length": 64, "learning_rate": 5e-4, "rollout": "vllm",
        "run_dir": str(tmp_path / "run"), "agent": {"max_turns": 2, "max_tool_calls": 2},
    }
    block.update(agentrl)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"agentrl": block}))
    started = time.monotonic()
    proc = subprocess.run(AGENTRL + ["train", str(config), "--no-review"], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, cwd=tmp_path)
    return proc, tmp_path / "run", time.monotonic() - started


def steps(run: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if not r.get("validation")]


@pytest.fixture(scope="module")
def full_run(demo, tmp_path_factory):
    return train(tmp_path_factory.mktemp("full"), demo)


@pytest.fixture(scope="module")
def lora_run(demo, tmp_path_factory):
    return train(tmp_path_factory.mktemp("lora"), demo, lora={"rank": 8})


@pytest.mark.parametrize("which", ["full_run", "lora_run"])
def test_vllm_rollout_trains_with_weights_synced_every_step(which, request):
    proc, run, _ = request.getfixturevalue(which)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "with the vllm rollout" in proc.stdout
    trained = steps(run)
    assert [r["step"] for r in trained] == list(range(1, STEPS + 1))
    for r in trained:
        assert r["verl"]["training/rollout_actor_probs_pearson_corr"] >= CORRELATION, r["step"]
        assert "timing_s/update_weights" in r["verl"], r["step"]  # verl synced the weights to vLLM this step
        # what vLLM sampled is what the model says: at temperature 1 the trainer's mean -log p of the sampled tokens
        # is about the policy's entropy (0.39-0.49 nats against 0.21-0.35 in a demo run here). A sampler that
        # emits junk while its log-probs match the actor's passes the correlation above but not this: seen with
        # ATen capped to AVX2 (ATEN_CPU_CAPABILITY=avx2) on an AVX-512 CPU, 12.85-13.20 nats against 0.39-0.51.
        assert r["verl"]["rollout_corr/training_log_ppl"] < r["verl"]["actor/entropy"] + 2.0, r["step"]
    log = (run / "training.log").read_text(errors="replace")
    assert "vLLMHttpServer" in log  # verl's own vLLM server replica served the rollouts
    # the model worker ran in the engine's process: no process of its own importing torch and vLLM again
    assert "VllmWorker" not in log


def test_a_weight_sync_that_fails_stops_the_run_with_the_cause(demo, tmp_path):
    # VLLM_PLUGINS is vLLM's own list of the plugins to load: leaving agentrl's out brings back vLLM's CPU
    # backend dropping each linear layer's weight, so verl's first weight sync cannot load (this hung before)
    # (subprocess.run's timeout fails the test if the run hangs instead)
    proc, run, seconds = train(tmp_path, demo, env={"VLLM_PLUGINS": "lora_filesystem_resolver",
                                                    "AGENTRL_WEIGHT_SYNC_TIMEOUT": "120"}, timeout=1200)
    assert proc.returncode != 0
    out = proc.stdout + (run / "training.log").read_text(errors="replace")
    assert "failed while receiving weights" in out and "weight_loader" in out, proc.stdout[-3000:]
    assert not steps(run) if (run / "metrics.jsonl").exists() else True  # no step trained on unsynced weights


def final_answers(path: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]
    return {r["id"]: r["messages"][-1]["content"] for r in rows}


def test_vllm_eval_gives_the_transformers_engines_greedy_answers(full_run, tmp_path):
    proc, run, _ = full_run
    assert proc.returncode == 0
    config = run.parent / "config.yaml"
    answers = {}
    for engine in ("vllm", "transformers"):
        out = tmp_path / f"{engine}.jsonl"
        done = subprocess.run(AGENTRL + ["eval", str(config), "--model", str(run), "--engine", engine, "-o", str(out),
                                         "--limit", "32"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        # vLLM's engine is shut down by agentrl, not left to the interpreter's exit (where its __del__ failed)
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        assert json.loads(out.read_text().splitlines()[0])["agentrl_eval"]["engine"] == engine
        answers[engine] = final_answers(out)
    assert answers["vllm"].keys() == answers["transformers"].keys() and len(answers["vllm"]) == 32
    same = sum(answers["vllm"][k] == answers["transformers"][k] for k in answers["vllm"])
    assert same / len(answers["vllm"]) >= 0.9, (same, answers)
