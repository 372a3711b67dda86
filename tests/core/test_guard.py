"""The guard ties a process tree to agentrl: kill -9 of its parent stops every descendant, even ones that
left the process group and were orphaned, and the run lock stays taken until the last one is gone.
Real processes, real signals; a small shell tree stands in for verl and Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

from agentrl.ui.rundir import is_running  # the job page's check: some process holds the run's lock

# A "runner" that takes the lock, starts the guard over a tree whose grandchild leaves the session and
# ignores SIGTERM (as a stuck Ray worker might), then prints the tree's pids and sleeps.
RUNNER = textwrap.dedent("""
    import fcntl, subprocess, sys, time
    lock = open(sys.argv[1], "w")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    tree = ("import os, signal, subprocess, sys, time\\n"
            "subprocess.Popen([sys.executable, '-c', 'import os, signal, time; os.setsid(); "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\\n"
            "time.sleep(600)\\n")
    guard = subprocess.Popen([sys.executable, "-m", "agentrl.guard", "--lock-fd", str(lock.fileno()), "--",
                              sys.executable, "-c", tree], pass_fds=(lock.fileno(),))
    print(guard.pid, flush=True)
    time.sleep(600)
""")


def test_kill_9_of_the_parent_stops_the_whole_tree_and_then_frees_the_lock(tmp_path):
    lock = tmp_path / ".agentrl.lock"
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(lock)], stdout=subprocess.PIPE, text=True)
    guard = psutil.Process(int(runner.stdout.readline()))
    deadline = time.monotonic() + 20
    while len(guard.children(recursive=True)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    tree = [guard, *guard.children(recursive=True)]
    assert len(tree) == 3
    assert is_running(lock.parent)

    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    killed_at = time.monotonic()
    while True:
        held = is_running(lock.parent)  # read before the processes: one that ends after this read proves nothing
        if not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree):
            break
        assert held, "the lock was free while a process of the attempt lived"
        assert time.monotonic() - killed_at < 10, [p.cmdline() for p in tree if p.is_running()]
        time.sleep(0.1)
    assert not is_running(lock.parent)


# The guard's stop, inside a subreaper of its own, with a walk of /proc that misses the live tree at first,
# as a walk does when a parent exits in the middle of it and its child's pid was read before its own.
MISSED_WALK = textwrap.dedent("""
    import signal, subprocess, sys
    from agentrl import guard
    guard._prctl(guard.PR_SET_CHILD_SUBREAPER, 1)
    guard.FAST_GRACE = 0.5
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(600)"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    child.stdout.readline()
    walk, misses = guard._descendants, [[], []]
    guard._descendants = lambda: misses.pop() if misses else walk()  # the first two walks find nothing
    guard.stop_tree(child, grace=0.0)
    try:
        import os
        os.kill(child.pid, 0)
        print("left running", child.pid)
    except ProcessLookupError:
        print("all stopped")
""")


def test_the_stop_waits_for_a_process_the_walk_of_proc_missed():
    done = subprocess.run([sys.executable, "-c", MISSED_WALK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    left = done.stdout.split()
    if left[:2] == ["left", "running"]:
        os.kill(int(left[2]), signal.SIGKILL)
    assert done.stdout.strip() == "all stopped"
