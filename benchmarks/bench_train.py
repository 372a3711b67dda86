"""Seconds per step of the CPU demo, and where a step's time goes.

Runs `agentrl train configs/demo.yaml` for a few steps in a scratch run directory and reads its
metrics.jsonl and rollouts.jsonl. Prints, per step and on average:
  step        verl's wall time for the step
  model       time in model compute: rollout sampling (the agent loop's waits on the server),
              old/ref log-probs, the actor update, the weight sync
  outside     step - model: agent loop (templates, tool calls, parsing), rewards, trainer overhead
The first step is reported apart (it includes warm-up).

    .venv/bin/python benchmarks/bench_train.py [--steps 6] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--keep", help="run directory to use (kept afterwards)")
    args = ap.parse_args()
    run = Path(args.keep or tempfile.mkdtemp(prefix="agentrl-bench-")) / "run"
    cmd = [sys.executable, "-m", "agentrl.cli", "train", str(REPO / "configs" / "demo.yaml"),
           f"agentrl.max_steps={args.steps}", "agentrl.save_every=0", f"agentrl.run_dir={run}", "agentrl.name=bench"]
    print("running:", " ".join(cmd), flush=True)
    if subprocess.run(cmd).returncode != 0:
        print("training failed; see", run / "training.log")
        return 1
    metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if l.strip()]
    rollouts = [json.loads(l) for l in (run / "rollouts.jsonl").read_text().splitlines() if l.strip()]
    by_step = defaultdict(list)
    for r in rollouts:
        if not r.get("validation"):
            by_step[r["step"]].append(r)
    rows = []
    for m in metrics:
        v = m["verl"]
        rs = by_step.get(m["step"] - 1, [])
        gen = v.get("timing_s/gen", 0.0)
        # rollouts run concurrently: the model's share of the generation phase is the share of
        # each rollout's own time that it spent waiting on the model
        wait_share = (sum(r.get("model_seconds", 0) for r in rs) / max(1e-9, sum(r["seconds"] for r in rs))) if rs else 1.0
        trainer_model = sum(v.get(k, 0.0) for k in ("timing_s/old_log_prob", "timing_s/ref", "timing_s/update_actor",
                                                    "timing_s/update_weights"))
        model = gen * wait_share + trainer_model
        step = v.get("timing_s/step", 0.0)
        rows.append((m["step"], step, gen, model, step - model,
                     statistics.fmean(r.get("tool_seconds", 0) for r in rs) if rs else 0.0,
                     statistics.fmean(r.get("reward_seconds", 0) for r in rs) if rs else 0.0))
    print(f"\n{'step':>4} {'step_s':>7} {'gen_s':>7} {'model_s':>8} {'outside_s':>9} {'tool_s/rollout':>15} {'reward_s/rollout':>17}")
    for row in rows:
        print(f"{row[0]:>4} {row[1]:7.2f} {row[2]:7.2f} {row[3]:8.2f} {row[4]:9.2f} {row[5]:15.4f} {row[6]:17.4f}")
    steady = rows[1:] or rows
    step_mean = statistics.fmean(r[1] for r in steady)
    outside = statistics.fmean(r[4] for r in steady)
    print(f"\nsteady state ({len(steady)} steps): {step_mean:.2f} s/step; outside the model {outside:.2f} s "
          f"({100 * outside / step_mean:.0f}% of the step)")
    print(f"run directory: {run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
