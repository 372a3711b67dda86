"""The per-call fast path: a locked-down process that forks one child per call.

The template factory (factory.py) forks a template per set of readable paths and per grader. The template locks itself down for good
(rlimit ceilings, `no_new_privs`, Landlock, the per-slot uid, the parent-death signal, an empty
environment, the seccomp filter), then serves calls over a SEQPACKET socket: each request is a small
JSON header plus the call's file descriptors (stdin, stdout, stderr, result pipe and a memfd holding the
job's blobs). Per call it forks a child that inherits the whole lock-down, so the child only moves its
descriptors into place, lowers the per-call limits and runs the job.

Why: on a virtual machine each page a forked process writes costs a copy-on-write fault of several
microseconds. Locking a child down from scratch (ctypes calls, the seccomp filter, environment and
signal handling) wrote about 300 pages per call; done once here, a call writes about a third of that.

Killing what a call leaves behind: the template is pid 1 of its own pid namespace, so after the child
exits (or is killed at its wall-time limit) `kill(-1, SIGKILL)` ends every other process in that
namespace, and the template reaps them all before it reports. Processes inside cannot signal the
template (the kernel drops signals to a namespace's init that it has no handler for), trace it
(seccomp) or read its memory (Landlock hides /proc). Payloads reach only the child: the template never
reads the blobs memfd, so no dataset item or test lives on in its heap for a later call to find.

The loop itself runs in C (_forkserver.c) when the extension is built, else in Python. Without the C
loop the child is forked with the C library's fork() called with the GIL held: the template is
single-threaded (fork copies only the calling thread), and skipping Python's at-fork hooks saves about
70 page faults a call. `random` is reseeded in the child when the code mentions it, which is what
those hooks would have done.
"""

from __future__ import annotations

import ctypes
import gc
import json
import marshal
import os
import resource
import select
import signal
import socket
import struct
import sys
import time
import traceback

from . import child, harden
from .callio import read_blobs
from .seccomp import seccomp_install

try:  # the C loop (_forkserver.c), built at install; without it the same loop runs in Python
    from . import _forkserver
except ImportError:  # pragma: no cover - depends on the build
    _forkserver = None

CTRL_MAX = 1 << 16
SOCK_FD = 3          # the template's end of the control socket, after lock-down
FD_FLOOR = 100       # received descriptors are moved above this before being placed at 0..4
BLOBS_FD = 4         # in the child: the memfd holding the job's blobs
TEST_FD = 5          # in the child of an opaque test: the memfd holding the test (see child.run_assert_split)
CACHE_MAX = 256
PID_RESET_FD = 9     # the template's handle on /proc/sys/kernel/ns_last_pid (closed in every child)
_PID_RESET = -1      # PID_RESET_FD once it is open, else -1
_MAPS = ""
_SCRATCH = "/"
_CALL_UID = 0  # the uid each child moves to (0: stay, as a template without root does)
_CHILD_SECCOMP = b""  # the filter each child adds (empty: none)
# A request: this fixed header, then a marshal-encoded dict for the Python side (written by the trusted
# zygote; marshal decodes with far fewer page writes than json). Same layout as struct req in _forkserver.c.
HEADER = struct.Struct("<IIIIQQQQ")
MAGIC, F_NEED_PY, F_KILL, F_CGROUP = 0x61726C31, 1, 2, 4  # F_CGROUP: the last fd is the calls' cgroup.procs
KILL = HEADER.pack(MAGIC, F_KILL, 0, 0, 0, 0, 0, 0)


def pack(req: dict, *, need_py: bool, timeout: float, cpu_s: int, address_space: int, fsize: int,
         nproc: int, cgroup: bool = False) -> bytes:
    flags = (F_NEED_PY if need_py else 0) | (F_CGROUP if cgroup else 0)
    head = HEADER.pack(MAGIC, flags, int(timeout * 1000), 0, cpu_s, address_space, fsize, nproc)
    return head + marshal.dumps(req)


# Read once, when the zygote imports this module: a template clears its environment before it serves.
_LOOP_CHOICE = os.environ.get("AGENTRL_SANDBOX_FORKSERVER", "")


def fast_path() -> str:
    """Which per-call loop templates run, for the isolation report."""
    if _forkserver is not None and _LOOP_CHOICE != "python":
        return "C"
    return "python"

_libc_fork = ctypes.PyDLL(None).fork
_libc_fork.restype = ctypes.c_int
_libc_fork.argtypes = []


def lock(sock_fd: int, ruleset_fd: int | None, *, uid: int | None, call_uid: int | None, scratch: str,
         seccomp: bytes | None, env: dict | None = None, pid_reset: bool = False) -> None:
    """Irreversibly confine the template. Order matters: Landlock needs root or no_new_privs, the uid
    drop must precede the parent-death signal (setuid clears it), seccomp comes last."""
    os.setsid()
    from . import results
    results.INSIDE = True
    import fcntl
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, FD_FLOOR) for fd in (sock_fd, ruleset_fd) if fd is not None]
    for target, fd in enumerate(high, SOCK_FD):
        os.dup2(fd, target)
    ruleset_fd = SOCK_FD + 1 if ruleset_fd is not None else None
    os.closerange(SOCK_FD + len(high), 1 << 16)  # the zygote's pipes, sockets, ruleset and overlay fds
    if pid_reset:  # opened before Landlock hides /proc; written before each fork (rewind_pids)
        global _PID_RESET
        fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_WRONLY)
        if fd != PID_RESET_FD:
            os.dup2(fd, PID_RESET_FD, inheritable=False)
            os.close(fd)
        _PID_RESET = PID_RESET_FD
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)
    # Ceilings shared by every call; CPU, address space, file size and processes are set per call.
    for res, value in ((resource.RLIMIT_NOFILE, 256), (resource.RLIMIT_CORE, 0), (resource.RLIMIT_MEMLOCK, 0),
                       (resource.RLIMIT_MSGQUEUE, 0)):
        resource.setrlimit(res, (value, value))
    harden.prctl(harden.PR_SET_NO_NEW_PRIVS, 1)
    global _MAPS
    with open("/proc/self/maps") as f:  # read while /proc is still visible (see Template.serve)
        _MAPS = f.read()
    if ruleset_fd is not None:
        harden.landlock_restrict(ruleset_fd)
        os.close(ruleset_fd)
    if uid is not None:
        if call_uid is not None:
            harden.drop_to_uid_keeping_setuid(uid, pid_reset=pid_reset)
            global _CALL_UID
            _CALL_UID = call_uid
        else:
            harden.drop_privileges(uid)
    harden.prctl(harden.PR_SET_PDEATHSIG, signal.SIGKILL)
    global _SCRATCH
    _SCRATCH = scratch
    os.chdir("/")  # each child enters the scratch mount of its own call (view.FileView.fresh_scratch)
    os.umask(0o077)
    os.environ.clear()
    os.environ.update({"HOME": scratch, "TMPDIR": scratch, **(env or {})})
    # As pid 1 of the namespace the template ignores every signal it has no handler for; children
    # inherit the defaults.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    if seccomp is not None:
        seccomp_install(seccomp)
    if _PID_RESET >= 0:
        rewind_pids()  # fails here, before any call, if the kernel refuses


def rewind_pids() -> None:
    """Make the next fork get pid 2, as the first call did: a call that forked and reaped N processes would
    otherwise tell the next call N through its own pid. Every earlier pid is free by now (the sweep)."""
    os.pwrite(_PID_RESET, b"1", 0)


class Template:
    def __init__(self, kind: str, network: bool, pidns: bool) -> None:
        self.kind, self.network, self.pidns = kind, network, pidns
        self.sock = socket.socket(fileno=SOCK_FD)
        self.cache: dict[str, tuple] = {}
        self.globals = None
        if kind.startswith("grader"):
            from .policy import grader_globals
            self.globals = grader_globals("grader.py", child.ENV.get, network)
        if not pidns:
            harden.prctl(PR_SET_CHILD_SUBREAPER, 1)

    def serve(self) -> None:
        gc.collect()
        gc.freeze()
        # Huge pages under the heap make each fork and exit cheaper (harden.collapse_to_huge_pages).
        harden.collapse_to_huge_pages(_MAPS)
        if fast_path() == "C":
            resume = False
            while True:
                what, data, fds = _forkserver.serve(SOCK_FD, self.pidns, resume, _CALL_UID, _PID_RESET,
                                                    _CHILD_SECCOMP)
                if what == "child":
                    self.run_child(marshal.loads(data))
                self.prepare(marshal.loads(data[HEADER.size:]), fds)
                del data, fds  # the request waits in C: no frame a child inherits holds it
                resume = True
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(self.sock, CTRL_MAX, 8)
            except InterruptedError:
                continue
            if not msg:
                os._exit(0)  # the zygote is gone
            if len(msg) < HEADER.size:
                continue
            magic, flags, timeout_ms, _, *limits = HEADER.unpack_from(msg)
            if magic != MAGIC or flags & F_KILL or len(fds) < 5:  # a stale kill, or a malformed request
                for fd in fds:
                    os.close(fd)
                continue
            if flags & F_NEED_PY:
                self.prepare(marshal.loads(msg[HEADER.size:]), fds)
            if not self.pidns:
                self.sweep()  # what the zygote killed after the last call (see TemplateHandle.kill_leftovers)
            try:
                if _PID_RESET >= 0:
                    rewind_pids()
            except OSError as e:
                for fd in fds:
                    os.close(fd)
                self.sock.send(json.dumps({"error": f"cannot rewind the pid counter: {e}"}).encode())
                continue
            pid = _libc_fork()
            if pid == 0:
                self.place(fds, limits, cgroup=bool(flags & F_CGROUP))
                self.run_child(marshal.loads(msg[HEADER.size:]))
            for fd in fds:
                os.close(fd)
            if pid < 0:
                report = {"error": f"fork failed: {os.strerror(ctypes.get_errno())}"}
            else:
                report = self.watch(pid, timeout_ms / 1000)
            self.sock.send(json.dumps(report).encode())

    def prepare(self, req: dict, fds: list[int]) -> None:
        """Compile grader code here, once per source; children reuse it."""
        if req.get("flush"):
            self.cache.clear()
        key = req.get("key")
        if key is not None and key not in self.cache and len(fds) > 5:
            from .policy import compile_grader
            source = read_blobs(fds[5], req["src_len"]).decode("utf-8", "replace")
            self.cache[key] = (compile_grader(source, req["filename"]), source)

    def place(self, fds: list[int], limits, cgroup: bool = False) -> None:
        """Python fallback of child_setup in _forkserver.c (`cgroup`: move into the calls' cgroup first)."""
        try:
            import fcntl
            if cgroup:
                fd = fds.pop()
                os.write(fd, b"0")
                os.close(fd)
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, FD_FLOOR) for fd in fds[:6]]
            for target, fd in enumerate(high):
                os.dup2(fd, target)
            os.closerange(len(high), 1 << 16)
            for res, value in zip((resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_FSIZE,
                                   resource.RLIMIT_NPROC), limits):
                resource.setrlimit(res, (value, value))
            if not self.pidns:
                os.setpgid(0, 0)
            if _CALL_UID:
                harden.become_call_uid(_CALL_UID)
            if _CHILD_SECCOMP:
                seccomp_install(_CHILD_SECCOMP)
        except BaseException:  # noqa: BLE001
            try:
                traceback.print_exc(file=sys.stderr)
            finally:
                os._exit(121)

    def run_child(self, req: dict) -> None:
        """In the forked child, descriptors and limits in place: run the job. Never returns."""
        try:
            os.chdir(_SCRATCH)
            if req.get("op") == "test" and req.get("mode") == "assert":
                child.run_assert_split(req["job_len"], req["test_len"])  # never returns
            try:
                os.close(TEST_FD)  # a grader's own source, sent with its first call
            except OSError:
                pass
            job = read_blobs(BLOBS_FD, req["job_len"])
            os.close(BLOBS_FD)
            env = job["env"]
            if env:
                child.ENV.update(env)
                os.environ.update(env)
            if req.get("reseed") and "random" in sys.modules:
                sys.modules["random"].seed()  # what Python's at-fork hook would have done
            req["nonce"] = job["nonce"]
            self.run_job(req, job["blobs"], self.cache.get(req.get("key")))
        except BaseException:  # noqa: BLE001
            try:
                traceback.print_exc(file=sys.stderr)
            finally:
                os._exit(121)
        os._exit(0)

    def run_job(self, req: dict, blobs: list, job) -> None:
        op = req["op"]
        if op == "grade":
            if job is None:
                raise RuntimeError("grader code was not sent to this template")
            code, source = job
            glb = self.globals
            glb["__file__"] = req["filename"]
            child.run_grader(code, req["filename"], source, blobs[0], self.network, glb)
        elif op == "test":
            child.use_stdio()
            code, arg = blobs[0].decode("utf-8", "replace"), blobs[1].decode("utf-8", "replace")
            mode = req["mode"]
            if mode == "stdio":
                child.run_stdio(code)
            elif mode == "probe":
                child.run_probe(code, arg)
            else:
                raise RuntimeError(f"unknown test mode {mode!r}")
        elif op == "selftest":
            child.self_test(req.get("port"), list(req.get("private") or ()))
        else:
            raise RuntimeError(f"unknown op {op!r}")

    def watch(self, pid: int, timeout: float) -> dict:
        """Wait for the child, killing it at its wall-time limit or when the zygote asks (output over
        its cap); then kill and reap everything else the call started."""
        pidfd = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.register(SOCK_FD, select.POLLIN)
        deadline = time.monotonic() + timeout
        timed_out = killed = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0 and not (timed_out or killed):
                timed_out = True
                os.kill(pid, signal.SIGKILL)
            events = poller.poll(None if (timed_out or killed) else max(left, 0.0) * 1000)
            if any(fd == pidfd for fd, _ in events):
                break
            for fd, _ in events:
                if fd == SOCK_FD:
                    msg = self.sock.recv(CTRL_MAX)
                    if not msg:
                        os.kill(pid, signal.SIGKILL)
                        os._exit(0)
                    if not killed:
                        killed = True
                        os.kill(pid, signal.SIGKILL)
        os.close(pidfd)
        if not self.pidns:
            try:
                os.killpg(pid, signal.SIGKILL)  # the group of the (zombie, not yet reaped) child
            except OSError:
                pass
        _, status = os.waitpid(pid, 0)
        self.sweep()
        return {"exit": os.waitstatus_to_exitcode(status), "timed_out": timed_out, "killed": killed}

    def sweep(self) -> None:
        if self.pidns:
            try:
                os.kill(-1, signal.SIGKILL)  # every process in this pid namespace but its init (us)
            except ProcessLookupError:
                return
            while True:
                try:
                    os.waitpid(-1, 0)
                except ChildProcessError:
                    return
        # Without a pid namespace: reap what was reparented to us and has died; a process that left the
        # child's process group survives (the isolation report says pid_ns: NO).
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return


PR_SET_CHILD_SUBREAPER = 36


def main(sock_fd: int, ruleset_fd: int | None, *, kind: str, network: bool, uid: int | None,
         call_uid: int | None, scratch: str, seccomp: bytes | None, pidns: bool, env: dict | None = None,
         pid_reset: bool = False, child_seccomp: bytes = b"") -> None:
    """Entry point in the process the zygote forked; never returns. `child_seccomp`: a filter each call's
    child adds to the template's (seccomp.child_seccomp_program)."""
    try:
        global _CHILD_SECCOMP
        _CHILD_SECCOMP = child_seccomp
        lock(sock_fd, ruleset_fd, uid=uid, call_uid=call_uid, scratch=scratch, seccomp=seccomp, env=env,
             pid_reset=pid_reset)
        Template(kind, network, pidns).serve()
    except BaseException:  # noqa: BLE001
        try:
            traceback.print_exc(file=sys.stderr)
        finally:
            os._exit(121)
    os._exit(0)
