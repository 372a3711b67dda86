"""CPU evaluation speed: the demo's validation set through the agent loop, batched vs one request at a time.

    .venv/bin/python benchmarks/bench_eval.py [--config configs/demo.yaml] [--model base] [--samples 1]

Runs the same rollouts (the config's val_data, greedy unless --samples > 1) twice with the transformers
engine: ``unbatched`` (max_batch 1: one generate() call at a time, the baseline) and ``batched``
(concurrent calls gathered for 5 ms and decoded as one padded batch with the KV cache). Prints seconds
for the rollouts (model load excluded), rollouts/s, batches and the speed-up. Share the machine's load
(`uptime`) beside any figure taken on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import time

from agentrl.workflow.local import LocalRunner, load_rows
from agentrl.workflow.models import load_settings, resolve_model


def measure(settings, model_path: str, rows: list[dict], samples: int, temperature: float, max_batch: int) -> dict:
    runner = LocalRunner(settings, model_path, engine="transformers", max_batch=max_batch)
    try:
        started = time.perf_counter()
        records = runner.run(rows, samples=samples, temperature=temperature)
        seconds = time.perf_counter() - started
        stats = runner.engine.stats()
    finally:
        runner.close()
    mean = sum(r.rollout.reward or 0.0 for r in records) / len(records)
    return {"seconds": seconds, "rollouts": len(records), "batches": stats["batches"], "reward": mean}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--model", default="base")
    ap.add_argument("--samples", type=int, default=1)
    args = ap.parse_args()
    settings = load_settings(args.config)
    model_path = resolve_model(args.model, settings)
    rows = load_rows(settings.val_data)
    temperature = 0.0 if args.samples == 1 else settings.temperature
    print(f"{len(rows)} prompts × {args.samples} from {settings.val_data}; model {args.model}; "
          f"load {os.getloadavg()[0]:.2f}")
    results = {}
    for name, max_batch in (("unbatched", 1), ("batched", 64)):
        r = results[name] = measure(settings, model_path, rows, args.samples, temperature, max_batch)
        print(f"{name:>10}: {r['seconds']:7.2f}s  {r['rollouts'] / r['seconds']:7.1f} rollouts/s  "
              f"{r['batches']:4d} batches  mean reward {r['reward']:.3f}")
    print(f"speed-up: {results['unbatched']['seconds'] / results['batched']['seconds']:.1f}x   "
          f"(load after: {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
