"""Which near misses does the math preset accept, and which did an earlier revision accept? A false-accept probe.

Every gold of the benchmark pair sets (the peers' held-out split left out) is mutated the ways a wrong answer
differs from a right one: a digit changed, a digit appended, a sign flipped, a letter renamed, a prime added.
Each mutation is scored against its gold by the preset of this tree and by the preset of ``--against`` (a git
revision, checked out to a temporary directory); the mutations accepted by this tree and not by the other
are listed for review (some mutations are still equal: 0.5 and 0.50, a renamed variable in x = 11).

    .venv/bin/python benchmarks/math_near_misses.py --against main
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"


def golds() -> list[str]:
    out = []
    for name in ("math_pairs.jsonl", "math_verify_cases.jsonl", "peer_suites.jsonl"):
        for line in (DATA / name).read_text().splitlines():
            row = json.loads(line)
            if row.get("split") != "heldout" and row["gold"] not in out and len(row["gold"]) < 120:
                out.append(row["gold"])
    return out


def mutations(gold: str) -> set[str]:
    out = set()
    digits = [m.start() for m in re.finditer(r"\d", gold)]
    if digits:
        i = digits[-1]
        out.add(gold[:i] + str((int(gold[i]) + 1) % 10) + gold[i + 1:])
        i = digits[0]
        out.add(gold[:i] + str((int(gold[i]) + 3) % 10) + gold[i + 1:])
    if "+" in gold:
        out.add(gold.replace("+", "-", 1))
    letters = [m.start() for m in re.finditer(r"(?<![\\a-zA-Z])[a-zA-Z](?![a-zA-Z])", gold)]
    if letters:
        i = letters[-1]
        out.add(gold[: i + 1] + "'" + gold[i + 1:])
        out.add(gold[:i] + ("y" if gold[i] != "y" else "z") + gold[i + 1:])
    out.add(gold.rstrip("$").rstrip() + "0" + ("$" if gold.endswith("$") else ""))
    out.discard(gold)
    return out


def accepted(tree: str) -> list[list[str]]:
    """Run in a child process with ``tree``'s agentrl and presets first on the path."""
    code = f"""
import importlib.util, json, logging, sys
sys.path.insert(0, {tree!r})
logging.disable(logging.WARNING)
import agentrl
spec = importlib.util.spec_from_file_location("agentrl.presets", {tree!r} + "/presets/__init__.py",
                                              submodule_search_locations=[{tree!r} + "/presets"])
presets = importlib.util.module_from_spec(spec)
sys.modules["agentrl.presets"] = agentrl.presets = presets
spec.loader.exec_module(presets)
sys.path.insert(0, {str(ROOT / "benchmarks")!r})
from math_near_misses import golds, mutations
from agentrl.rewards import Unscorable, load_reward
reward, out = load_reward("math"), []
for gold in golds():
    for pred in sorted(mutations(gold)):
        try:
            if reward({{"final_answer": pred}}, {{"metadata": {{"expected_answer": gold}}}}) == 1.0:
                out.append([gold, pred])
        except Unscorable:
            pass
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir())
    if done.returncode:
        raise SystemExit(f"the preset of {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="main", help="git revision to compare with (default: main)")
    args = ap.parse_args()
    n = sum(len(mutations(g)) for g in golds())
    with tempfile.TemporaryDirectory() as old:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.against, "agentrl", "presets"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
        before = {tuple(x) for x in accepted(old)}
    now = {tuple(x) for x in accepted(str(ROOT))}
    print(f"{len(golds())} golds, {n} near misses: this tree accepts {len(now)}, {args.against} accepted {len(before)}")
    print(f"accepted now and not by {args.against} ({len(now - before)}):")
    for gold, pred in sorted(now - before):
        print(f"  gold {gold[:70]!r}  answer {pred[:70]!r}")
    print(f"accepted by {args.against} and not now: {len(before - now)}")


if __name__ == "__main__":
    main()
