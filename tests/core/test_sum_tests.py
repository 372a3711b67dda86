"""scripts/sum_tests.py: the closing line of a suite run as several pytest processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sum_tests.py"


def run(*logs: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, logs)], capture_output=True, text=True)


def test_the_groups_add_up_and_errors_count_as_failures(tmp_path):
    (tmp_path / "a.log").write_text("....s.\n1827 passed, 1 skipped, 10 warnings in 1399.20s (0:23:19)\n")
    (tmp_path / "b.log").write_text("=== 2 failed, 7 passed, 1 error in 300.10s (0:05:00) ===\n")
    out = run(tmp_path / "a.log", tmp_path / "b.log")
    assert out.returncode == 0
    assert out.stdout.splitlines()[-1] == "all: 1834 passed, 3 failed, 1 skipped"


def test_a_group_that_died_before_its_summary_fails_the_sum(tmp_path):
    (tmp_path / "a.log").write_text("9 passed in 3.00s\n")
    (tmp_path / "dead.log").write_text("....\nKilled\n")
    out = run(tmp_path / "a.log", tmp_path / "dead.log")
    assert out.returncode == 1
    assert "dead.log: no pytest summary" in out.stdout
