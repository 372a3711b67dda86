"""Host side of the zygotes: start, talk to, time out and restart them.

A Worker owns one zygote process and serves one call at a time; a Pool hands workers to threads.
Grader workers and model-code workers are separate pools with separate uids, so model code never
runs in a process that has held dataset items (reference answers) in memory.
"""

from __future__ import annotations

import fcntl
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading


from .harden import CALL_UID_OFFSET  # noqa: F401  (a worker's calls: its uid + this)
from .protocol import MAX_BLOB, ProtocolError, encode, read_msg, write_all
from .results import SandboxError
from .view import package_dirs, within

STARTUP_TIMEOUT = 120.0
UID_BASE = 61000
POOL_SLOTS = 100    # workers a pool of one Sandbox can have
UID_BLOCK = 1000    # uids per Sandbox: its five pools
UID_BLOCKS = 1000   # Sandboxes that can live on one machine at once


class UidBlock:
    """A range of slot uids that no other live Sandbox on this machine uses. Several processes run a
    Sandbox each (verl's agent-loop workers); with shared uids they would share RLIMIT_NPROC, which the
    kernel counts per uid machine-wide, and a zygote without a pid namespace could take another
    sandbox's processes for its own call's leftovers. The claim is a flock on a file, so it ends with the
    process however that ends."""

    def __init__(self) -> None:
        folder = "/run/agentrl-sandbox" if os.geteuid() == 0 and os.path.isdir("/run") else \
            os.path.join(tempfile.gettempdir(), f"agentrl-sandbox-{os.geteuid()}")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        for n in range(UID_BLOCKS):
            fd = os.open(os.path.join(folder, f"uids-{n}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.fd: int | None = fd
            self.base = UID_BASE + n * UID_BLOCK
            return
        raise SandboxError(f"all {UID_BLOCKS} sandbox uid ranges are in use (locks in {folder}); close other "
                           "agentrl processes", "internal")

    def uid(self, kind_index: int, slot: int) -> int:
        return self.base + kind_index * 2 * POOL_SLOTS + slot  # its calls: + CALL_UID_OFFSET

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def private_dirs() -> list[str]:
    """This process's working directory and home, where datasets, checkpoints and keys usually are: the
    zygotes keep them unreadable even when they lie on sys.path, and the self-test tries to read them.
    Not when they lie inside the interpreter's or agentrl's own folders, which the sandbox must read."""
    ours = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, *package_dirs())]
    out = []
    for p in (os.getcwd(), os.path.expanduser("~")):
        p = os.path.realpath(p)
        if p != "/" and not any(within(p, q) for q in ours) and p not in out:
            out.append(p)
    return out


class Worker:
    def __init__(self, kind: str, uid: int, network: bool) -> None:
        self.kind, self.uid, self.network = kind, uid, network
        self.proc: subprocess.Popen | None = None
        self.hello: dict = {}
        self.seq = 0  # the id of the last request sent: every reply names the request it answers
        self.ack: int | None = None
        self.sent = 0

    def start(self) -> None:
        # LD_BIND_NOW: every library symbol is bound once in the zygote, so no call's child writes (and copies)
        # the pages of the symbol tables it would otherwise bind lazily: ~10 fewer page faults a call.
        env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LANG": "C.UTF-8",
               "LD_BIND_NOW": "1",
               "AGENTRL_SANDBOX_PRIVATE": os.pathsep.join(private_dirs())}
        for name in ("AGENTRL_SANDBOX_FORKSERVER",  # "python": run the templates' loop without the C part
                     "AGENTRL_SANDBOX_BENCH_OFF"):   # measures a benchmark switches off (the report says so)
            if os.environ.get(name):
                env[name] = os.environ[name]
        stderr = None if os.environ.get("AGENTRL_SANDBOX_DEBUG") else subprocess.DEVNULL
        # The zygote adds 1 to this eventfd for every request it has read, before it acts on it; the host reads
        # it only when a call fails (Worker._stop_unread), so a call costs one write and no read here.
        if self.ack is not None:  # a zygote that died by itself: its count is of no use now
            os.close(self.ack)
        self.ack = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.sent = 0  # requests written to this zygote
        env["AGENTRL_SANDBOX_ACK_FD"] = str(self.ack)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "agentrl.sandbox.zygote", self.kind, str(self.uid), "1" if self.network else "0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, close_fds=True, cwd="/",
            bufsize=0, pass_fds=(self.ack,))
        header, _ = self._read(STARTUP_TIMEOUT)
        if not header.get("ready"):
            self.stop()
            raise SandboxError(f"sandbox worker failed to start: {header.get('error')}", "internal")
        self.hello = header

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, graceful: bool = False) -> None:
        if self.proc is not None:
            if graceful:  # end of its input: it stops its templates and removes their cgroups
                try:
                    self.proc.stdin.close()
                    self.proc.wait(timeout=2)
                except Exception:  # noqa: BLE001
                    pass
            try:
                self.proc.kill()  # its children die too: they carry PR_SET_PDEATHSIG=SIGKILL
                self.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001
                pass
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except Exception:  # noqa: BLE001
                    pass
        if self.ack is not None:
            os.close(self.ack)
            self.ack = None
        self.proc = None

    def _read(self, timeout: float) -> tuple[dict, list[bytes]]:
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            raise TimeoutError
        # once the first byte is there the zygote writes the whole frame at once; bound it anyway
        return read_msg(fd)

    def call(self, header: dict, blobs: list[bytes], wall: float) -> tuple[dict, list[bytes]]:
        """Send one request and read its reply. Every reply carries the id of the request it answers; a
        reply to another request, or anything going wrong once the request may have been written (even an
        error of this side, such as an OverflowError), retires the worker: a reply left unread would
        otherwise be read by the next caller as its own.

        A request the worker provably never read is sent once more, to a fresh worker: the worker died and
        its count of requests read (an eventfd it adds 1 to after reading each request, before it acts on it)
        stops short of this one. That covers a zygote killed but not yet dead when the call was written (even
        one whose pipe read took the bytes in the kernel as it died) and a write that failed with EPIPE. A
        request it counted may have run (side effects, a second count) and is never resent."""
        for attempt in (1, 2):
            try:
                return self._call_once(header, blobs, wall)
            except _NeverRead:
                if attempt == 2:
                    raise SandboxError("sandbox worker died before it read the call, twice (a new worker too); "
                                       "it will be restarted", "worker_died") from None

    def _call_once(self, header: dict, blobs: list[bytes], wall: float) -> tuple[dict, list[bytes]]:
        if not self.alive():
            self.start()
        self.seq += 1
        frame = encode(dict(header, id=self.seq), blobs)  # an error here leaves nothing written
        self.sent += 1
        try:
            write_all(self.proc.stdin.fileno(), frame)
            status, got = self._read(wall)
        except TimeoutError:
            self.stop()
            raise SandboxError(f"sandbox worker gave no answer within {wall:.1f} s; it was killed and will be "
                               "restarted", "killed") from None
        except (EOFError, BrokenPipeError, OSError, ProtocolError, ValueError) as e:
            if self._stop_unread():
                raise _NeverRead from None
            raise SandboxError(f"sandbox worker died during the call ({type(e).__name__}); it will be restarted",
                               "worker_died") from None
        except BaseException:  # noqa: BLE001 - in doubt whether a reply is on its way: never reuse this worker
            self.stop()
            raise
        if status.get("id") != self.seq:
            self.stop()
            raise SandboxError(f"sandbox worker answered request {str(status.get('id'))[:20]} to request {self.seq}; "
                               "it was killed and will be restarted", "worker_died")
        del status["id"]
        if status.get("retired"):  # it answered, then exited: it could not give the next call a clean start
            self.stop()
        return status, got

    def _stop_unread(self) -> bool:
        """Stop the worker; whether, once it is dead, its count of requests read is short of the last one sent
        (a dead process counts no more)."""
        sent = self.sent
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
            try:
                read = os.eventfd_read(self.ack)
            except BlockingIOError:  # a count of 0
                read = 0
        except Exception:  # noqa: BLE001 - not provable: treat the request as read
            read = sent
        self.stop()
        return read == sent - 1


class _NeverRead(Exception):
    """The worker died and provably never read the request (Worker._stop_unread)."""


class Pool:
    def __init__(self, kind: str, kind_index: int, size: int, network: bool, uids: UidBlock) -> None:
        self.kind, self.network = kind, network
        self.workers = [Worker(kind, uids.uid(kind_index, i), network) for i in range(size)]
        self.idle: queue.Queue[Worker] = queue.Queue()
        for w in self.workers:
            self.idle.put(w)
        self._started = False
        self._lock = threading.Lock()

    def ensure_started(self) -> None:
        """Start all zygotes in parallel (each imports sympy etc. once)."""
        with self._lock:
            if self._started:
                return
            errors = []

            def start(w: Worker) -> None:
                try:
                    if not w.alive():
                        w.start()
                except Exception as e:  # noqa: BLE001
                    errors.append(e)
            threads = [threading.Thread(target=start, args=(w,)) for w in self.workers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors and len(errors) == len(self.workers):
                raise errors[0]
            self._started = True

    def call(self, header: dict, blobs: list[bytes], wall: float) -> tuple[dict, list[bytes]]:
        self.ensure_started()
        worker = self.idle.get()
        try:
            return worker.call(header, blobs, wall)
        finally:
            self.idle.put(worker)

    def any_hello(self) -> dict:
        self.ensure_started()
        worker = self.idle.get()
        try:
            if not worker.alive():
                worker.start()
            return worker.hello
        finally:
            self.idle.put(worker)

    def close(self) -> None:
        for w in self.workers:
            w.stop(graceful=True)


def blob_limit_ok(*blobs: bytes) -> None:
    for b in blobs:
        if len(b) > MAX_BLOB:
            raise SandboxError(f"input of {len(b)} bytes is over the {MAX_BLOB >> 20} MiB limit; pass less data",
                               "bad_input")


