"""The closing line of a suite run as several pytest processes (scripts/test.sh): each log's own summary, then
their sum as one line, ``all: N passed, N failed, N skipped``. Exits 1 if a log has no pytest summary (its
process died before the end), naming the log.

    python scripts/sum_tests.py main.log e2e.log vllm.log
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SUMMARY = re.compile(r"^=*\s*(?P<counts>(?:\d+ \w+(?:, )?)+) in [\d.]+s")
COUNT = re.compile(r"(\d+) (\w+)")


def counts(log: Path) -> dict[str, int] | None:
    for line in reversed(log.read_text(errors="replace").splitlines()):
        match = SUMMARY.match(line.strip())
        if match:
            return {kind: int(n) for n, kind in COUNT.findall(match["counts"])}
    return None


def main(paths: list[str]) -> int:
    total = {"passed": 0, "failed": 0, "skipped": 0}
    missing = []
    for path in paths:
        found = counts(Path(path))
        if found is None:
            missing.append(path)
            continue
        total["passed"] += found.get("passed", 0)
        total["failed"] += found.get("failed", 0) + found.get("error", 0) + found.get("errors", 0)
        total["skipped"] += found.get("skipped", 0)
    for path in missing:
        print(f"{path}: no pytest summary (the process ended before its end)")
    print(f"all: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
