"""Seconds per step of the CPU demo, where a step's time goes, and how long a fresh and a resumed run take to start.

Runs `agentrl train configs/demo.yaml` for a few steps in a scratch run directory (it ends with a checkpoint),
then runs the same command again on that directory for a couple more steps: agentrl resumes from the checkpoint.
Reads metrics.jsonl and rollouts.jsonl and prints, per step and on average:
  step        verl's wall time for the step (less the checkpoint save, reported apart)
  gen         verl's generation phase; rollouts = the span from the first rollout's start to the last's end
  model       time in model compute: rollout sampling (the agent loop's waits on the server, a share of
              the rollout span), old/ref log-probs, the actor update, the weight sync
  outside     step - model: agent loop (templates, tool calls, parsing), rewards, trainer overhead
The first step is reported apart (it includes warm-up). Start-up, for the fresh run and the resumed one: from
verl's launch to the attempt's first rollout, and from the `agentrl train` command's own start (so agentrl's
pre-flight shows: config, data, tool-server check, before verl is launched). The fresh run then goes again as
the baseline, in the same invocation: verl's own 2 s replay-buffer poll (AGENTRL_REPLAY_POLL_S=2.0), its 8
reward-loop workers (reward.num_workers=8), its own request router (router_config_path=null) and its own
main_ppo, whose task runner is an actor process of its own (AGENTRL_TASK_RUNNER=actor).

    .venv/bin/python benchmarks/bench_train.py [--steps 6] [--resume-steps 2] [--keep DIR] [--no-baseline]
    .venv/bin/python benchmarks/bench_train.py --run runs/demo     # analyse a finished run instead

``--off-policy`` compares the synchronous trainer with ``agentrl.max_off_policy_steps=1`` on the demo with a
slow tool (the calculator answering ``--delay`` seconds late, 0.3 by default), in one invocation, sync first:
steady seconds per step (wall clock between step lines), the share of that time the trainer waits for
rollouts (verl's generation phase), the share no rollout is in flight (the rollout side idle), and the
reward of every step of both, so the async run is seen to learn too.

    .venv/bin/python benchmarks/bench_train.py --off-policy [--steps 10] [--delay 0.3] [--repeat 1]

With --rollouts, the demo trains once with each rollout, in this order, in one invocation, and a table puts them
side by side: start-up (command to first rollout), steady s/step, generation s/step, response tokens/s while
generating, and the peak resident memory of the whole process tree (agentrl, verl, Ray, vLLM; summed RSS, so
shared pages count more than once). verl's vLLM rollout needs the .venv-vllm environment (scripts/install.sh
--vllm), which also has the transformers rollout:

    .venv-vllm/bin/python benchmarks/bench_train.py --rollouts vllm,transformers [--steps 4]

``--config`` trains another config in those two modes, e.g. the real model (SmolLM2-135M on BFCL, whose
files the config's comment says how to make):

    .venv-vllm/bin/python benchmarks/bench_train.py --config configs/smollm2.yaml --rollouts vllm,transformers --steps 3

With --dtypes, the same table for the trainer's compute dtype (``agentrl.dtype``). Every mode first prints the CPU
kind (AVX-512 with native bf16, AVX2 with bf16 emulated) and the dtype ``auto`` chooses on it. On an AVX-512
machine, ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2`` makes it compute like an AVX2-only one:

    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 .venv/bin/python benchmarks/bench_train.py --dtypes float32,bfloat16

This file runs the trainings; benchmarks/train_report.py reads the run directories and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from agentrl import precision

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_report import (  # noqa: E402  (reading the runs and printing the tables)
    STARTS, analyse, attempt_launches, command_starts, compare_row, off_policy_figures, print_compare_table,
    print_off_policy, print_summary,
)

REPO = Path(__file__).resolve().parent.parent


# verl's own poll interval, and verl's own main_ppo, whose task runner is an actor process of its own
BASELINE = {"AGENTRL_REPLAY_POLL_S": "2.0", "AGENTRL_TASK_RUNNER": "actor"}
# verl's default reward-loop workers, and its own request router (a process importing verl)
BASELINE_OVERRIDES = ["reward.num_workers=8", "actor_rollout_ref.rollout.router_config_path=null"]


DEMO = REPO / "configs" / "demo.yaml"


def train(run: Path, steps: int, env: dict | None = None, extra: tuple = (), config: Path = DEMO) -> bool:
    """`agentrl train` of ``config`` on ``run`` up to ``steps`` (a run directory with a checkpoint resumes from
    it). A checkpoint is saved at the last step, so the run can be resumed."""
    cmd = [sys.executable, "-m", "agentrl.cli", "train", str(config), "--no-review",
           f"agentrl.max_steps={steps}", f"agentrl.save_every={steps}", "agentrl.val_data=null",
           f"agentrl.run_dir={run}", "agentrl.name=bench", *extra]
    print("running:", " ".join(cmd), " ".join(f"{k}={v}" for k, v in (env or {}).items()), flush=True)
    starts = command_starts(run)
    started = time.time()
    proc = subprocess.Popen(cmd, env={**os.environ, **(env or {})})
    peak = _watch_memory(proc)
    code = proc.returncode
    run.mkdir(parents=True, exist_ok=True)
    (run / "bench_peak_rss.json").write_text(json.dumps({"bytes": peak}))
    attempts = attempt_launches(run)
    if attempts:  # the attempt this command launched (none when it failed before launching verl)
        starts[str(attempts[-1][0])] = started
        (run / STARTS).write_text(json.dumps(starts))
    if code != 0:
        print("training failed; see", run / "training.log")
        return False
    return True


def _watch_memory(proc: subprocess.Popen, every: float = 0.5) -> int:
    """Wait for ``proc``; the largest summed RSS of it and all its descendants seen on the way."""
    import psutil

    peak = 0
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        total = 0
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
        for p in tree:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        peak = max(peak, total)
        time.sleep(every)
    return peak


def compare(folder: Path, setting: str, values: list[str], steps: int, config: Path = DEMO) -> int:
    """Train ``config`` once with each value of ``agentrl.<setting>`` and print them side by side."""
    rows = []
    for value in values:
        run = folder / value
        if not train(run, steps, extra=(f"agentrl.{setting}={value}",), config=config):
            return 1
        print(f"\n== {setting} {value}")
        rows.append(compare_row(run, value))
    print_compare_table(setting, rows)
    return 0


def off_policy(args, folder: Path) -> int:
    tool = ("agentrl.tools={calculator: {plugin: calculator, args: [-m, agentrl_calculator, --delay, "
            f"'{args.delay}']}}}}")
    results: dict[str, list[dict]] = defaultdict(list)
    for n in range(args.repeat):
        for name, extra in [("sync", ()), ("max_off_policy_steps=1", ("agentrl.max_off_policy_steps=1",))]:
            run = folder / f"{name.split('=')[0]}-{n}"
            if not train(run, args.steps, None, (tool, *extra)):
                return 1
            results[name].append(off_policy_figures(run))
    print_off_policy(results, args.delay, args.steps, args.repeat)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--off-policy", action="store_true",
                    help="compare sync with max_off_policy_steps=1 on the demo with a slow calculator")
    ap.add_argument("--delay", type=float, default=0.3, help="--off-policy: seconds each calculator call takes")
    ap.add_argument("--repeat", type=int, default=1, help="--off-policy: runs of each")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--resume-steps", type=int, default=2,
                    help="steps the resumed run trains past the first run's checkpoint (0: no resumed run)")
    ap.add_argument("--keep", help="folder for the run directories (kept afterwards)")
    ap.add_argument("--run", help="analyse this finished run directory instead of training")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the baseline run (verl's 2 s replay-buffer poll, 8 reward-loop workers, own router "
                         "and task-runner process)")
    ap.add_argument("--rollouts", help="compare rollouts instead, e.g. vllm,transformers (needs .venv-vllm for vllm)")
    ap.add_argument("--dtypes", help="compare the trainer's dtypes instead, e.g. float32,bfloat16 (agentrl.dtype)")
    ap.add_argument("--config", default=str(DEMO),
                    help="--rollouts, --dtypes: the config to train (default the demo), e.g. configs/smollm2.yaml")
    args = ap.parse_args()
    print(f"CPU: {precision.read_cpu().describe()}; agentrl.dtype auto trains in {precision.choose().dtype} here"
          + (f" (ONEDNN_MAX_CPU_ISA={os.environ['ONEDNN_MAX_CPU_ISA']})" if os.environ.get("ONEDNN_MAX_CPU_ISA") else "")
          + f"; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    if args.run:
        return 0 if analyse(Path(args.run)) else 1
    folder = Path(args.keep or tempfile.mkdtemp(prefix="agentrl-bench-"))
    if args.off_policy:
        return off_policy(args, folder)
    if args.rollouts:
        return compare(folder, "rollout", args.rollouts.split(","), args.steps, Path(args.config))
    if args.dtypes:
        return compare(folder, "dtype", args.dtypes.split(","), args.steps, Path(args.config))
    results = {}
    for name, env, extra in [("agentrl", None, ()), ("baseline", BASELINE, BASELINE_OVERRIDES)]:
        if name == "baseline" and args.no_baseline:
            continue
        run = folder / name
        if not train(run, args.steps, env, extra):
            return 1
        if name == "agentrl" and args.resume_steps > 0 and not train(run, args.steps + args.resume_steps, env, extra):
            return 1
        print(f"\n== {name}")
        results[name] = analyse(run)
    print_summary(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
