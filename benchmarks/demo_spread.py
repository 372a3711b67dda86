"""The demo's learning figures as the spread of several fresh runs, and whether a fixed seed repeats them.

    for n in 1 2 3; do .venv/bin/agentrl train configs/demo.yaml agentrl.run_dir=runs/spread$n; done
    .venv/bin/python benchmarks/demo_spread.py runs/spread1 runs/spread2 runs/spread3

Per run: training reward over the first and the last 5 steps, validation reward (greedy, verl's validation) at
each validated step, tool calls per rollout at the first and last step. Then min / median / max over the runs,
and, for the validation before training and the first training step, how many prompt groups came out
identical in every run (the config fixes ``data.seed``, so every run draws the same prompts).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def metrics(run: Path) -> tuple[list[dict], dict[int, float]]:
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [m for m in lines if not m["validation"]], {m["step"]: m["val/reward_mean"] for m in lines if m["validation"]}


def groups(run: Path, step: int, validation: bool) -> dict[str, list]:
    from agentrl.rolloutfile import read_records

    out: dict[str, list] = {}
    for r in read_records(run / "rollouts.jsonl"):
        if r.step == step and bool(r.validation) == validation:
            out.setdefault(r.prompt_id, []).append((json.dumps(r.messages), r.reward))
    return {k: sorted(v) for k, v in out.items()}


def spread(name: str, values: list[float]) -> str:
    return (f"{name}: min {min(values):.3f}, median {statistics.median(values):.3f}, max {max(values):.3f} "
            f"(n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    runs = parser.parse_args().runs
    first, last, vals = [], [], {}
    for run in runs:
        train, val = metrics(run)
        first.append(statistics.fmean(m["reward_mean"] for m in train[:5]))
        last.append(statistics.fmean(m["reward_mean"] for m in train[-5:]))
        for step, value in val.items():
            vals.setdefault(step, []).append(value)
        print(f"{run}: training reward {first[-1]:.3f} (first 5 steps) -> {last[-1]:.3f} (last 5); validation "
              + ", ".join(f"{v:.3f} @ {s}" for s, v in sorted(val.items()))
              + f"; tool calls/rollout {train[0]['tool_calls_per_rollout']:.2f} -> {train[-1]['tool_calls_per_rollout']:.2f}")
    print(spread("training reward, first 5 steps", first))
    print(spread("training reward, last 5 steps", last))
    for step, values in sorted(vals.items()):
        print(spread(f"validation reward at step {step}", values))
    for step, validation in ((0, True), (1, False)):
        per_run = [groups(run, step, validation) for run in runs]
        same = sum(all(g.get(p) == per_run[0][p] for g in per_run[1:]) for p in per_run[0])
        print(f"step {step} {'validation' if validation else 'training'}: {same}/{len(per_run[0])} prompt groups "
              f"identical in every run; same prompts in every run: {all(set(g) == set(per_run[0]) for g in per_run)}")


if __name__ == "__main__":
    main()
