"""Public result and error types of the sandbox."""

from __future__ import annotations

from dataclasses import dataclass, field

INSIDE = False  # set in sandboxed children: a sandbox cannot start another one


class SandboxError(RuntimeError):
    """The call could not produce a trustworthy result. `.cause` is a short machine-readable string:
    timeout, memory, killed, worker_died, invalid_result, bad_input, weak_isolation, nested, internal."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


class GraderCodeError(SandboxError):
    """The grader's own code is at fault: it does not compile under the policy (cause `compile`) or
    `grade` raised (cause `exception`). The message names the file, line and what to write instead."""


@dataclass(frozen=True)
class TestVerdict:
    passed: bool
    kind: str  # "pass" | "fail" | "error" | "timeout" | "crash"
    detail: str = ""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class Check:
    ok: bool
    reason: str


REQUIRED_FOR_MODEL_CODE = ("net_ns", "mount_ns", "pid_ns", "uid_drop", "landlock_fs", "seccomp", "rlimits",
                           "env_empty", "noatime", "pid_reset", "page_cache", "shared_inodes", "dev_readonly",
                           "counters")


@dataclass
class IsolationReport:
    """What was achieved on this machine, measured at worker start and by a probe inside a sandboxed child."""

    checks: dict[str, Check] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Check:
        checks = self.__dict__.get("checks", {})
        if name in checks:
            return checks[name]
        raise AttributeError(name)

    @property
    def strong(self) -> bool:
        return not self.missing()

    def missing(self, required=REQUIRED_FOR_MODEL_CODE) -> list[str]:
        out = [k for k in required if not (k in self.checks and self.checks[k].ok)]
        if "bench_off" in self.checks and not self.checks["bench_off"].ok:  # measures a benchmark switched off
            out.append("bench_off")
        return out

    def as_dict(self) -> dict:
        return {k: {"ok": c.ok, "reason": c.reason} for k, c in self.checks.items()}

    def summary(self) -> str:
        width = max((len(k) for k in self.checks), default=0)
        lines = [f"  {k:<{width}}  {'yes' if c.ok else 'NO '}  {c.reason}" for k, c in self.checks.items()]
        head = "sandbox isolation: " + ("strong" if self.strong else "WEAK (missing: " + ", ".join(self.missing()) + ")")
        return "\n".join([head] + lines)
