"""``load_reward(spec)``: a preset name, a plugin-registered name, or a path to a ``grade`` file.

What comes back is a ``Reward``: call it as ``reward(sample, item)`` (or ``await reward.acall(...)``)
with plain dicts or Records. It enforces the timeout, turns exceptions and invalid values into
``Unscorable`` with a cause, and hands the reward only the environment variables it declared.

Trust: built-in presets and pip-installed plugins run in this process. A user's file (a path, or a
plugin that registered a path, like the ``custom`` preset) runs in ``agentrl.sandbox``.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import inspect
import math
import numbers
import os
import traceback
from pathlib import Path
from typing import Any, Callable

from agentrl.deadline import DeadlineExceeded, acall_with_deadline, call_with_deadline
from agentrl.rewards.errors import RewardConfigError, Unscorable
from agentrl.trajectory import as_item, as_sample, unwrap

DEFAULT_TIMEOUT = 30.0
MAX_ABS = 1e6
# Options load_reward itself uses; every other option goes to grade() as a keyword argument.
LOADER_OPTIONS = ("env", "network", "timeout", "memory_mb", "read_paths")


def check_value(name: str, value: Any) -> float | None:
    """``None`` passes (not applicable); a finite real in [-1e6, 1e6] becomes a float; else Unscorable."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Unscorable(f"{name}: returned {type(value).__name__} {str(value)[:40]!r}; grade() must return a float or None")
    value = float(value)
    if math.isnan(value) or math.isinf(value) or abs(value) > MAX_ABS:
        raise Unscorable(f"{name}: returned {value!r}; must be finite and within [-{MAX_ABS:g}, {MAX_ABS:g}]")
    return value


def check_result(name: str, value: Any, sample: Any) -> Any:
    """``check_value``, and a per-turn dict as :class:`agentrl.rewards.turns.TurnScores` (one entry per turn)."""
    if isinstance(value, dict):
        from agentrl.rewards import turns

        scores = turns.parse(name, value)
        turns.check_length(name, scores, sample)
        return scores
    return check_value(name, value)


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""


def _run_in_thread(fn: Callable[[], Any], timeout: float, name: str) -> Any:
    try:
        return call_with_deadline(fn, timeout, name)
    except DeadlineExceeded:
        raise Unscorable(f"{name}: timeout after {timeout:g}s") from None


class Reward:
    """A loaded reward: ``reward(sample, item) -> float | None`` (or per-turn ``TurnScores``, see
    :mod:`agentrl.rewards.turns`); raises ``Unscorable``."""

    def __init__(self, name: str, fn: Callable, *, options: dict | None = None, env: dict | None = None,
                 timeout: float = DEFAULT_TIMEOUT, origin: str = "", version: str = "", sandboxed: bool = False,
                 runs_model_code: bool = False):
        self.name, self.fn, self.options = name, fn, dict(options or {})
        self.env, self.timeout, self.origin, self.version, self.sandboxed = dict(env or {}), timeout, origin, version, sandboxed
        # it runs model-written code in the sandbox: `agentrl train` checks the isolation before it starts
        self.runs_model_code = runs_model_code
        self.is_async = inspect.iscoroutinefunction(fn)

    def __repr__(self) -> str:
        return f"<Reward {self.name!r} from {self.origin} version {self.version}>"

    def _args(self, sample: Any, item: Any) -> tuple:
        return as_sample(sample), as_item(item)

    def _fail(self, exc: BaseException) -> Unscorable:
        if isinstance(exc, Unscorable):
            cause = exc.cause if exc.cause.startswith(f"{self.name}:") else f"{self.name}: {exc.cause}"
            return Unscorable(cause)
        return Unscorable(f"{self.name}: {type(exc).__name__}: {str(exc)[:300]}{_where(exc)}")

    def __call__(self, sample: Any, item: Any) -> float | None:
        s, i = self._args(sample, item)
        try:
            if self.is_async:
                value = _run_in_thread(lambda: asyncio.run(self.fn(s, i, **self.options)), self.timeout, self.name)
            else:
                value = _run_in_thread(lambda: self.fn(s, i, **self.options), self.timeout, self.name)
        except (Exception, SystemExit) as exc:  # a grade() calling exit() is a failure to score, not our exit
            raise self._fail(exc) from exc
        return check_result(self.name, value, s)

    async def acall(self, sample: Any, item: Any) -> float | None:
        s, i = self._args(sample, item)
        try:
            if self.is_async:
                value = await asyncio.wait_for(self.fn(s, i, **self.options), self.timeout)
            else:
                value = await _in_thread_async(lambda: self.fn(s, i, **self.options), self.timeout, self.name)
        except asyncio.TimeoutError as exc:
            raise Unscorable(f"{self.name}: timeout after {self.timeout:g}s") from exc
        except (Exception, SystemExit) as exc:  # a grade() calling exit() is a failure to score, not our exit
            raise self._fail(exc) from exc
        return check_result(self.name, value, s)


async def _in_thread_async(fn: Callable[[], Any], timeout: float, name: str) -> Any:
    """Like ``_run_in_thread`` without blocking the event loop; a stuck thread is abandoned, not awaited."""
    try:
        return await acall_with_deadline(fn, timeout, name)
    except DeadlineExceeded:
        raise Unscorable(f"{name}: timeout after {timeout:g}s") from None


def file_declarations(source: str, filename: str) -> dict:
    """Top-level ``ENV = [...]``, ``NETWORK = True`` and ``TIMEOUT = 10.0`` of a reward file, read without running it."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        raise RewardConfigError(f"reward file {filename} line {exc.lineno}: syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise RewardConfigError(f"reward file {filename}: cannot be parsed ({type(exc).__name__}: nested too deeply "
                                "or too large); simplify it") from None
    found: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            key = node.targets[0].id
            if key in ("ENV", "NETWORK", "TIMEOUT"):
                try:
                    found[key] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                    raise RewardConfigError(f"reward file {filename} line {node.lineno}: {key} must be a literal "
                                            f"(ENV = [\"NAME\", ...], NETWORK = True)") from None
    has_grade = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "grade" for n in tree.body)
    if not has_grade:
        raise RewardConfigError(f"reward file {filename} defines no top-level `def grade(sample, item)`; add one")
    return found


MAX_TIMEOUT = 3600.0
MEMORY_MB_RANGE = (16, 1 << 16)


def check_settings(where: str, *, timeout: Any = None, memory_mb: Any = None, network: Any = None) -> None:
    """A reward's own settings (a file's TIMEOUT/NETWORK, or the options given to load_reward), checked when it
    is loaded: a value that cannot be represented (``TIMEOUT = 1e999``, NaN, a string) must stop the run with
    an error naming where it was set, not fail later in the middle of a call."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, numbers.Real)
                                or not 0 < float(timeout) <= MAX_TIMEOUT):
        raise RewardConfigError(f"{where}: TIMEOUT (timeout) must be a number of seconds in (0, {MAX_TIMEOUT:g}], got "
                                f"{str(timeout)[:40]!r}; fix it")
    lo, hi = MEMORY_MB_RANGE
    if memory_mb is not None and (isinstance(memory_mb, bool) or not isinstance(memory_mb, int)
                                  or not lo <= memory_mb <= hi):
        raise RewardConfigError(f"{where}: memory_mb must be a whole number of MiB in [{lo}, {hi}], got "
                                f"{str(memory_mb)[:40]!r}; fix it")
    if network is not None and not isinstance(network, bool):
        raise RewardConfigError(f"{where}: NETWORK (network) must be True or False, got {str(network)[:40]!r}; fix it")


def resolve_env(name: str, declared: list | tuple) -> dict[str, str]:
    """The values of the variables a reward declared; a missing one is a config error now, not at step 50."""
    if isinstance(declared, str) or not all(isinstance(v, str) for v in declared):
        raise RewardConfigError(f"reward {name!r}: env must be a list of variable names, got {declared!r}")
    missing = [v for v in declared if v not in os.environ]
    if missing:
        raise RewardConfigError(f"reward {name!r} declares env {missing} but they are not set; export them, "
                                f"or remove them from the reward's env list")
    return {v: os.environ[v] for v in declared}


class SandboxedGrade:
    """``grade(sample, item)`` of a user's file, run by ``agentrl.sandbox`` (a class so it pickles for Ray)."""

    def __init__(self, source: str, filename: str, env: dict, read_paths: tuple, network: bool, timeout: float,
                 memory_mb: int) -> None:
        self.source, self.filename, self.env, self.read_paths = source, filename, env, read_paths
        self.network, self.timeout, self.memory_mb = network, timeout, memory_mb

    def __call__(self, sample: Any, item: Any) -> float | None:
        from agentrl.sandbox import GraderCodeError, SandboxError, get_sandbox

        try:
            return get_sandbox().run_grader(self.source, self.filename, unwrap(sample), unwrap(item), env=self.env,
                                            read_paths=self.read_paths, network=self.network, timeout=self.timeout,
                                            memory_mb=self.memory_mb)
        except (GraderCodeError, SandboxError) as exc:
            raise Unscorable(f"{getattr(exc, 'cause', 'sandbox')}: {str(exc)[:400]}") from exc


def _read_paths(name: str, declared: Any) -> tuple[str, ...]:
    """Declared readable paths, absolute (the reward runs in verl's workers, whose working directory differs)."""
    if isinstance(declared, (str, os.PathLike)) or not isinstance(declared, (list, tuple)):
        raise RewardConfigError(f"reward {name!r}: read_paths must be a list of paths, got {declared!r}")
    out = []
    for p in declared:
        full = Path(p).expanduser().resolve()
        if not full.exists():
            raise RewardConfigError(f"reward {name!r}: read_paths entry {str(p)!r} does not exist ({full}); "
                                    "fix the path or remove it")
        out.append(str(full))
    return tuple(out)


def check_source(source: str, filename: str, network: bool, where: str) -> None:
    """Compile reward code under the sandbox's policy and check its imports now, so a rejected construct or
    module stops the run before it starts instead of making every rollout unscorable."""
    try:
        from agentrl.sandbox.policy import ALLOWED_IMPORTS, NETWORK_IMPORTS, GraderSourceError, compile_grader, imported_modules
    except ImportError:  # reported with its fix by the caller
        return
    try:
        compile_grader(source, filename)
    except GraderSourceError as exc:
        raise RewardConfigError(f"{where} does not compile under the sandbox's policy:\n{exc}") from None
    allowed = set(ALLOWED_IMPORTS) | (set(NETWORK_IMPORTS) if network else set()) | {"agentrl"}
    refused = sorted(m for m in imported_modules(source) if m not in allowed)
    if refused:
        hint = " (network modules need network: true)" if set(refused) & set(NETWORK_IMPORTS) else ""
        raise RewardConfigError(f"{where} does not compile under the sandbox's policy: it imports {', '.join(refused)}, "
                                f"which the sandbox does not allow{hint}; allowed: {', '.join(sorted(ALLOWED_IMPORTS))}")


def sandboxed_reward(name: str, path: Path, options: dict) -> Reward:
    try:
        source = path.read_text()
    except OSError as exc:
        raise RewardConfigError(f"reward {name!r}: cannot read {path}: {exc.strerror}") from None
    decl = file_declarations(source, str(path))
    check_settings(f"reward {name!r} ({path})", timeout=decl.get("TIMEOUT"), network=decl.get("NETWORK"))
    check_settings(f"reward {name!r} (options)", timeout=options.get("timeout"), memory_mb=options.get("memory_mb"),
                   network=options.get("network"))
    if not isinstance(decl.get("ENV", []), (list, tuple)):
        raise RewardConfigError(f"reward {name!r} ({path}): ENV must be a list of variable names, got {decl['ENV']!r}")
    network = bool(options.get("network", decl.get("NETWORK", False)))
    check_source(source, str(path), network, f"reward {name!r} ({path})")
    extra = {k: v for k, v in options.items() if k not in LOADER_OPTIONS}
    if extra:
        raise RewardConfigError(f"reward {name!r} is a file run in the sandbox; options {sorted(extra)} cannot reach it. "
                                f"Edit the constants in {path} instead (allowed options: {', '.join(LOADER_OPTIONS)})")
    env = resolve_env(name, list(dict.fromkeys([*decl.get("ENV", []), *options.get("env", [])])))
    timeout = float(options.get("timeout", decl.get("TIMEOUT", 10.0)))
    memory_mb = int(options.get("memory_mb", 512))
    # The sandbox itself makes agentrl's own folders readable (a reward file may import agentrl.rewards helpers).
    read_paths = _read_paths(name, options.get("read_paths", ()))
    try:
        import agentrl.sandbox  # noqa: F401
    except ImportError as exc:
        raise RewardConfigError(f"reward {name!r} ({path}) must run in the sandbox, but agentrl.sandbox is not "
                                f"available ({exc}); reinstall agentrl") from None
    grade = SandboxedGrade(source, str(path), env, read_paths, network, timeout, memory_mb)
    version = hashlib.sha256(source.encode()).hexdigest()[:12]
    # the sandbox enforces `timeout`; our own deadline is a backstop a little later
    return Reward(name, grade, env=env, timeout=timeout + 5.0, origin=str(path), version=version, sandboxed=True)


def in_process_reward(name: str, fn: Callable, origin: str, options: dict) -> Reward:
    module = inspect.getmodule(fn)
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    accepted = [p for p in list(params)[2:] if params[p].kind is not inspect.Parameter.VAR_KEYWORD]
    kwargs = {k: v for k, v in options.items() if k not in LOADER_OPTIONS}
    unknown = [k for k in kwargs if k not in accepted and not takes_any]
    if unknown:
        raise RewardConfigError(f"reward {name!r} does not take option(s) {unknown}; it takes: "
                                f"{', '.join(dict.fromkeys([*accepted, *LOADER_OPTIONS]))}")
    declared = options.get("env", getattr(module, "ENV", []))
    env = resolve_env(name, list(declared))
    if "env" in params or takes_any:
        kwargs["env"] = env
    try:
        version = hashlib.sha256(inspect.getsource(module).encode()).hexdigest()[:12] if module else ""
    except (OSError, TypeError):
        version = ""
    timeout = options.get("timeout", getattr(module, "TIMEOUT", DEFAULT_TIMEOUT))
    check_settings(f"reward {name!r} ({origin})", timeout=timeout)
    timeout = float(timeout)
    return Reward(name, fn, options=kwargs, env=env, timeout=timeout, origin=origin, version=version,
                  runs_model_code=bool(getattr(module, "RUNS_MODEL_CODE", False)))
