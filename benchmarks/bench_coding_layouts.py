"""The coding reward on other trainers' rows, printed in one run:

1. per layout, every row of tests/rewards/data/coding_peer_rows.jsonl (peers' published rows, each with a
   correct and a wrong solution) through `agentrl data convert`'s row conversion and the `coding` reward:
   the layout it was read in, its tests, and the two scores;
2. the cost per test of the imports each harness gives the code: all of them, as the peers' harnesses put
   them before every solution (the baseline), against only those that bind a name the code mentions (what
   agentrl runs), and no imports at all (agentrl's own layout), the same six call tests each time.

    .venv/bin/python benchmarks/bench_coding_layouts.py [--repeat 3] [--calls 20]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from pathlib import Path

ROWS = Path(__file__).parents[1] / "tests" / "rewards" / "data" / "coding_peer_rows.jsonl"
CODE = "def is_anagram(test, original):\n    return sorted(original.lower()) == sorted(test.lower())\n"
IO = {"fn_name": "is_anagram", "inputs": [["foefet", "toffee"], ["Buckethead", "DeathCubeK"], ["Twoo", "WooT"],
                                          ["dumble", "bumble"], ["ound", "round"], ["apple", "pale"]],
      "outputs": [[True], [True], [True], [False], [False], [False]]}


def table() -> None:
    from agentrl.rewards import load_reward
    from agentrl.rewards.codelayouts import read_suite
    from agentrl.workflow.convert import convert_row

    reward = load_reward("coding", timeout=300)
    by_layout = collections.defaultdict(list)
    for line in ROWS.open():
        case = json.loads(line)
        row = convert_row(case["row"])
        suite = read_suite(row["metadata"])
        item = {"messages": row["messages"], "metadata": row["metadata"]}
        scores = [reward({"final_answer": f"```python\n{case[k]}\n```"}, item) for k in ("correct", "wrong")]
        by_layout[suite.layout].append((case["name"], len(suite.tests), *scores))
    print("| layout | row | tests | correct | wrong |\n|---|---|---:|---:|---:|")
    for layout, rows in by_layout.items():
        for name, n, ok, bad in rows:
            print(f"| {layout} | {name} | {n} | {ok:.2f} | {bad:.2f} |")


def import_cost(repeat: int, calls: int) -> None:
    from agentrl.rewards.codecheck import pass_fraction
    from agentrl.rewards.codelayouts import read_suite

    fields = {
        "taco (APPS's imports)": {"input_output": json.dumps(IO)},
        "livecodebench (its star imports)": {"metadata": json.dumps({"func_name": "is_anagram"}),
                                             "public_test_cases": json.dumps([
                                                 {"input": "\n".join(json.dumps(a) for a in i),
                                                  "output": json.dumps(o[0]), "testtype": "functional"}
                                                 for i, o in zip(IO["inputs"], IO["outputs"])])},
        "deepcoder (rLLM's imports)": {"tests": json.dumps(IO)},
    }
    plain = read_suite({"tests": [f"assert is_anagram(*{i!r}) == {o[0]!r}" for i, o in zip(IO["inputs"], IO["outputs"])]})

    def per_test(program: str, tests: list) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            assert pass_fraction(program, tests, 10.0) == 1.0
        return (time.perf_counter() - start) / (calls * len(tests)) * 1000

    print(f"\nms per test, {calls} calls of 6 tests, best of {repeat} (load {os.getloadavg()[0]:.1f} at start, "
          f"{os.cpu_count()} cores, shared machine)")
    print("| layout | all harness imports (baseline) | imports the code names | no imports |\n|---|---:|---:|---:|")
    base = min(per_test(CODE, plain.tests) for _ in range(repeat))
    for name, meta in fields.items():
        suite = read_suite(meta)
        full = min(per_test("\n".join([suite.prelude, CODE]), suite.tests) for _ in range(repeat))
        needed = min(per_test(suite.program(CODE), suite.tests) for _ in range(repeat))
        print(f"| {name} | {full:.1f} | {needed:.1f} | {base:.1f} |")
    print(f"(load {os.getloadavg()[0]:.1f} at the end)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    table()
    import_cost(args.repeat, args.calls)


if __name__ == "__main__":
    main()
