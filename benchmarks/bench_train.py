"""Seconds per step of the CPU demo, and where a step's time goes.

Runs `agentrl train configs/demo.yaml` for a few steps in a scratch run directory and reads its
metrics.jsonl and rollouts.jsonl. Prints, per step and on average:
  step        verl's wall time for the step
  gen         verl's generation phase; rollouts = the span from the first rollout's start to the last's end
  model       time in model compute: rollout sampling (the agent loop's waits on the server, a share of
              the rollout span), old/ref log-probs, the actor update, the weight sync
  outside     step - model: agent loop (templates, tool calls, parsing), rewards, trainer overhead
The first step is reported apart (it includes warm-up). Also the start-up: from verl's launch to the first
rollout. The same steps then run again as the baseline, in the same invocation: verl's own 2 s replay-buffer
poll (AGENTRL_REPLAY_POLL_S=2.0) and its 8 reward-loop workers (reward.num_workers=8).

    .venv/bin/python benchmarks/bench_train.py [--steps 6] [--keep DIR] [--no-baseline]
    .venv/bin/python benchmarks/bench_train.py --run runs/demo     # analyse a finished run instead
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


BASELINE = {"AGENTRL_REPLAY_POLL_S": "2.0"}  # verl's own poll interval
BASELINE_OVERRIDES = ["reward.num_workers=8"]  # verl's default reward-loop workers


def train(run: Path, steps: int, env: dict | None = None, extra: tuple = ()) -> bool:
    cmd = [sys.executable, "-m", "agentrl.cli", "train", str(REPO / "configs" / "demo.yaml"), "--no-review",
           f"agentrl.max_steps={steps}", "agentrl.save_every=0", "agentrl.val_data=null", f"agentrl.run_dir={run}",
           "agentrl.name=bench", *extra]
    print("running:", " ".join(cmd), " ".join(f"{k}={v}" for k, v in (env or {}).items()), flush=True)
    if subprocess.run(cmd, env={**os.environ, **(env or {})}).returncode != 0:
        print("training failed; see", run / "training.log")
        return False
    return True


def startup_seconds(run: Path) -> float | None:
    """From the start of the (first) verl attempt to the first rollout's start."""
    log = (run / "training.log").read_text(errors="replace")
    found = re.search(r"===== attempt \d+ (\S+ \S+) =====", log)
    rollouts = run / "rollouts.jsonl"
    if not found or not rollouts.exists():
        return None
    started = datetime.datetime.fromisoformat(found.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
    first = min(json.loads(line)["started_at"] for line in rollouts.open() if line.strip())
    return first - started


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--keep", help="folder for the run directories (kept afterwards)")
    ap.add_argument("--run", help="analyse this finished run directory instead of training")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the baseline run (verl's 2 s replay-buffer poll and its 8 reward-loop workers)")
    args = ap.parse_args()
    if args.run:
        return 0 if analyse(Path(args.run)) else 1
    folder = Path(args.keep or tempfile.mkdtemp(prefix="agentrl-bench-"))
    results = {}
    for name, env, extra in [("agentrl", None, ()), ("baseline", BASELINE, BASELINE_OVERRIDES)]:
        if name == "baseline" and args.no_baseline:
            continue
        run = folder / name
        if not train(run, args.steps, env, extra):
            return 1
        print(f"\n== {name}")
        results[name] = analyse(run)
    print("\n" + "  ".join(f"{k}: start-up {v[0]:.1f} s, {v[1]:.2f} s/step, {v[2]:.0f}% outside the model"
                           for k, v in results.items() if v))
    return 0


def analyse(run: Path) -> tuple[float, float, float] | None:
    """Per-step table for one run; returns (start-up s, steady s/step, % of a step outside the model)."""
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rollouts = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines() if line.strip()]
    by_step = defaultdict(list)
    for r in rollouts:
        if not r.get("validation"):
            by_step[r["step"]].append(r)
    rows = []
    for m in metrics:
        if m.get("validation"):
            continue
        v = m["verl"]
        rs = by_step.get(m["step"], [])  # each rollout names the trainer step it was drawn for
        step = v.get("timing_s/step", 0.0)
        gen = v.get("timing_s/gen", 0.0)
        # The rollouts of a step run concurrently: their span is the agent loop's wall time. Within it, the
        # share of each rollout's own time spent waiting on the model server is the model's share.
        if rs and "started_at" in rs[0]:
            span = max(r["finished_at"] for r in rs) - min(r["started_at"] for r in rs)
        else:
            span = gen
        wait_share = (sum(r.get("model_seconds", 0) for r in rs) / max(1e-9, sum(r["seconds"] for r in rs))) if rs else 1.0
        trainer_model = sum(v.get(k, 0.0) for k in ("timing_s/old_log_prob", "timing_s/ref", "timing_s/update_actor",
                                                    "timing_s/update_weights"))
        model = span * wait_share + trainer_model
        rows.append((m["step"], step, gen, span, model, step - model,
                     statistics.fmean(r.get("tool_seconds", 0) for r in rs) if rs else 0.0,
                     statistics.fmean(r.get("reward_seconds", 0) for r in rs) if rs else 0.0))
    print(f"\n{'step':>4} {'step_s':>7} {'gen_s':>7} {'rollouts_s':>10} {'model_s':>8} {'outside_s':>9} "
          f"{'tool_s/rollout':>15} {'reward_s/rollout':>17}")
    for row in rows:
        print(f"{row[0]:>4} {row[1]:7.2f} {row[2]:7.2f} {row[3]:10.2f} {row[4]:8.2f} {row[5]:9.2f} {row[6]:15.4f} "
              f"{row[7]:17.4f}")
    steady = rows[1:] or rows
    step_mean = statistics.fmean(r[1] for r in steady)
    outside = statistics.fmean(r[5] for r in steady)
    waiting = statistics.fmean(r[2] - r[3] for r in steady)
    print(f"\nsteady state ({len(steady)} steps): {step_mean:.2f} s/step; outside the model {outside:.2f} s "
          f"({100 * outside / step_mean:.0f}% of the step), of which {waiting:.2f} s is the generation phase "
          f"outlasting the rollouts (verl's replay-buffer polling)")
    startup = startup_seconds(run)
    print(f"start-up: {startup:.1f} s from verl's launch to the first rollout" if startup is not None else "start-up: n/a")
    print(f"run directory: {run}")
    return (startup or float("nan"), step_mean, 100 * outside / step_mean)


if __name__ == "__main__":
    sys.exit(main())
