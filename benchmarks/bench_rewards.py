"""Reward benchmarks, printed in one run (the baselines measured in the same run):

1. math preset vs plain math_verify, accuracy and verdicts/s side by side, on three sets of labelled
   (gold, prediction, equivalent) pairs:
   - benchmarks/data/math_pairs.jsonl: the project's own pairs (currency, magnitude words, percent, units,
     prose...). The "unseen" category was written after the preset was tuned on the others, and the preset
     was not changed for it;
   - benchmarks/data/math_verify_cases.jsonl: 252 cases from math_verify's own published test suite
     (huggingface/Math-Verify at 5d148cfaaf99, tests/test_all.py, test_boxed.py, test_numina_cases.py,
     test_open_thoughts.py), extracted as data by benchmarks/data/extract_peer_cases.py (its docstring says how);
   - benchmarks/data/peer_suites.jsonl: 206 more cases from eleven peers' graders and tests (lighteval,
     NeMo-Skills, AReaL, Math-Verify's other tests, Qwen2.5-Math, simple-evals, slime, rllm, verifiers,
     open-r1, SkyRL), built by benchmarks/data/extract_peer_suites.py; reported as its tuning split and its
     held-out split (a fixed third the preset was never tuned on).
   math_verify runs as its README shows (``verify(parse(gold), parse(pred))``, gold in $...$) and with the
   extraction configs its own tests use (LaTeX with boxed first, then plain expressions). Every pass starts
   from cold caches (both sides); speed is the fastest of ``--repeat`` passes, so a busy machine disturbs it
   less, in wall time and in CPU time (the preset's own and its symbolic worker processes'; a shared machine
   stretches wall time, far less CPU time). Each verdict is one call, one after another, in this thread: no
   parallelism on either side;
2. coding preset tests/s through agentrl.sandbox (skipped if the sandbox is unavailable).

    flock /tmp/agentrl-heavy.lock .venv/bin/python benchmarks/bench_rewards.py [--repeat 3] [--coding-samples 20]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections import defaultdict
from pathlib import Path

DATA = Path(__file__).parent / "data"
SETS = {"project pairs": (DATA / "math_pairs.jsonl", None),
        "math_verify's test cases": (DATA / "math_verify_cases.jsonl", None),
        "peers' suites, tuning split": (DATA / "peer_suites.jsonl", "tune"),
        "peers' suites, held-out split (never tuned on)": (DATA / "peer_suites.jsonl", "heldout"),
        "peers' suites, both splits": (DATA / "peer_suites.jsonl", "all")}


def load_pairs(path: Path, split: str | None = None) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        if split is not None:
            row["category"] = row["source"].split("@")[0]  # peers' suites: one line per peer
    return [r for r in rows if split in (None, "all") or r.get("split") == split]


def _workers_cpu() -> dict[int, float]:
    """CPU seconds used so far by each idle symbolic worker process of the math preset (Linux /proc)."""
    from agentrl.rewards import mathsymbolic

    out = {}
    for proc in list(mathsymbolic._POOL._free) if mathsymbolic._POOL else []:
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[proc.pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return out


def run_preset(pairs: list[dict]) -> tuple[list, float, float]:
    from agentrl.rewards import Unscorable, load_reward
    from agentrl.rewards.mathcheck import clear_caches

    reward = load_reward("math")
    reward({"final_answer": "\\boxed{\\sum_{k=1}^{3} k}"}, {"metadata": {"expected_answer": "6"}})  # start the symbolic worker
    clear_caches()  # every pass is timed cold, without earlier passes' answers
    before = _workers_cpu()
    verdicts, t0, c0 = [], time.perf_counter(), time.process_time()
    for p in pairs:
        try:
            score = reward({"final_answer": p["prediction"]}, {"metadata": {"expected_answer": p["gold"]}})
            verdicts.append(score == 1.0)
        except Unscorable:
            verdicts.append(None)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    cpu += sum(secs - before.get(pid, 0.0) for pid, secs in _workers_cpu().items())  # and its child processes'
    return verdicts, wall, cpu


def _dollars(text: str) -> str:
    return text if "$" in text or "\\boxed" in text else f"${text}$"


def run_math_verify(pairs: list[dict], tests_configs: bool = False) -> tuple[list, float, float]:
    """Plain math_verify: its defaults with the gold in $...$, or the configs of its own test suite."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
    from math_verify.parser import parse_expr_cached, parse_latex_cached

    logging.disable(logging.WARNING)
    configs = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    parse_latex_cached.cache_clear()  # every pass is timed cold, as for the preset
    parse_expr_cached.cache_clear()
    verdicts, t0, c0 = [], time.perf_counter(), time.process_time()
    for p in pairs:
        try:
            if tests_configs:
                verdicts.append(bool(verify(parse(p["gold"], configs), parse(p["prediction"], configs))))
            else:
                verdicts.append(bool(verify(parse(_dollars(p["gold"])), parse(p["prediction"]))))
        except Exception:
            verdicts.append(None)
    return verdicts, time.perf_counter() - t0, time.process_time() - c0


SCORERS = (("agentrl math", run_preset), ("math_verify", run_math_verify),
           ("math_verify tests' cfg", lambda ps: run_math_verify(ps, tests_configs=True)))


def report(title: str, path: Path, pairs: list[dict], results: dict[str, tuple[list, float, float]],
           misses: bool = False) -> None:
    names = list(results)
    by_cat: dict[str, list[int]] = defaultdict(list)
    for n, p in enumerate(pairs):
        by_cat[p["category"]].append(n)
    print(f"math, {title}: {len(pairs)} labelled pairs ({sum(p['equivalent'] for p in pairs)} equivalent) "
          f"from {path.relative_to(DATA.parent.parent)}")
    print(f"{'category':<38}{'pairs':>6}" + "".join(f"{name:>24}" for name in names))
    for cat, idx in by_cat.items():
        cells = []
        for name in names:
            v = results[name][0]
            cells.append(f"{sum(v[i] == pairs[i]['equivalent'] for i in idx)}/{len(idx)}")
        print(f"{cat[:37]:<38}{len(idx):>6}" + "".join(f"{c:>24}" for c in cells))
    print("-" * (44 + 24 * len(names)))
    ours, ours_cpu = results[names[0]][1], results[names[0]][2]
    rows = {"accuracy": [], "false accepts": [], "false rejects": [], "errors/unscorable": [], "verdicts/s": [],
            "agentrl math's speed / this column's": [], "CPU ms per verdict": [],
            "agentrl math's speed / this column's, CPU": []}
    for name in names:
        v, secs, cpu = results[name]
        right = sum(v[i] == p["equivalent"] for i, p in enumerate(pairs))
        rows["accuracy"].append(f"{right}/{len(pairs)} {right / len(pairs):.1%}")
        rows["false accepts"].append(str(sum(v[i] is True and not p["equivalent"] for i, p in enumerate(pairs))))
        rows["false rejects"].append(str(sum(v[i] is False and p["equivalent"] for i, p in enumerate(pairs))))
        rows["errors/unscorable"].append(str(sum(x is None for x in v)))
        rows["verdicts/s"].append(f"{len(pairs) / secs:,.0f}")
        rows["agentrl math's speed / this column's"].append(f"{secs / ours:.2f}x")
        rows["CPU ms per verdict"].append(f"{1000 * cpu / len(pairs):.2f}")
        rows["agentrl math's speed / this column's, CPU"].append(f"{cpu / ours_cpu:.2f}x")
    for label, cells in rows.items():
        print(f"{label:<44}" + "".join(f"{c:>24}" for c in cells))
    if misses:
        for i, p in enumerate(pairs):
            if results[names[0]][0][i] != p["equivalent"]:
                print(f"  {names[0]} wrong ({results[names[0]][0][i]}, expected {p['equivalent']}): "
                      f"gold {p['gold'][:80]!r} | prediction {p['prediction'][-120:]!r}")
    print()


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
                    "throughput is from the fastest")
    ap.add_argument("--coding-samples", type=int, default=20)
    ap.add_argument("--no-coding", action="store_true", help="only the math benchmark")
    ap.add_argument("--sets", default="", help="only the pair sets whose title contains one of these words "
                    "(comma-separated), e.g. 'peers'")
    ap.add_argument("--misses", action="store_true", help="list the pairs agentrl math gets wrong")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"on {os.cpu_count()} cores\n")
    wanted = [w for w in args.sets.split(",") if w]
    for title, (path, split) in SETS.items():
        if wanted and not any(w in title for w in wanted):
            continue
        pairs = load_pairs(path, split)
        results = {}
        for name, fn in SCORERS:
            runs = [fn(pairs) for _ in range(max(1, args.repeat))]
            results[name] = (runs[0][0], min(r[1] for r in runs), min(r[2] for r in runs))
        report(title, path, pairs, results, args.misses)
    if not args.no_coding:
        bench_coding(args.coding_samples)


if __name__ == "__main__":
    main()
