"""The zygote's handle on its template processes, and the small process helpers it uses.

    tpl = TemplateHandle(pid, sock, pidfd)   # from Factory.spawn
    report, overflow, timed_out, bufs = tpl.collect(timeout, (r_res, r_out, r_err), (RESULT_CAP, out_cap, err_cap))
    tpl.send_kill(); tpl.stop(); tpl.memory_killed(); tpl.kill_leftovers(call_uid, template_pids)
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import time

from . import cgroup
from . import template as template_mod
from .protocol import write_all

PAGE = os.sysconf("SC_PAGE_SIZE")
BACKSTOP_S = 3.0  # past a call's timeout, a template that has not reported is killed


class TemplateHandle:
    """The zygote's handle on one template process (template.py)."""

    def __init__(self, pid: int, sock: socket.socket, pidfd: int) -> None:
        self.pid, self.sock, self.pidfd = pid, sock, pidfd
        self.known: set[str] = set()  # digests of the grader sources this template has compiled
        self._vm: int | None = None
        self.cgroup: cgroup.MemoryCgroup | None = None
        self.oom_seen = 0
        self.alive = True

    def vm_size(self) -> int:
        """Its address space: a child starts with the same, and gets `memory_mb` on top. It grows only
        when the template compiles grader code, so it is read again after that."""
        if self._vm is None:
            with open(f"/proc/{self.pid}/statm", "rb") as f:
                self._vm = int(f.read().split()[0]) * PAGE
        return self._vm

    def send_kill(self) -> None:
        try:
            self.sock.send(template_mod.KILL)
        except OSError:
            self.kill()

    def kill(self) -> None:
        if self.alive:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except OSError:
                pass

    def reap(self) -> int:
        """Wait until the (dying) template is gone (the kernel reaps it: it is the factory's child)."""
        if not self.alive:
            return -9
        select.select([self.pidfd], [], [], 5.0)
        self.alive = False
        os.close(self.pidfd)
        self.sock.close()
        if self.cgroup is not None:
            self.cgroup.remove()  # empty now: the namespace's processes died with its init
        return -9

    def stop(self) -> int:
        self.kill()
        return self.reap()

    def collect(self, timeout: float, pipes: tuple, caps: tuple) -> tuple[dict | None, str | None, bool, list]:
        """Read one call's result, stdout and stderr pipes (`pipes`, None where not made) with their `caps`
        until the template reports and the pipes close. Past the cap of the result or stdout the template is
        asked to kill the child (`overflow` names which); stderr keeps its last bytes. A template that has
        not reported BACKSTOP_S past `timeout` is killed. Returns (report, overflow, timed_out, buffers);
        the report is None only if the template neither reported nor died (then `timed_out`)."""
        r_res, _, r_err = pipes
        backstop = time.monotonic() + timeout + BACKSTOP_S  # the template kills at `timeout`; this is if it does not
        index = {fd: i for i, fd in enumerate(pipes) if fd is not None}
        bufs = [bytearray() for _ in pipes]
        open_fds = list(index)
        sock_fd, pidfd = self.sock.fileno(), self.pidfd
        watched = set(open_fds) | {sock_fd, pidfd}
        poller = select.poll()
        for fd in watched:
            poller.register(fd, select.POLLIN)
        report, overflow, reported_at, timed_out = None, None, None, False
        while open_fds or report is None:
            now = time.monotonic()
            if report is None and now >= backstop and self.alive and not timed_out:
                timed_out = True
                self.kill()  # pid 1 of its namespace: everything in it dies too
            if reported_at is not None and now - reported_at > 1.0:
                break  # a descendant that escaped the sweep still holds a pipe: stop listening
            wait_s = 1.0 if reported_at is not None or timed_out else backstop - now
            for fd, _ in poller.poll(max(wait_s, 0.0) * 1000):
                if fd == sock_fd:
                    msg = self.sock.recv(template_mod.CTRL_MAX)
                    poller.unregister(fd)
                    watched.discard(fd)
                    if msg and report is None:
                        report = json.loads(msg)
                        reported_at = time.monotonic()
                    continue  # an empty read: the template is exiting, its pidfd will say so
                if fd == pidfd:
                    for w in (sock_fd, pidfd):
                        if w in watched:
                            poller.unregister(w)
                            watched.discard(w)
                    code = self.reap()
                    if report is None:
                        report = {"exit": code, "template_died": True}
                        reported_at = time.monotonic()
                    continue
                data = os.read(fd, 65536)
                if not data:
                    poller.unregister(fd)
                    open_fds.remove(fd)
                    continue
                buf, cap = bufs[index[fd]], caps[index[fd]]
                buf += data
                if fd == r_err:
                    del buf[:-cap]
                elif len(buf) > cap and not overflow:
                    overflow = "result" if fd == r_res else "stdout"
                    del buf[cap:]
                    self.send_kill()
                elif overflow:
                    del buf[cap:]
        return report, overflow, timed_out, bufs

    def memory_killed(self) -> bool:
        """Whether the cgroup's OOM killer ended one of the call's processes since the last check."""
        if self.cgroup is None:
            return False
        try:
            kills = self.cgroup.oom_kills()
        except OSError:
            return False
        seen, self.oom_seen = self.oom_seen, kills
        return kills > seen

    def kill_leftovers(self, call_uid: int, templates: set[int]) -> None:
        """Without a pid namespace the template kills only the call's process group: kill here whatever else
        the call left running (a process that called setsid), found by this template's memory cgroup or,
        without one, by the slot uid (``templates``: the pids of every template, never killed). The
        template reaps them before its next fork."""
        if self.cgroup is None and os.geteuid() != 0:
            return  # no way to tell a call's processes from the user's own: the isolation report says so
        keep = templates | {self.pid}
        for round_ in range(100):
            try:
                found = self.cgroup.pids() if self.cgroup is not None else uid_pids(call_uid)
            except OSError:
                return
            live = [p for p in found - keep if state(p) not in ("Z", "X", None)]
            if not live:
                return
            for pid in live:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if round_:
                time.sleep(0.001)


def state(pid: int) -> str | None:
    """The process's state letter from /proc (Z: exited, not yet reaped), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def uid_pids(uid: int) -> set[int]:
    """Every process whose real uid is `uid` (from /proc/PID/status: a process that changed uid is not
    dumpable, so its /proc directory belongs to root)."""
    out, want = set(), str(uid).encode()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status", "rb") as f:
                    line = next(x for x in f if x.startswith(b"Uid:"))
                if line.split()[1] == want:
                    out.add(int(name))
            except (OSError, StopIteration, IndexError):
                pass
    return out


def memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
