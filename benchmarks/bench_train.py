"""Seconds per step of the CPU demo, and where a step's time goes.

Runs `agentrl train configs/demo.yaml` for a few steps in a scratch run directory and reads its
metrics.jsonl and rollouts.jsonl. Prints, per step and on average:
  step        verl's wall time for the step
  gen         verl's generation phase; rollouts = the span from the first rollout's start to the last's end
  model       time in model compute: rollout sampling (the agent loop's waits on the server, a share of
              the rollout span), old/ref log-probs, the actor update, the weight sync
  outside     step - model: agent loop (templates, tool calls, parsing), rewards, trainer overhead
The first step is reported apart (it includes warm-up).

    .venv/bin/python benchmarks/bench_train.py [--steps 6] [--keep DIR]
    .venv/bin/python benchmarks/bench_train.py --run runs/demo     # analyse a finished run instead
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
    ap.add_argument("--run", help="analyse this finished run directory instead of training")
    args = ap.parse_args()
    if args.run:
        run = Path(args.run)
    else:
        run = Path(args.keep or tempfile.mkdtemp(prefix="agentrl-bench-")) / "run"
        cmd = [sys.executable, "-m", "agentrl.cli", "train", str(REPO / "configs" / "demo.yaml"),
               f"agentrl.max_steps={args.steps}", "agentrl.save_every=0", f"agentrl.run_dir={run}", "agentrl.name=bench"]
        print("running:", " ".join(cmd), flush=True)
        if subprocess.run(cmd).returncode != 0:
            print("training failed; see", run / "training.log")
            return 1
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
    print(f"run directory: {run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
