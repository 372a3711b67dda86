"""A pre-started worker. Run as `python -I -m agentrl.sandbox.zygote <kind> <uid> <network>`.

At start it enters its own mount, network, IPC and UTS namespaces, sets up what calls can see and write
(view.py: a private scratch tmpfs, hidden shared and home directories, the Landlock read allow-list),
imports the heavy modules once and measures the isolation it got. It then forks the template factory
(factory.py), which forks a template (template.py) for each set of declared read paths and each grader:
pid 1 of a fresh pid namespace, locked down once, forking one child per call. The zygote stays
privileged and trusted: it makes each call's pipes, sends the job to the template, reads the results with
caps, kills a template that overstays, mounts a fresh scratch tmpfs and replies to the host. When it cannot
give the next call a clean start it answers, then exits ("retires"), and the host starts another.
"""

from __future__ import annotations

import gc
import hashlib
import json
import marshal
import os
import socket
import sys
import time

from . import cgroup, harden
from . import template as template_mod
from .factory import Factory
from .isolation import enter
from .protocol import encode, read_msg, write_all
from .tplhandle import TemplateHandle, memfd as _memfd
from .view import FileView

RESULT_CAP = 1 << 20
TEMPLATES_MAX = 8   # one per distinct set of declared read paths; the least recently used goes first


class Zygote:
    def __init__(self, kind: str, uid: int, network: bool) -> None:
        self.kind, self.uid, self.network = kind, uid, network
        # The template runs as `uid`, its calls as `call_uid`: no call can change its template's limits,
        # priority or CPU set, signal it or see it in /proc.
        self.call_uid = uid + harden.CALL_UID_OFFSET if os.geteuid() == 0 else None
        self.report: dict[str, list] = {}
        self.fs = FileView(self.call_uid or uid, network, self.note)
        self.compiled: dict[tuple, object] = {}
        self.pidns_fd: int | None = None
        self.seccomp: bytes | None = None
        self.child_seccomp = b""
        self.templates: dict[tuple, TemplateHandle] = {}
        self.cg_base: str | None = None
        self.cg_count = 0
        self.host_fds: tuple[int, ...] = ()  # its pipes to the host, which the factory closes
        self.factory: Factory | None = None
        self.call_env: dict[str, str] = {}  # variables every call gets (a network grader's proxy)
        self.retire: str | None = None  # set when this worker can no longer give a clean start to a call
        self.off: tuple[str, ...] = ()  # measures a benchmark switched off (the report then says so)
        self.pid_reset = False  # templates rewind their pid namespace's counter before each call

    def note(self, key: str, ok: bool, reason: str) -> None:
        self.report[key] = [bool(ok), reason]

    # ------------------------------------------------------------ setup
    def setup(self) -> None:
        enter(self)  # namespaces, mounts, Landlock, seccomp, uids, cgroups: each measured into the report
        from .policy import preimport
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        self.preimported = preimport(self.kind == "grader_heavy") if self.kind.startswith("grader") else []
        import fcntl  # noqa: F401  (everything the child harness uses is imported before forking)
        import agentrl.trajectory  # noqa: F401
        from . import child, policy  # noqa: F401
        self.fs.base_read = self.fs.read_allowlist()
        self.fs.fresh_scratch()
        self.fs.ruleset(())  # the mounts every template needs are in place before the factory forks
        # Every template is forked by the factory, whose heap is this one's from before any call.
        self.factory = Factory(self._launch, pidns=self.pidns_fd is not None, close=self.host_fds)
        if self.kind == "code":  # model code's template, ready before the first call
            self.template(((), None), ())

    # ------------------------------------------------------------ templates
    def template(self, key: tuple, read_paths: tuple[str, ...]) -> "TemplateHandle":
        """The template for `key`: the declared read paths, and for graders the digest of the grader's
        source, so that no template ever holds another reward's code."""
        tpl = self.templates.pop(key, None)
        if tpl is None:
            while len(self.templates) >= TEMPLATES_MAX:
                self.templates.pop(next(iter(self.templates))).stop()
            tpl = self._start_template(read_paths)
        self.templates[key] = tpl  # most recently used last
        return tpl

    def _launch(self, sock_fd: int, ruleset_fd: int | None) -> None:
        """In a process the factory forked: become a template (never returns)."""
        template_mod.main(sock_fd, ruleset_fd, kind=self.kind, network=self.network,
                          uid=self.uid if os.geteuid() == 0 else None, call_uid=self.call_uid,
                          scratch=self.fs.scratch, seccomp=self.seccomp, env=self.call_env,
                          pidns=self.pidns_fd is not None, pid_reset=self.pid_reset,
                          child_seccomp=self.child_seccomp)

    def _start_template(self, read_paths: tuple[str, ...]) -> "TemplateHandle":
        self.fs.fresh_scratch()
        ruleset = self.fs.ruleset(read_paths)
        pid, sock, pidfd = self.factory.spawn(ruleset)
        tpl = TemplateHandle(pid, sock, pidfd)
        if self.cg_base is not None:
            self.cg_count += 1
            try:  # before its first call: every child it forks is counted there
                tpl.cgroup = cgroup.MemoryCgroup(self.cg_base, f"{os.getpid()}-{self.uid}-{self.cg_count}")
                tpl.cgroup.place_template(pid)
            except OSError as e:
                tpl.stop()
                raise OSError(e.errno, f"cannot put the sandbox template in a memory cgroup: {e}") from None
        return tpl

    # ------------------------------------------------------------ one call
    def run(self, req: dict, blobs: list[bytes], *, timeout: float, memory_mb: int, read_paths=(), env=None,
            stdin: bytes | None = None, out_cap: int = 0, err_cap: int = 0, nproc: int = 16, fsize_mb: int = 64,
            grader: tuple[str, bytes] | None = None, test: bytes | None = None) -> tuple[dict, list[bytes]]:
        """Send one job to the template for `read_paths`, which forks the child that runs it; read the
        child's result and output here, with caps. `grader`: (digest, source) of grader code."""
        declared = self.fs.declared(read_paths)
        key = (declared, grader[0] if grader is not None else None)
        for attempt in (1, 2):
            try:
                tpl = self.template(key, declared)  # the scratch dir was emptied after the last call
            except OSError as e:  # no clean template can be had (the factory is gone): retire this worker
                self.retire = f"cannot start a template: {e}"
                return {"error": self.retire, "cause": "worker_died"}, []
            try:
                pipes = self._dispatch(tpl, dict(req), blobs, timeout=timeout, memory_mb=memory_mb, env=env,
                                       stdin=stdin, out_cap=out_cap, err_cap=err_cap, nproc=nproc,
                                       fsize_mb=fsize_mb, grader=grader, test=test)
                break
            except OSError as e:  # the template died between calls (killed from outside): start another
                self.templates.pop(key, None)
                tpl.stop()
                if attempt == 2:
                    return {"error": f"sandbox template exited (it may have failed to lock itself down): {e}; set "
                                     "AGENTRL_SANDBOX_DEBUG=1 to see its error output", "cause": "internal"}, []
        status, got = self._collect(tpl, timeout, *pipes, out_cap, err_cap)
        if not tpl.alive:
            self.templates.pop(key, None)
        return status, got

    def _dispatch(self, tpl: "TemplateHandle", req: dict, blobs: list, *, timeout, memory_mb, env, stdin, out_cap, err_cap,
                  nproc, fsize_mb, grader, test=None) -> tuple:
        """Make the call's pipes and send the job with their write ends; returns the read ends."""
        r_res, w_res = os.pipe()
        # A /dev/null of this call's own: a description shared with other calls would carry what one call
        # sets on it (F_SETFL flags, F_SETSIG, F_SETOWN) to the next. Opening one costs about 2 us.
        null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        r_out, w_out = os.pipe() if out_cap else (None, null)
        r_err, w_err = os.pipe() if err_cap else (None, null)
        w_in = _memfd("stdin", stdin) if stdin else null
        # Everything that belongs to this call (its variables, its data, a test's nonce) travels in the job
        # memfd, which only the call's child reads: the template's heap never holds it.
        job = marshal.dumps({"env": dict(env or {}), "blobs": list(blobs), "nonce": req.pop("nonce", None)})
        fds = [w_in, w_out, w_err, w_res, _memfd("job", job)]
        req["job_len"] = len(job)
        if test is not None:
            fds.append(_memfd("test", test))
            req["test_len"] = len(test)
        need_py = False
        if grader is not None:
            digest, source = grader
            if digest not in tpl.known:  # the template compiles it once (it has no code of its own yet)
                if len(tpl.known) >= template_mod.CACHE_MAX:
                    tpl.known.clear()
                    req["flush"] = True
                src = marshal.dumps(source)
                fds.append(_memfd("source", src))
                req["src_len"] = len(src)
                need_py = True
            req["key"] = digest
        try:
            if tpl.cgroup is not None:
                tpl.cgroup.set_call_limit(memory_mb)
            move = tpl.cgroup is not None and "call_cgroup" not in self.off  # the child enters the calls' cgroup
            data = template_mod.pack(req, need_py=need_py, timeout=float(timeout), cpu_s=int(timeout) + 1,
                                     address_space=tpl.vm_size() + memory_mb * (1 << 20), fsize=fsize_mb << 20,
                                     nproc=nproc, cgroup=move)
            # the calls' cgroup.procs last (kept open by the cgroup, not closed below)
            socket.send_fds(tpl.sock, [data], fds + ([tpl.cgroup.procs_fd()] if move else []))
        except BaseException:
            for fd in (r_res, r_out, r_err):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            for fd in {*fds, null}:
                os.close(fd)
        if need_py:
            tpl.known.add(grader[0])
            tpl._vm = None  # read again at the next call, after this compile
            if tpl.cgroup is not None:
                tpl.cgroup.baseline = None
        return r_res, r_out, r_err

    def _collect(self, tpl: "TemplateHandle", timeout, r_res, r_out, r_err, out_cap, err_cap):
        start = time.monotonic()
        report, overflow, timed_out, bufs = tpl.collect(timeout, (r_res, r_out, r_err), (RESULT_CAP, out_cap, err_cap))
        for fd in (r_res, r_out, r_err):
            if fd is not None:
                os.close(fd)
        if self.pidns_fd is None and tpl.alive:
            tpl.kill_leftovers(self.call_uid, {t.pid for t in self.templates.values()})
        try:
            self.fs.fresh_scratch()
        except OSError as e:  # the next call could not start clean: this worker retires after replying
            self.retire = f"scratch reset failed: {e}"
        report = report or {}
        status = {"exit": report.get("exit"), "timed_out": bool(report.get("timed_out") or timed_out),
                  "overflow": overflow, "elapsed": time.monotonic() - start}
        if "error" in report:
            status["error"] = str(report["error"])[:300]
        if report.get("template_died") or timed_out:  # the sandbox failed, not the call: it is not scorable
            status["error"] = ("the sandbox template stopped answering and was killed" if timed_out else
                               "the sandbox template died during the call")
            status["cause"] = "killed"
        if status["exit"] != 0 and tpl.memory_killed():
            status["memory"] = True
        return status, [bytes(b) for b in bufs]

    # ------------------------------------------------------------ requests
    def handle(self, header: dict, blobs: list[bytes]):
        op = header.get("op")
        if op == "grade":
            source, payload = blobs[0].decode("utf-8", "replace"), blobs[1]
            filename = str(header.get("filename") or "grader.py")
            key = (filename, source)
            compiled = self.compiled.get(key)
            if compiled is None:
                from .policy import GraderSourceError, compile_grader
                try:
                    compile_grader(source, filename)
                    error = None
                except GraderSourceError as e:
                    error = str(e)
                digest = hashlib.sha256(f"{filename}\0{source}".encode("utf-8", "replace")).hexdigest()
                if len(self.compiled) > 256:
                    self.compiled.clear()
                compiled = self.compiled[key] = (digest, error)
            digest, error = compiled
            if error is not None:
                return {"compile_error": error}, []
            try:  # decoded here, where it costs no copy-on-write faults; the child reads it with marshal
                payload = json.loads(payload)
            except (ValueError, RecursionError, MemoryError):
                pass  # the child decodes the JSON itself and reports what is wrong with it
            return self.run({"op": "grade", "filename": filename, "reseed": "random" in source}, [payload], timeout=header["timeout"],
                            memory_mb=header["memory_mb"], read_paths=header.get("read_paths") or (),
                            env=header.get("env") or {}, grader=(digest, blobs[0]))
        if op == "test":
            req = {"op": "test", "mode": header["mode"], "nonce": header.get("nonce"), "reseed": b"random" in blobs[0]}
            test = None
            if header["mode"] == "assert":  # the test goes to the test's process only (child.run_assert_split)
                test = marshal.dumps({"test": blobs[1], "nonce": req.pop("nonce")})
                blobs = [blobs[0], b"", blobs[2]]
            return self.run(req, [blobs[0], blobs[1]], timeout=header["timeout"], memory_mb=header["memory_mb"],
                            stdin=blobs[2], out_cap=header["out_cap"], err_cap=8192, nproc=header.get("nproc", 16),
                            test=test)
        if op == "selftest":
            return self.run({"op": "selftest", "port": header.get("port"),
                             "private": [str(p) for p in header.get("private") or ()][:8]}, [], timeout=5, memory_mb=256,
                            err_cap=8192)
        if op == "ping":
            return {"pong": os.getpid()}, []
        return {"error": f"unknown op {op!r}"}, []


def main() -> None:
    kind, uid, network = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    ack = int(os.environ.get("AGENTRL_SANDBOX_ACK_FD", "-1"))  # the host's eventfd: one count per request read
    for fd in (proto_in, proto_out, ack):
        if fd >= 0:
            os.set_inheritable(fd, False)
    z = Zygote(kind, uid, network)
    z.host_fds = (proto_in, proto_out) + ((ack,) if ack >= 0 else ())
    try:
        z.setup()
        hello = {"ready": True, "report": z.report, "preimported": z.preimported, "pid": os.getpid()}
    except BaseException as e:  # noqa: BLE001
        hello = {"ready": False, "error": f"{type(e).__name__}: {e}", "report": z.report}
    write_all(proto_out, encode(hello))
    if not hello["ready"]:
        sys.exit(1)
    gc.freeze()  # keep the collector off the shared heap: fewer copy-on-write faults in children
    while True:
        try:
            header, blobs = read_msg(proto_in)
            if ack >= 0:  # before anything is done with it: a worker that dies with no count did nothing with it
                os.eventfd_write(ack, 1)
        except EOFError:  # the host closed the pipe: stop the templates and remove their cgroups
            for tpl in z.templates.values():
                tpl.stop()
            return
        try:
            reply = z.handle(header, blobs)
        except Exception as e:  # noqa: BLE001 - report, then retire: its state is no longer known to be clean
            z.retire = f"zygote: {type(e).__name__}: {e}"
            reply = ({"error": z.retire, "cause": "worker_died"}, [])
        if z.retire:  # the host restarts a worker that has exited; the reply above is still valid
            reply[0]["retired"] = z.retire
        reply[0]["id"] = header.get("id")  # the host believes only a reply that names its request
        write_all(proto_out, encode(*reply))
        if z.retire:
            for tpl in z.templates.values():
                tpl.stop()
            return


if __name__ == "__main__":
    main()
