"""A synthetic run directory in the format ``agentrl train`` writes, for tests, benchmarks and trying the page.

    python -m agentrl.ui.synthetic runs/fake --steps 30          # then: agentrl ui runs
    python -m agentrl.ui.synthetic runs/big --target-mb 1024     # a 1 GB rollouts.jsonl (bench_ui.py)

    write_run(Path("runs/fake"), steps=10, total=20)             # a run stopped at step 10 of 20
    append_step(Path("runs/fake"), 11)                           # what one more training step adds

Nothing here trains: the numbers are made up (reward rising, some unscorable rollouts, calculator tool
calls), but every file has the fields and layout of a real run (README.md, "The run directory").
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import yaml

from agentrl.record import RolloutRecord, StopReason
from agentrl.rundir import RunDir

TOOLS = ("add", "subtract", "multiply")


def write_config(run: Path, total: int, batch: int = 4, samples: int = 4) -> None:
    run.mkdir(parents=True, exist_ok=True)
    RunDir(run).config.write_text(yaml.safe_dump({
        "agentrl": {"name": run.name, "model": "demo", "train_data": "data/train.jsonl", "val_data": "data/val.jsonl",
                    "tools": ["calculator"], "rewards": [{"name": "math", "weight": 1.0},
                                                         {"name": "./my_reward.py", "weight": 0.5}],
                    "batch_size": batch, "samples_per_prompt": samples, "max_steps": total, "save_every": 5,
                    "run_dir": str(run)},
        "verl_overrides": {"algorithm.adv_estimator": "agentrl_grpo", "trainer.total_training_steps": total},
        "source": str(run.parent / "my.yaml"), "command_line_overrides": []}, sort_keys=False))


def rollout(step: int, prompt: int, sample: int, rng: random.Random, pad: int = 0, validation: bool = False) -> dict:
    task = random.Random(prompt * 7919 + step * 104729)  # every sample of a prompt gets the same question
    a, b = task.randint(1, 99), task.randint(1, 99)
    use_tool = rng.random() < min(0.95, 0.2 + step * 0.03)
    right = rng.random() < (0.9 if use_tool else 0.2)
    answer = a + b if right else a + b + rng.randint(1, 9)
    unscorable = "tools: calculator server timed out" if rng.random() < 0.03 else None
    messages = [{"role": "user", "content": f"What is {a} + {b}?"}]
    trajectory = []
    if use_tool:
        call = {"id": "c0", "name": "add", "arguments": {"a": a, "b": b}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "id": "c0", "function": {"name": "add", "arguments": {"a": a, "b": b}}}]})
        messages.append({"role": "tool", "tool_call_id": "c0", "content": str(a + b)})
        trajectory.append({"response": "", "tool_calls": [call],
                           "tool_results": [{"id": "c0", "name": "add", "content": str(a + b), "is_error": False}]})
    for k in range(pad // 500):  # filler turns, shaped like real ones (a long run's rollouts are many turns)
        cid = f"p{k}"
        args = {"a": rng.randint(1, 999), "b": rng.randint(1, 999), "note": "x" * 40}
        messages.append({"role": "assistant", "content": f"Let me check step {k}.", "tool_calls": [
            {"type": "function", "id": cid, "function": {"name": "multiply", "arguments": args}}]})
        result = " ".join(str(rng.randint(0, 10**6)) for _ in range(40))
        messages.append({"role": "tool", "tool_call_id": cid, "content": result})
        trajectory.append({"response": f"Let me check step {k}.", "tool_calls": [{"id": cid, "name": "multiply", "arguments": args}],
                           "tool_results": [{"id": cid, "name": "multiply", "content": result, "is_error": False}]})
    text = f"The answer is {answer}."
    messages.append({"role": "assistant", "content": text})
    trajectory.append({"response": text, "tool_calls": [], "tool_results": []})
    components = {"math": 1.0 if right else 0.0, "my_reward": 1.0 if use_tool else 0.0}
    reward = None if unscorable else (components["math"] + 0.5 * components["my_reward"]) / 1.5
    started = time.time()
    return RolloutRecord(
        rollout_id=f"r-{step:05d}{prompt:04d}{sample:03d}{'v' if validation else ''}",
        prompt_id=f"{'val' if validation else 'train'}:{prompt}", source=f"data/train.jsonl:{prompt}",
        step=step, policy_version=step, messages=messages, trajectories=trajectory, tool_calls=int(use_tool),
        user_turns=0, reward=reward, components={} if unscorable else components,
        unscorable=unscorable, stop_reason=StopReason.TOOL_INFRA_ERROR if unscorable else StopReason.ANSWERED,
        response_tokens=8 + 40 * use_tool, started_at=started, finished_at=started + 0.4,
        seconds=0.4, model_seconds=0.3, tool_seconds=0.05 * use_tool, reward_seconds=0.02,
        validation=validation).to_dict()


def metric_line(step: int, rng: random.Random, validation: bool = False) -> dict:
    reward = 0.2 + 0.6 * (1 - math.exp(-step / 15)) + rng.uniform(-0.05, 0.05)
    gen, upd = 2.0 + rng.uniform(0, 0.3), 0.9 + rng.uniform(0, 0.1)
    line = {"step": step, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "rollouts": 16, "unscorable": rng.choice([0, 0, 1]),
            "reward_mean": reward, "reward_std": 0.3, "tool_calls_per_rollout": min(1.0, 0.2 + step * 0.03),
            "reward/math": reward * 0.9, "reward/my_reward": min(1.0, 0.2 + step * 0.03), "response_length": 30 + step,
            "ppo_kl": 0.001 * step, "kl_loss": 0.0005 * step, "advantages_mean": 0.0, "advantages_max": 1.5,
            "advantages_min": -1.5, "loss": -0.5 + 0.4 * rng.random(), "pg_loss": -0.5 + 0.4 * rng.random(),
            "entropy": 0.15 - 0.001 * step, "grad_norm": 0.3 + 0.2 * rng.random(), "learning_rate": 5e-4,
            "step_time": gen + upd + 0.3, "generation_time": gen, "update_time": upd,
            "verl": {"timing_s/step": gen + upd + 0.3, "response_length/max": 60.0, "response_length/min": 7.0}}
    if validation:
        line["verl"]["val-core/agentrl/reward/mean@1"] = reward - 0.05
    return line


def append_step(run: Path, step: int, prompts: int = 4, samples: int = 4, seed: int = 0, pad: int = 0,
                val_every: int = 5, split: bool = False) -> None:
    """One training step's files: the rollouts it trained on and its metrics line.

    Two formats: by default rollouts carry the weights version they were drawn with (``step - 1``) and
    validation metrics sit in verl's dict of the step's line; with ``split``, rollouts carry the trainer step
    they were drawn for and validation is a line of its own (``"validation": true``, ``val/...`` keys)."""
    rng = random.Random(seed * 100003 + step)
    validates = bool(val_every and step % val_every == 0)
    val_rollouts = []
    with RunDir(run).rollouts.open("a") as fh:
        for p in range(prompts):
            for s in range(samples):
                fh.write(json.dumps(rollout(step if split else step - 1, p, s, rng, pad)) + "\n")
        if validates:
            val_rollouts = [rollout(step, p, 0, rng, pad, validation=True) for p in range(prompts)]
            fh.writelines(json.dumps(r) + "\n" for r in val_rollouts)
    line = metric_line(step, rng, validation=validates and not split)
    lines = [line]
    if split:
        line["validation"] = False
        if validates:
            scored = [r for r in val_rollouts if r["reward"] is not None]
            lines.append({"step": step, "validation": True, "time": line["time"],
                          "val/reward_mean": sum(r["reward"] for r in scored) / max(1, len(scored)),
                          "val/reward/math": sum(r["components"]["math"] for r in scored) / max(1, len(scored)),
                          "val/rollouts": len(val_rollouts), "val/unscorable": len(val_rollouts) - len(scored),
                          "val/tool_calls_per_rollout": sum(r["tool_calls"] for r in val_rollouts) / len(val_rollouts),
                          "verl": {"val-core/agentrl/reward/mean@1": 0.5}})
    with RunDir(run).metrics.open("a") as fh:
        fh.writelines(json.dumps(x) + "\n" for x in lines)
    with RunDir(run).training_log.open("a") as fh:
        fh.write(f"(TaskRunner pid=1) step:{step} - actor/loss:-0.3 critic/score/mean:0.4\n")


def save_checkpoint(run: Path, step: int) -> None:
    from agentrl.verl import checkpoints as layout

    hf = layout.hf_dir(RunDir(run).checkpoints, step)
    hf.mkdir(parents=True, exist_ok=True)
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"\0" * 4096)
    layout.mark_latest(RunDir(run).checkpoints, step)
    RunDir(run).checkpoint_status.write_text(json.dumps({"complete": True, "step": step, "path": str(hf.parent.parent),
                                                            "hf_model": str(hf), "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}))


def write_run(run: Path, steps: int, total: int | None = None, prompts: int = 4, samples: int = 4, pad: int = 0,
              save_every: int = 5, seed: int = 0, split: bool = False) -> Path:
    run = Path(run)
    write_config(run, total or steps, prompts, samples)
    with RunDir(run).training_log.open("a") as fh:
        fh.write(f"\n===== attempt 1 {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n")
    for step in range(1, steps + 1):
        append_step(run, step, prompts, samples, seed, pad, split=split)
        if save_every and step % save_every == 0:
            save_checkpoint(run, step)
    return run


def write_big_rollouts(path: Path, target_bytes: int, prompts: int = 16, samples: int = 16, pad: int = 6000,
                       seed: int = 0) -> tuple[int, int]:
    """A rollouts.jsonl of about ``target_bytes`` (steps of prompts*samples rollouts); returns (bytes, steps)."""
    rng = random.Random(seed)
    written, step = 0, 0
    with path.open("w") as fh:
        while written < target_bytes:
            lines = [json.dumps(rollout(step, p, s, rng, pad)) + "\n" for p in range(prompts) for s in range(samples)]
            block = "".join(lines)
            fh.write(block)
            written += len(block.encode())
            step += 1
    return written, step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--total", type=int, default=None)
    ap.add_argument("--target-mb", type=int, default=0, help="instead: write only a rollouts.jsonl of this size")
    args = ap.parse_args()
    run = Path(args.run_dir)
    if args.target_mb:
        run.mkdir(parents=True, exist_ok=True)
        write_config(run, 10**6, 16, 16)
        size, steps = write_big_rollouts(RunDir(run).rollouts, args.target_mb * 2**20)
        print(f"{RunDir(run).rollouts}: {size / 2**20:.0f} MiB, {steps} steps")
    else:
        write_run(run, args.steps, args.total)
        print(f"{run}: {args.steps} steps")


if __name__ == "__main__":
    main()
