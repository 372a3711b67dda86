"""A call a worker provably never read is sent again to a fresh worker; a call it read is never resent.
(The proof: the zygote counts every request it reads in an eventfd before it acts on it; see Worker.call.)

    kill -KILL <zygote>; sb.run_grader(...)   # the zygote is dying, not yet dead: the call still scores

Real zygotes, killed from outside with SIGKILL; the waits are on /proc (a process's state, a pipe's unread
bytes), never on sleeps.
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import threading

from agentrl.sandbox import SandboxError

from .conftest import NORMAL_GRADER, assert_still_works, calls_of, gone, wait_until

SAMPLE, ITEM = {"final_answer": "4"}, {"answer": "4"}


def _state(pid: int) -> str | None:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _unread(fd: int) -> int:
    """The bytes waiting in a pipe (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def _grade_in_thread(sb, source: str = NORMAL_GRADER, timeout: float = 10.0) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def call():
        try:
            out["value"] = sb.run_grader(source, "g.py", SAMPLE, ITEM, timeout=timeout)
        except SandboxError as e:
            out["error"] = e
    t = threading.Thread(target=call)
    t.start()
    return t, out


def test_a_call_written_to_a_worker_that_dies_before_reading_it_is_resent(sb):
    """The window of a zygote killed but not yet dead, held open: the zygote is stopped (it reads nothing),
    the call is written into its stdin pipe, then the zygote is SIGKILLed. Before, this was worker_died."""
    pool = sb._pool("grader")
    pool.ensure_started()
    zygotes = [w.proc.pid for w in pool.workers if w.alive()]
    for pid in zygotes:
        os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: all(_state(p) == "T" for p in zygotes), "the zygotes stopped")
    t, out = _grade_in_thread(sb)
    sent = wait_until(lambda: [w for w in pool.workers if w.alive() and _unread(w.proc.stdin.fileno()) > 0],
                      "the call written into a stopped zygote's stdin")
    assert len(sent) == 1
    for pid in zygotes:
        os.kill(pid, signal.SIGKILL)
    t.join()
    assert out == {"value": 1.0}, out  # scored by a fresh worker, not worker_died
    wait_until(lambda: gone(zygotes), "the killed zygotes gone")
    assert_still_works(sb)


def test_a_call_sent_at_once_after_sigkill_scores(sb):
    """SIGKILL and send at once, no wait: whichever of the three windows the call meets (the zygote still
    exiting with its stdin open, its stdin closed but not reaped, or already a zombie), it scores."""
    pool = sb._pool("grader")
    pool.ensure_started()
    for _ in range(3):
        zygotes = [w.proc.pid for w in pool.workers if w.alive()]
        for pid in zygotes:
            os.kill(pid, signal.SIGKILL)
        assert sb.run_grader(NORMAL_GRADER, "g.py", SAMPLE, ITEM) == 1.0
        wait_until(lambda: gone(zygotes), "the killed zygotes gone")  # none left over for the next round


def test_a_write_that_fails_with_epipe_is_resent(sb):
    """A worker whose stdin is closed but which has not been reaped (a stand-in process that closed its
    fd 0 and waits) fails the write with EPIPE having written nothing: the call goes to a fresh worker."""
    pool = sb._pool("grader")
    pool.ensure_started()
    closed = "import os, signal\nos.close(0)\nprint('closed', flush=True)\nsignal.pause()\n"
    for w in pool.workers:
        w.stop()
        w.proc = subprocess.Popen([sys.executable, "-c", closed], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  bufsize=0)
        w.ack, w.sent = os.eventfd(0, os.EFD_NONBLOCK), 0  # its count of requests read, as a zygote's: none
        assert w.proc.stdout.readline() == b"closed\n"
    stand_ins = [w.proc.pid for w in pool.workers]
    try:
        assert sb.run_grader(NORMAL_GRADER, "g.py", SAMPLE, ITEM) == 1.0
    finally:
        for w in pool.workers:
            if w.proc is not None and w.proc.pid in stand_ins:
                w.stop()
    assert_still_works(sb)


def test_a_call_the_worker_read_is_never_resent(sb, monkeypatch):
    """The call reached the worker (its template forked the grader, which loops) when the zygote is killed:
    it fails as worker_died, and no worker is started to run it again."""
    pool = sb._pool("grader")
    pool.ensure_started()
    t, out = _grade_in_thread(sb, "def grade(sample, item):\n    while True:\n        pass\n", timeout=30.0)
    wait_until(lambda: calls_of(pool), "the grader's call running in a template's child")
    started = []
    monkeypatch.setattr(type(pool.workers[0]), "start", lambda self: started.append(self))
    zygotes = [w.proc.pid for w in pool.workers if w.alive()]
    for pid in zygotes:
        os.kill(pid, signal.SIGKILL)
    t.join()
    assert "value" not in out and out["error"].cause == "worker_died", out
    assert started == []  # not resent: a resend needs a fresh worker
    monkeypatch.undo()
    wait_until(lambda: gone(zygotes), "the killed zygotes gone")
    assert_still_works(sb)
