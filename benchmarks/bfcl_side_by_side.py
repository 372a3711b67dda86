"""A model on BFCL, category by category: ``agentrl eval`` of each, then the same outputs scored by agentrl's
``bfcl_ast`` and by bfcl-eval's own runner, side by side (``agentrl_bfcl.runner``).

    python benchmarks/bfcl_side_by_side.py --config configs/smollm2.yaml --model models/smollm2-bfcl-warmup \\
        --limit 16 --from-row multiple=98 simple_python:heldout multiple parallel live_simple irrelevance
    # category                  rows  agentrl bfcl_ast  bfcl-eval runner     agree  eval s
    # simple_python               16             0.438             0.438     16/16    61.0

Each category is converted (``agentrl data convert --from bfcl``), its first ``--limit`` rows (after
``--from-row CATEGORY=N``'s first N are skipped: rows a warm-up saw) evaluated greedily, one category at a time,
with the wall time of that ``agentrl eval`` command; the eval files and bfcl-eval's result and score files stay in
``--work``. The exit status is 1 when the two scorers disagree on any row.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from agentrl_bfcl.runner import side_by_side


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("categories", nargs="+", help="BFCL categories, CATEGORY[:train|:heldout] as `--from bfcl` takes them")
    p.add_argument("--config", required=True, help="an agentrl config whose rewards include bfcl_ast")
    p.add_argument("--model", required=True, help="as `agentrl eval --model` takes it")
    p.add_argument("--limit", type=int, default=16, help="rows per category")
    p.add_argument("--from-row", action="append", default=[], metavar="CATEGORY=N",
                   help="skip the category's first N rows of bfcl-eval's file (e.g. those a warm-up trained on)")
    p.add_argument("--engine", default="transformers")
    p.add_argument("--work", default="bfcl_side_by_side", help="folder for data, eval files and bfcl-eval's files")
    args = p.parse_args(argv)
    skip = {k: int(v) for k, v in (s.split("=", 1) for s in args.from_row)}
    agentrl = str(Path(sys.executable).with_name("agentrl"))
    work = Path(args.work)
    (work / "data").mkdir(parents=True, exist_ok=True)
    evals, seconds = [], {}
    for spec in args.categories:
        category = spec.split(":")[0]
        data, out = work / "data" / f"{category}.jsonl", work / f"eval_{category}.jsonl"
        subprocess.run([agentrl, "data", "convert", "--from", "bfcl", spec, "-o", str(data)], check=True,
                       stdout=subprocess.DEVNULL)
        rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
        rows = [r for r in rows if int(str(r["id"]).split("_")[-1].split("-")[0]) >= skip.get(category, 0)]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows[: args.limit]), encoding="utf-8")
        started = time.perf_counter()
        subprocess.run([agentrl, "eval", args.config, "--model", args.model, "--data", str(data), "--engine",
                        args.engine, "-o", str(out)], check=True, stdout=subprocess.DEVNULL)
        seconds[category] = time.perf_counter() - started
        print(f"{category}: {len(rows[: args.limit])} rows evaluated in {seconds[category]:.1f} s", file=sys.stderr)
        evals.append(out)
    table = side_by_side(evals, work / "bfcl_eval")
    print(f"{'category':24s} {'rows':>5s} {'agentrl bfcl_ast':>17s} {'bfcl-eval runner':>17s} {'agree':>9s} {'eval s':>7s}")
    for t in table:
        note = f"  ({t.unscorable} unscorable)" if t.unscorable else ""
        print(f"{t.category:24s} {t.rows:5d} {t.agentrl:17.3f} {t.bfcl:17.3f} {f'{t.agree}/{t.rows}':>9s}"
              f" {seconds[t.category]:7.1f}{note}")
        for i, a, b in t.disagree:
            print(f"    disagree: {i} agentrl {a} runner {b}")
    return 0 if all(not t.disagree for t in table) else 1


if __name__ == "__main__":
    sys.exit(main())
