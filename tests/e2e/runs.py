"""What the e2e tests do to an `agentrl train` run from outside, as a user or a crash would: start it, wait for
a step, Ctrl-C or ``kill -9`` it, and watch what it leaves running. Shared by the e2e test files (pytest puts
this folder on sys.path); the demo build they train is the session's ``demo`` fixture in tests/conftest.py."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
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
    return after_kill(proc, tree, run, timeout)


def kill_tree_9(proc: subprocess.Popen, timeout: float = 60.0) -> dict:
    """``kill -9`` of every process of the attempt at once, ``proc`` and all it started (the OOM killer, a machine
    lost); then waits as :func:`kill_9` does. :func:`kill_9` kills ``proc`` alone, as a user would, and agentrl's
    guard then gives verl's processes a few seconds to stop, in which they may go on training."""
    import psutil

    tree = tree_of(proc.pid)
    for p in tree:
        try:
            p.kill()
        except psutil.Error:  # it ended meanwhile
            pass
    return after_kill(proc, tree, None, timeout)


def after_kill(proc: subprocess.Popen, tree: list, run: Path | None = None, timeout: float = 60.0) -> dict:
    """:func:`kill_9`'s wait, for a ``proc`` already sent SIGKILL with ``tree`` its processes read just before."""
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


def at_checkpoint(run: Path, step: int, act: Callable[[], object], proc: subprocess.Popen,
                  timeout: float = 900.0) -> object:
    """Call ``act`` (a signal to ``proc``) the moment verl's tracker under ``run``/checkpoints names ``step`` or a
    later one (verl writes it once that step's checkpoint folder is complete), and return what it returned: see
    :func:`when`."""
    return when(run, lambda: tracker_step(run) >= step, act, proc, f"checkpoint {step}", timeout)


def when(run: Path, ready: Callable[[], bool], act: Callable[[], object], proc: subprocess.Popen, what: str,
         timeout: float = 900.0) -> object:
    """Call ``act`` the moment ``ready()`` holds for the files of ``run``, and return what it returned.

    ``ready`` is asked on each inotify event under the folder above ``run`` (watchdog; that folder exists before
    the run does), so ``act`` runs on the watcher's thread within milliseconds of the write that made it true:
    never a poll interval later, when a fast next step may already have run. Raises as :func:`wait_for` does if
    ``proc`` ends first or ``timeout`` s pass (``what`` names the awaited moment)."""
    import warnings

    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer

    # a folder made with its subfolders at once (a checkpoint) has some watched twice, which watchdog reports as a
    # RuntimeWarning: nothing is lost (pytest restores the filters after the test)
    warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning, module="watchdog")
    done, lock, out = threading.Event(), threading.Lock(), {}

    def check(*_event) -> None:
        with lock:  # once, however many events arrive
            if not done.is_set() and ready():
                try:
                    out["value"] = act()
                except BaseException as exc:  # handed to the waiting test, not lost on the watcher's thread
                    out["error"] = exc
                done.set()

    handler = FileSystemEventHandler()
    handler.on_any_event = check
    observer = Observer()
    observer.schedule(handler, str(run.parent), recursive=True)
    observer.start()
    try:
        check()  # reached before the watch began
        deadline = time.monotonic() + timeout
        while not done.wait(1.0):  # the process's end is no file event: looked at each second
            if proc.poll() is not None:
                if not done.wait(1.0):  # an event of its last moment still being handled
                    raise AssertionError(f"agentrl exited with {proc.returncode} before {what}:\n"
                                         f"{proc.stdout.read() if proc.stdout else ''}")
            elif time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"no {what} within {timeout:.0f} s")
    finally:
        observer.stop()
        observer.join(10)
    if "error" in out:
        raise out["error"]
    return out.get("value")
