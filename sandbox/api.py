"""The Sandbox object other modules call: run_grader, run_tests, isolation_report."""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from . import verdicts
from .policy import HEAVY, imported_modules
from .pool import POOL_SLOTS, Pool, UidBlock, blob_limit_ok, private_dirs
from .protocol import short
from . import results
from .results import Check, GraderCodeError, IsolationReport, SandboxError, TestVerdict

MAX_ABS_REWARD = 1e6
WEAK_ADVICE = ("the sandbox's isolation on this machine is weaker than model-written code requires (missing: {}). "
               "Run as root with CAP_SYS_ADMIN (namespaces) on a Linux kernel with Landlock, or accept the weaker "
               "isolation with AGENTRL_SANDBOX_ALLOW_WEAK=1")
GRACE_S = 5.0
MAX_TIMEOUT_S = 3600.0       # a call's wall-time limit: past an hour it is a mistake, not a setting
MIN_MEMORY_MB, MAX_MEMORY_MB = 16, 1 << 16


def check_limits(timeout, memory_mb, where: str = "the sandbox call") -> tuple[float, int]:
    """`timeout` (seconds) and `memory_mb` as a bounded float and int, or SandboxError (cause `bad_input`)
    naming `where`. Checked before anything is sent to a worker: a limit that cannot be represented (1e999,
    NaN) would otherwise fail on the host or in the worker after the request was written."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise SandboxError(f"{where}: timeout must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got "
                           f"{short(timeout, 60)}", "bad_input")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or not MIN_MEMORY_MB <= memory_mb <= MAX_MEMORY_MB:
        raise SandboxError(f"{where}: memory_mb must be a whole number of MiB in [{MIN_MEMORY_MB}, {MAX_MEMORY_MB}], "
                           f"got {short(memory_mb, 60)}", "bad_input")
    return float(timeout), memory_mb


class Sandbox:
    """Process-wide pools of pre-started forking workers. Thread-safe; use the `a*` methods from asyncio."""

    def __init__(self, size: int | None = None) -> None:
        """`size`: workers per pool; default AGENTRL_SANDBOX_WORKERS (`agentrl train` sets it for verl's
        processes), else the number of cores (at least 2)."""
        self.size = min(size or _workers_from_env() or max(2, os.cpu_count() or 2), POOL_SLOTS)
        self._pools: dict[tuple[str, bool], Pool] = {}
        self._uids: UidBlock | None = None  # claimed with the first pool, released by close()
        self._lock = threading.Lock()
        self._report: IsolationReport | None = None
        self._kinds: dict[str, str] = {}

    def _pool(self, kind: str, network: bool = False) -> Pool:
        with self._lock:
            key = (kind, network)
            if key not in self._pools:
                index = {("grader", False): 0, ("grader_heavy", False): 1, ("code", False): 2,
                         ("grader", True): 3, ("grader_heavy", True): 4}[key]
                if self._uids is None:
                    self._uids = UidBlock()
                self._pools[key] = Pool(kind, index, self.size, network, self._uids)
            return self._pools[key]

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()
            if self._uids is not None:  # after the zygotes and their templates are gone
                self._uids.release()
                self._uids = None

    # ------------------------------------------------------------ graders
    def run_grader(self, source: str, filename: str, sample: dict, item: dict, *, env: dict[str, str] | None = None,
                   read_paths=(), network: bool = False, timeout: float = 10.0, memory_mb: int = 512,
                   max_abs: float = MAX_ABS_REWARD) -> float | None:
        """Run `grade(sample, item)` from `source`; return a validated float, or None (not applicable)."""
        if not isinstance(source, str):
            raise GraderCodeError(f"{filename}: grader source must be str, got {type(source).__name__}", "compile")
        timeout, memory_mb = check_limits(timeout, memory_mb, str(filename))
        env = dict(env or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise SandboxError("env must map str to str", "bad_input")
        read_paths = [os.path.realpath(str(p)) for p in read_paths]
        try:
            # NaN and infinities pass as Python's json writes them (the child's json.loads reads them back):
            # a tool call's arguments are the model's text, and `{"x": NaN}` there is not the grader's fault.
            payload = json.dumps({"sample": sample, "item": item}).encode()
        except (TypeError, ValueError, RecursionError) as e:
            raise SandboxError(f"sample/item are not JSON-shaped ({type(e).__name__}: {str(e)[:200]}); "
                               "pass plain dicts, lists, str, numbers, bool, None", "bad_input") from None
        blob_limit_ok(payload)
        header = {"op": "grade", "filename": str(filename), "env": env, "read_paths": read_paths,
                  "timeout": float(timeout), "memory_mb": int(memory_mb)}
        kind = self._grader_kind(source)
        status, blobs = self._pool(kind, network).call(header, [source.encode("utf-8", "replace"), payload],
                                                           float(timeout) + GRACE_S)
        return _grader_value(status, blobs, filename, timeout, memory_mb, max_abs)

    def _grader_kind(self, source: str) -> str:
        kind = self._kinds.get(source)
        if kind is None:
            kind = "grader_heavy" if imported_modules(source) & HEAVY else "grader"
            if len(self._kinds) > 1024:
                self._kinds.clear()
            self._kinds[source] = kind
        return kind

    async def arun_grader(self, *args, **kwargs) -> float | None:
        return await asyncio.to_thread(self.run_grader, *args, **kwargs)

    # ------------------------------------------------------------ model code
    def run_tests(self, code: str, tests: list[dict], *, timeout_per_test: float = 5.0, memory_mb: int = 512,
                  max_output: int = 1 << 20, allow_weak: bool | None = None) -> list[TestVerdict]:
        """Run model-written `code` against each test in its own sandboxed process; verdicts are decided here.
        A test may carry `equal`, a trusted callable(got, expected) -> bool that replaces the default comparison
        of a stdio test's output or an `== literal` assert's value."""
        if not isinstance(code, str):
            raise SandboxError(f"code must be str, got {type(code).__name__}", "bad_input")
        timeout_per_test, memory_mb = check_limits(timeout_per_test, memory_mb, "run_tests")
        self.require_strong(allow_weak)
        pool = self._pool("code")
        plans = []
        for test in tests:  # plan all first: a malformed test is the caller's error, raised before running
            header, blobs, expected = verdicts.plan(test, max_output)
            header.update(op="test", timeout=float(timeout_per_test), memory_mb=int(memory_mb))
            blobs = [code.encode("utf-8", "replace")] + blobs
            blob_limit_ok(*blobs)
            plans.append((header, blobs, expected, test.get("equal")))

        def one(plan) -> TestVerdict:
            # A failure of the sandbox (a dead worker or template, a reset that failed) raises SandboxError:
            # the code was not judged, so it is unscorable, never a failed test.
            header, blobs, expected, equal = plan
            status, got = pool.call(header, blobs, float(timeout_per_test) + GRACE_S)
            if "error" in status:
                raise SandboxError(f"the sandbox could not run the test: {str(status['error'])[:300]}",
                                   str(status.get("cause") or "internal"))
            return verdicts.judge(header, status, got, expected, equal)

        if len(plans) <= 1:
            return [one(p) for p in plans]
        with ThreadPoolExecutor(min(len(plans), self.size)) as ex:  # tests run in parallel on the workers
            return list(ex.map(one, plans))

    async def arun_tests(self, *args, **kwargs) -> list[TestVerdict]:
        return await asyncio.to_thread(self.run_tests, *args, **kwargs)

    def require_strong(self, allow_weak: bool | None = None) -> None:
        """Raise SandboxError (cause `weak_isolation`) unless model-written code may run here: the isolation
        is strong, or the caller (`allow_weak`) or the environment (`AGENTRL_SANDBOX_ALLOW_WEAK=1`) opts in."""
        if allow_weak is None:
            allow_weak = os.environ.get("AGENTRL_SANDBOX_ALLOW_WEAK") == "1"
        report = self.isolation_report()
        if not report.strong and not allow_weak:
            raise SandboxError(f"refusing to run model-written code: {WEAK_ADVICE.format(', '.join(report.missing()))}"
                               " / allow_weak=True.\n" + report.summary(), "weak_isolation")

    # ------------------------------------------------------------ report
    def isolation_report(self) -> IsolationReport:
        """Setup results of a model-code worker, confirmed by a probe run inside a sandboxed child."""
        if self._report is not None:
            return self._report
        pool = self._pool("code")
        hello = pool.any_hello()
        checks = {k: Check(bool(v[0]), str(v[1])) for k, v in hello.get("report", {}).items()}
        status, blobs = pool.call({"op": "selftest", "private": private_dirs()}, [], 10.0)
        try:
            probe = json.loads(blobs[0]) if blobs and blobs[0] else {}
        except ValueError:
            probe = {}
        if not probe:
            checks["probe"] = Check(False, f"self-test child produced no report (exit {status.get('exit')})")
        else:
            def confirm(key: str, ok: bool, what: str) -> None:
                old = checks.get(key, Check(True, ""))
                checks[key] = Check(old.ok and ok, f"{old.reason}; probe: {what}" if old.reason else f"probe: {what}")
            confirm("uid_drop", probe.get("uid", 0) != 0, f"runs as uid {probe.get('uid')}")
            confirm("seccomp", probe.get("seccomp_mode") == 2, f"seccomp mode {probe.get('seccomp_mode')}")
            confirm("net_ns", not probe.get("network"), "connect to 127.0.0.1 " +
                    ("succeeded" if probe.get("network") else "failed"))
            leaks = [str(p) for p in probe.get("readable", ["?"])]
            confirm("landlock_fs", not leaks and probe.get("write_scratch") and not probe.get("write_outside"),
                    "readable: " + (", ".join(leaks) or "none of " + ", ".join(map(str, probe.get("probed", [])))) +
                    f"; write outside scratch {'possible' if probe.get('write_outside') else 'denied'}")
            confirm("pid_ns", probe.get("ppid") == 1, f"pid {probe.get('pid')}, parent pid {probe.get('ppid')}" +
                    (" (the template, init of the namespace)" if probe.get("ppid") == 1 else ""))
            confirm("env_empty", not probe.get("env"), f"variables seen: {probe.get('env') or 'none'}")
            checks["no_new_privs"] = Check(bool(probe.get("no_new_privs")), "prctl(PR_GET_NO_NEW_PRIVS)")
            checks["no_unshare"] = Check(not probe.get("unshare"), "unshare() from inside " +
                                         ("succeeded" if probe.get("unshare") else "denied"))
        self._report = IsolationReport(checks)
        return self._report


def _workers_from_env() -> int | None:
    raw = os.environ.get("AGENTRL_SANDBOX_WORKERS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise SandboxError(f"AGENTRL_SANDBOX_WORKERS must be a whole number of at least 1, got {raw!r}; fix or unset "
                           "it", "bad_input")
    return int(raw)


def _grader_value(status: dict, blobs: list[bytes], filename: str, timeout: float, memory_mb: int,
                  max_abs: float) -> float | None:
    if "compile_error" in status:
        raise GraderCodeError(str(status["compile_error"]), "compile")
    if "error" in status:
        raise SandboxError(f"{filename}: the sandbox could not run grade(): {str(status['error'])[:500]}",
                           str(status.get("cause") or "internal"))
    if status.get("timed_out"):
        raise SandboxError(f"{filename}: grade() ran past its {timeout:g} s wall-time limit and was killed", "timeout")
    if status.get("memory"):
        raise SandboxError(f"{filename}: grade() ran out of memory ({memory_mb} MiB limit)", "memory")
    raw = blobs[0] if blobs else b""
    try:
        obj = json.loads(raw) if raw else None
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict) or len(obj) != 1:
        code = status.get("exit")
        if isinstance(code, int) and code < 0:
            what = "CPU time limit" if -code in (9, 24) and status.get("elapsed", 0) >= timeout * 0.5 else f"signal {-code}"
            raise SandboxError(f"{filename}: the grader process was killed ({what})",
                               "timeout" if what == "CPU time limit" else "killed")
        if code == 121:
            raise SandboxError(f"{filename}: the sandbox could not lock the grader process down; see "
                               "isolation_report()", "internal")
        raise SandboxError(f"{filename}: the grader process ended without a valid result (exit {code}, "
                           f"{len(raw)} result bytes)", "invalid_result")
    (key, value), = obj.items()
    if key == "grader_error":
        raise GraderCodeError(f"{filename}: grade() raised:\n{str(value)[:4000]}", "exception")
    if key == "memory":
        raise SandboxError(f"{filename}: grade() ran out of memory ({memory_mb} MiB limit)", "memory")
    if key == "input_error":
        raise SandboxError(f"sample/item could not be loaded in the sandbox: {str(value)[:300]}", "bad_input")
    if key == "none" and value is True:
        return None
    try:
        if key == "bool" and type(value) is bool:
            number = 1.0 if value else 0.0
        elif key == "int" and isinstance(value, str) and len(value) < 400:
            number = float(int(value))
        elif key == "float" and isinstance(value, str) and len(value) < 64:
            number = float.fromhex(value)
        elif key == "bad":
            raise SandboxError(f"{filename}: grade() returned {short(value, 80)}; return a float (or int/bool), "
                               "or None when the item does not apply", "invalid_result")
        else:
            raise ValueError
    except (ValueError, OverflowError, TypeError):
        raise SandboxError(f"{filename}: grade() returned a malformed result", "invalid_result") from None
    if math.isnan(number) or math.isinf(number):
        raise SandboxError(f"{filename}: grade() returned {number}; return a finite float", "invalid_result")
    if abs(number) > max_abs:
        raise SandboxError(f"{filename}: grade() returned {number:g}, outside [-{max_abs:g}, {max_abs:g}]",
                           "invalid_result")
    return number


_default: Sandbox | None = None
_default_lock = threading.Lock()


def get_sandbox() -> Sandbox:
    """The process-wide sandbox; workers start on first use."""
    global _default
    if results.INSIDE:
        raise SandboxError("the sandbox cannot be used from code that already runs inside it (e.g. a grader file "
                           "calling run_tests): use the built-in preset by name, which runs outside, or call "
                           "agentrl.sandbox from trusted code", "nested")
    with _default_lock:
        if _default is None:
            _default = Sandbox()
        return _default
