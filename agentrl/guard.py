"""Ties verl's whole process tree to ``agentrl train``: when agentrl goes, for any reason, everything goes.

    python -m agentrl.guard --lock-fd 5 -- python -m agentrl.verl.main key=value ...

The runner starts this guard, which starts verl in a session of its own and becomes the *subreaper* of
everything below it: Ray's daemons and workers, tool servers and sandbox workers that outlive their
parents are re-parented to the guard, not to init, so the guard can always find and stop them. The guard
notices the runner's death itself (``PR_SET_PDEATHSIG``, and its parent pid changing), so ``kill -9`` of
agentrl stops verl, Ray and the tool servers within seconds. It holds the run directory's lock (an
inherited descriptor, also inherited by verl's main process) until the last process of the attempt has
exited, so a new ``agentrl train`` cannot start beside leftovers.

SIGINT or SIGTERM from the runner asks for a graceful stop (verl gets SIGINT and ``GRACE`` seconds);
the runner's death means a fast stop (SIGTERM, then SIGKILL after ``FAST_GRACE`` seconds).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

import psutil

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
FAST_GRACE = 4.0
# Ctrl-C: verl gets SIGINT and this long to stop by itself. verl's training loop does not stop on SIGINT
# (it trained on through whole steps and saved checkpoints while Ray shut down), so it is kept short; a
# checkpoint cut off half-written is ignored on resume (verl writes its tracker file last).
GRACE = 5.0


def _prctl(option: int, value: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _die_with_guard() -> None:  # in verl's main process, before exec
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _descendants() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _reap() -> bool:
    """Reap every child that has exited; True when no child is left. As the subreaper, this process is
    the parent of every live descendant whose own parent is gone, so no child left means no descendant
    left. That needs no walk of /proc, which can miss a live process: one whose parent exits in the middle
    of the walk is linked to nothing (pids wrap, so a child's pid can be read before its parent's)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False


def _signal_all(sig: int) -> None:
    for proc in _descendants():
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


def _wait_empty(seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _reap():
            return True
        time.sleep(0.1)
    return _reap()


def stop_tree(verl: subprocess.Popen, grace: float) -> None:
    """SIGINT to verl's process group and ``grace`` s for it to finish; then SIGTERM, then SIGKILL to every
    descendant, until none is left."""
    if grace > 0 and verl.poll() is None:
        try:
            os.killpg(verl.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        try:
            verl.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    _signal_all(signal.SIGTERM)
    if not _wait_empty(FAST_GRACE):
        while not _wait_empty(1.0):
            _signal_all(signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl.guard")
    parser.add_argument("--lock-fd", type=int, default=None)
    parser.add_argument("--grace", type=float, default=GRACE)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    parent = os.getppid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    requested: list[str] = []

    def ask(signum, _frame) -> None:
        requested.append("graceful" if signum == signal.SIGINT else "fast")

    signal.signal(signal.SIGINT, ask)
    signal.signal(signal.SIGTERM, ask)
    if os.getppid() != parent:  # the runner died before the death signal was armed
        return 1
    keep = (args.lock_fd,) if args.lock_fd is not None else ()
    verl = subprocess.Popen(command, start_new_session=True, pass_fds=keep, preexec_fn=_die_with_guard)
    code = None
    while code is None:
        code = verl.poll()
        if code is not None:
            break
        if os.getppid() != parent and "fast" not in requested:
            requested.append("fast")  # the runner is gone (kill -9 included)
        if requested:
            stop_tree(verl, grace=args.grace if requested[0] == "graceful" else 0.0)
            code = verl.poll()
            code = 130 if code is None or requested[0] == "graceful" else code
            break
        time.sleep(0.2)
    stop_tree(verl, grace=0.0)  # Ray's daemons and any straggler of the tree
    return code if code is not None else 1


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # exit at once: the inherited lock descriptor is released by the exit itself, so no moment exists in
    # which the lock is free and this process still runs
    os._exit(status)
