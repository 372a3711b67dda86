"""Does per-turn credit learn faster? The demo's calculator task trained with each estimator, several runs each.

    .venv/bin/python benchmarks/bench_credit.py --runs 3 --out runs/credit            # 3 x episode, 3 x turn
    .venv/bin/python benchmarks/bench_credit.py --report runs/credit                  # the table again, no training

Each run is ``agentrl train configs/demo.yaml`` with ``agentrl.credit`` set to the method, its own seed (the same
seeds for every method, so run k of each method draws the same prompts) and the rewards math (1.0) plus tool_use in
its per-turn form (0.5: a turn whose call failed or did not parse is penalised). Per run it reads metrics.jsonl:
the first step whose training reward (mean over a window of steps) reaches ``--level``, and the held-out reward
(verl's validation on the demo's 64 held-out tasks) at the last validated step. Per method: min / median / max of
both over the runs, and how many runs never reached the level. Training is the real verl trainer on this machine;
a run of the default 40 steps takes minutes on an idle machine and much longer on a loaded one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REWARDS = "agentrl.rewards=[{name: math, weight: 1.0}, {name: tool_use, weight: 0.5, per_turn: true}]"
METHODS = {"episode": "agentrl.credit=episode", "turn": "agentrl.credit=turn",
           "step_group": "agentrl.credit=step_group"}


def train(run_dir: Path, method: str, seed: int, steps: int, extra: list[str]) -> int:
    cmd = [sys.executable, "-m", "agentrl.cli", "train", str(ROOT / "configs" / "demo.yaml"),
           f"agentrl.run_dir={run_dir}", f"agentrl.name=credit-{method}-{seed}", f"agentrl.seed={seed}",
           f"agentrl.max_steps={steps}", "agentrl.save_every=0", METHODS[method], REWARDS, *extra]
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode


def read(run: Path) -> tuple[list[float], list[tuple[int, float]]]:
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [m["reward_mean"] for m in lines if not m["validation"]]
    val = [(m["step"], m["val/reward_mean"]) for m in lines if m["validation"]]
    return train, val


def steps_to(level: float, rewards: list[float], window: int) -> int | None:
    """The first step (from 1) at which the mean training reward of the last ``window`` steps reaches ``level``."""
    for n in range(window, len(rewards) + 1):
        if statistics.fmean(rewards[n - window:n]) >= level:
            return n
    return None


def spread(values: list[float]) -> str:
    if not values:
        return "none"
    return f"min {min(values):.3f}, median {statistics.median(values):.3f}, max {max(values):.3f} (n={len(values)})"


def report(out: Path, level: float, window: int) -> dict:
    table: dict = {}
    for run in sorted(p for p in out.iterdir() if (p / "metrics.jsonl").is_file()):
        method = run.name.rsplit("-", 1)[0]
        train, val = read(run)
        reached = steps_to(level, train, window)
        final = val[-1][1] if val else None
        entry = table.setdefault(method, {"steps": [], "never": 0, "final": [], "runs": []})
        entry["runs"].append({"run": str(run), "steps": len(train), "steps_to_level": reached, "held_out": final})
        if reached is None:
            entry["never"] += 1
        else:
            entry["steps"].append(reached)
        if final is not None:
            entry["final"].append(final)
        print(f"{run.name}: {len(train)} steps, training reward {train[0]:.3f} -> {train[-1]:.3f}, "
              f"reached {level} at step {reached}, held-out {final}")
    for method, e in table.items():
        print(f"{method}: steps to a training reward of {level} ({window}-step mean): {spread(e['steps'])}, "
              f"never reached in {e['never']} of {len(e['runs'])}; held-out reward: {spread(e['final'])}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/credit"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--methods", default="episode,turn")
    parser.add_argument("--level", type=float, default=0.6, help="training reward level to reach")
    parser.add_argument("--window", type=int, default=3, help="steps averaged before comparing with --level")
    parser.add_argument("--report", type=Path, help="only print the table for the runs under this folder")
    parser.add_argument("extra", nargs="*", help="more overrides for every run (key=value)")
    args = parser.parse_args()
    if args.report:
        report(args.report, args.level, args.window)
        return
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"--methods: {unknown[0]!r} is not one of {', '.join(METHODS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in range(1, args.runs + 1):
        for method in methods:
            run = args.out / f"{method}-{seed}"
            if (run / "metrics.jsonl").is_file():
                print(f"{run}: already trained, kept")
                continue
            if train(run.resolve(), method, seed, args.steps, args.extra) != 0:
                sys.exit(f"{run}: agentrl train failed; its training.log says why")
    json.dump(report(args.out, args.level, args.window), (args.out / "credit_report.json").open("w"), indent=1)


if __name__ == "__main__":
    main()
