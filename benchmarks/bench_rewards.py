"""Reward benchmarks, printed in one run:

1. math preset vs plain math_verify on benchmarks/data/math_pairs.jsonl (labelled equivalent and
   non-equivalent answer pairs, grouped by category): accuracy, false accepts, false rejects, verdicts/s.
   math_verify runs twice: the prediction as written, and wrapped in $...$ when it has no $ or \\boxed
   (its LaTeX extractor needs delimiters). The "unseen" category was written after the preset had been
   tuned on the other categories, and the preset was not changed for it;
2. coding preset tests/s through agentrl.sandbox (skipped if the sandbox is unavailable).

    .venv/bin/python benchmarks/bench_rewards.py [--repeat 3] [--coding-samples 20]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections import defaultdict
from pathlib import Path

PAIRS = Path(__file__).parent / "data" / "math_pairs.jsonl"


def load_pairs() -> list[dict]:
    return [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]


def run_preset(pairs: list[dict]) -> tuple[list, float]:
    from agentrl.rewards import Unscorable, load_reward

    reward = load_reward("math")
    reward({"final_answer": "\\boxed{x^2}"}, {"metadata": {"expected_answer": "x*x"}})  # start the symbolic worker
    from agentrl.rewards import mathcheck

    if mathcheck._POOL is not None:
        mathcheck._POOL._cache.clear()  # every pass is timed cold, without earlier passes' answers
    verdicts, t0 = [], time.perf_counter()
    for p in pairs:
        try:
            score = reward({"final_answer": p["prediction"]}, {"metadata": {"expected_answer": p["gold"]}})
            verdicts.append(score == 1.0)
        except Unscorable:
            verdicts.append(None)
    return verdicts, time.perf_counter() - t0


def _dollars(text: str) -> str:
    return text if "$" in text or "\\boxed" in text else f"${text}$"


def run_math_verify(pairs: list[dict], wrap_prediction: bool = False) -> tuple[list, float]:
    """Plain math_verify: gold in $...$ (its recommended form), the prediction as written (or $-wrapped too)."""
    from math_verify import parse, verify
    from math_verify.parser import parse_expr_cached, parse_latex_cached

    logging.disable(logging.WARNING)
    parse_latex_cached.cache_clear()  # every pass is timed cold, as for the preset
    parse_expr_cached.cache_clear()
    verdicts, t0 = [], time.perf_counter()
    for p in pairs:
        pred = _dollars(p["prediction"]) if wrap_prediction else p["prediction"]
        try:
            verdicts.append(bool(verify(parse(_dollars(p["gold"])), parse(pred))))
        except Exception:
            verdicts.append(None)
    return verdicts, time.perf_counter() - t0


def report(pairs: list[dict], results: dict[str, tuple[list, float]]) -> None:
    names = list(results)
    by_cat: dict[str, list[int]] = defaultdict(list)
    for n, p in enumerate(pairs):
        by_cat[p["category"]].append(n)
    print(f"math: {len(pairs)} labelled pairs ({sum(p['equivalent'] for p in pairs)} equivalent) from {PAIRS}")
    print(f"{'category':<20}{'pairs':>6}" + "".join(f"{name:>18}" for name in names))
    for cat, idx in by_cat.items():
        cells = []
        for name in names:
            v = results[name][0]
            cells.append(f"{sum(v[i] == pairs[i]['equivalent'] for i in idx)}/{len(idx)}")
        print(f"{cat:<20}{len(idx):>6}" + "".join(f"{c:>18}" for c in cells))
    print("-" * (26 + 18 * len(names)))
    rows = {"accuracy": [], "false accepts": [], "false rejects": [], "errors/unscorable": [], "verdicts/s": []}
    for name in names:
        v, secs = results[name]
        rows["accuracy"].append(f"{sum(v[i] == p['equivalent'] for i, p in enumerate(pairs)) / len(pairs):.1%}")
        rows["false accepts"].append(str(sum(v[i] is True and not p["equivalent"] for i, p in enumerate(pairs))))
        rows["false rejects"].append(str(sum(v[i] is False and p["equivalent"] for i, p in enumerate(pairs))))
        rows["errors/unscorable"].append(str(sum(x is None for x in v)))
        rows["verdicts/s"].append(f"{len(pairs) / secs:,.0f}")
    for label, cells in rows.items():
        print(f"{label:<26}" + "".join(f"{c:>18}" for c in cells))


def bench_coding(samples: int) -> None:
    try:
        from agentrl.sandbox import get_sandbox

        get_sandbox().isolation_report()
    except Exception as exc:  # the sandbox is another module; say why it is skipped
        print(f"coding: skipped, sandbox unavailable ({type(exc).__name__}: {exc})")
        return
    from agentrl.rewards import load_reward

    tests = [{"type": "assert", "code": f"assert add({a}, {b}) == {a + b}"} for a, b in ((1, 2), (3, 4), (-1, 1))]
    tests.append({"type": "stdio", "stdin": "2 3\n", "expected_stdout": "5\n"})
    answer = ("```python\nimport sys\n\ndef add(a, b):\n    return a + b\n\nif __name__ == '__main__':\n"
              "    print(add(*map(int, sys.stdin.read().split())))\n```")
    reward = load_reward("coding", timeout=600)
    row = {"metadata": {"tests": tests}}
    reward({"final_answer": answer}, row)  # start the sandbox workers
    t0 = time.perf_counter()
    scores = [reward({"final_answer": answer}, row) for _ in range(samples)]
    secs = time.perf_counter() - t0
    print(f"coding: {samples} samples x {len(tests)} tests (3 assert, 1 stdio), all passed: {all(s == 1.0 for s in scores)}; "
          f"{samples * len(tests) / secs:.1f} tests/s, {samples / secs:.2f} samples/s (sequential, {os.cpu_count()} cores)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="passes over the pairs (caches cleared before each); "
                    "throughput is from the fastest, so a busy machine disturbs it less")
    ap.add_argument("--coding-samples", type=int, default=20)
    args = ap.parse_args()
    pairs = load_pairs()
    results = {}
    for name, fn in (("agentrl math", run_preset), ("math_verify", run_math_verify),
                     ("math_verify $..$", lambda ps: run_math_verify(ps, wrap_prediction=True))):
        runs = [fn(pairs) for _ in range(max(1, args.repeat))]
        results[name] = (runs[0][0], min(secs for _, secs in runs))
    report(pairs, results)
    print()
    bench_coding(args.coding_samples)


if __name__ == "__main__":
    main()
