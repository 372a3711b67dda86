"""Where templates come from: a process the zygote forks once, before it handles any call.

    factory = Factory(launch, pidns=True)      # in the zygote, at the end of its set-up
    pid, sock, pidfd = factory.spawn(ruleset_fd)   # a new template (template.main), pid 1 of its pid namespace

A template is forked per set of declared read paths and per grader, and again when one is killed. Forked
from the zygote itself, it would inherit a heap that has held every earlier call's request (samples,
reference answers, tests, other rewards' sources and variables), freed but not wiped, and a call that can
read raw memory (model code; a grader that escapes RestrictedPython) could find them. The factory's heap
is a copy of the zygote's from before the first call; it only ever receives a Landlock ruleset fd, so
every template, the first or the hundredth, starts from that clean state.

The factory stays privileged (it has to lock templates down) and runs no untrusted code. It dies with
the zygote (parent-death signal) and its templates die with it. Templates are reaped by the kernel
(SIGCHLD ignored): the zygote watches each through the pidfd it is sent.
"""

from __future__ import annotations

import os
import signal
import socket
import struct

from . import harden

_PID = struct.Struct("<i")


class Factory:
    def __init__(self, launch, *, pidns: bool, close: tuple[int, ...] = ()) -> None:
        """`launch(sock_fd, ruleset_fd)`: runs a template in the forked process (never returns). `close`: the
        zygote's descriptors the factory must not hold (its pipes to the host)."""
        self.pid, self.sock = harden.fork_with_socket(lambda sock: _serve(sock, launch, pidns), close)

    def spawn(self, ruleset_fd: int | None) -> tuple[int, socket.socket, int]:
        """A new template: its pid (in the zygote's pid namespace), the zygote's end of its control socket
        and a pidfd. Raises OSError when the factory is gone."""
        socket.send_fds(self.sock, [b"R" if ruleset_fd is not None else b"N"],
                        [ruleset_fd] if ruleset_fd is not None else [])
        msg, fds, _, _ = socket.recv_fds(self.sock, 64, 2)
        if len(msg) != _PID.size or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            raise OSError(f"the template factory could not start a template ({msg[:200]!r})")
        (pid,) = _PID.unpack(msg)
        return pid, socket.socket(fileno=fds[0]), fds[1]

    def stop(self) -> None:
        try:
            self.sock.close()
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def _serve(sock: socket.socket, launch, pidns: bool) -> None:
    harden.prctl(harden.PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # templates are reaped by the kernel
    own_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC) if pidns else None
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 64, 1)
        if not msg:
            os._exit(0)  # the zygote is gone
        ruleset = fds[0] if fds else None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = -1
        try:
            if own_ns is not None:
                harden.unshare(harden.CLONE_NEWPID)  # the next fork is pid 1 of a new pid namespace
            try:
                pid = os.fork()
            finally:
                if own_ns is not None and pid != 0:
                    harden.setns(own_ns, harden.CLONE_NEWPID)
        except OSError as e:
            sock.send(f"fork: {e}".encode())
            for s in (ours, theirs):
                s.close()
            if ruleset is not None:
                os.close(ruleset)
            continue
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the template waits for its children
            sock.close()
            ours.close()
            launch(theirs.fileno(), ruleset)  # never returns
            os._exit(121)
        theirs.close()
        if ruleset is not None:
            os.close(ruleset)
        pidfd = os.pidfd_open(pid)
        socket.send_fds(sock, [_PID.pack(pid)], [ours.fileno(), pidfd])
        ours.close()
        os.close(pidfd)
