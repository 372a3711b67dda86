"""What the e2e tests do to an `agentrl train` run from outside, as a user or a crash would: start it, wait for
a step, Ctrl-C or ``kill -9`` it, and watch what it leaves running. Shared by the e2e test files (pytest puts
this folder on sys.path); the demo build they train is the session's ``demo`` fixture in tests/conftest.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from agentrl.ui.rundir import is_running

AGENTRL = [sys.executable, "-m", "agentrl.cli"]


def wait_for(predicate, timeout: float, proc: subprocess.Popen, every: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"agentrl exited early with {proc.returncode}:\n{proc.stdout.read()}")
        time.sleep(every)
    proc.kill()
    raise AssertionError("timed out")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tree_of(pid: int) -> list:
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def alive(procs: list) -> list:
    import psutil

    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out


def commands(procs: list) -> list[list[str]]:
    """The command lines of those of ``procs`` still running (one that ends meanwhile is left out)."""
    import psutil

    out = []
    for p in alive(procs):
        try:
            out.append(p.cmdline())
        except psutil.Error:
            pass
    return out


def kill_9(proc: subprocess.Popen, run: Path | None = None, timeout: float = 60.0) -> dict:
    """``kill -9`` of ``proc`` (`agentrl train`, as a user's kill), then up to ``timeout`` s for everything it had
    started to end. Returns ``tree_size`` (its processes at the kill), ``seconds`` (until the last one ended),
    ``left`` (the command lines of what still ran then) and, given the ``run`` directory, ``lock_free_while``:
    what still ran when the run's lock was first seen free (the lock must outlive them all)."""
    tree = tree_of(proc.pid)
    proc.kill()
    proc.wait()
    killed_at = time.monotonic()
    free_while: list[list[str]] = []
    while time.monotonic() - killed_at < timeout:
        held = run is None or is_running(run)  # read before the processes: one that ends after this read proves nothing
        if not (left := alive(tree)):
            break
        if not held and not free_while:
            free_while = commands(left) or [["(ended meanwhile)"]]
        time.sleep(0.2)
    return {"tree_size": len(tree), "seconds": time.monotonic() - killed_at, "left": commands(tree),
            "lock_free_while": free_while}


def tracker_step(run: Path) -> int:
    from agentrl.verl.checkpoints import latest_step

    return latest_step(run / "checkpoints") or 0
