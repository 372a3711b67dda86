"""What runs inside a forked child of a locked template (template.py): a grader or model code.

Everything here runs in the untrusted process, so nothing it reports is believed as is: the
trusted side re-validates grader values and decides test verdicts itself.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import sys
import traceback

from agentrl.trajectory import wrap

from . import harden
from .policy import user_traceback
from .protocol import to_tagged, write_all

RESULT_FD = 3


ENV: dict[str, str] = {}  # the variables a grader declared, read by its getenv()


def use_stdio() -> None:
    """Python-level stdin/stdout/stderr on the call's descriptors 0, 1 and 2 (model code)."""
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), errors="replace")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace", write_through=True)


def _send(obj: dict) -> None:
    try:
        write_all(RESULT_FD, json.dumps(obj).encode())
    except Exception:  # noqa: BLE001 - the result pipe is gone or the object is odd; the host sees no result
        pass


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass


# ---------------------------------------------------------------- grader
def encode_grade_value(value) -> dict:
    t = type(value)
    if value is None:
        return {"none": True}
    if t is bool:
        return {"bool": value}
    if t is int:
        if value.bit_length() > 1100:
            return {"bad": "int (huge)"}
        return {"int": str(value)}
    if t is float:
        return {"float": value.hex()}
    if type(getattr(t, "__module__", None)) is str and t.__module__.split(".")[0] in ("numpy", "sympy"):
        import numbers  # numpy/sympy scalars (np.float64, sympy.Rational) are numbers graders often return
        if isinstance(value, numbers.Real):
            try:
                return {"float": float(value).hex()}
            except (TypeError, ValueError, OverflowError):
                pass
    name = getattr(t, "__name__", "?")
    return {"bad": str(name)[:80] if isinstance(name, str) else "?"}


def run_grader(code, filename: str, source: str, payload, network: bool, glb: dict) -> None:
    """`glb`: the grader globals the template built once (this process is a private copy). `payload`:
    {"sample":, "item":} already decoded, or its JSON text when the zygote could not convert it."""
    try:
        data = json.loads(payload) if isinstance(payload, bytes) else payload
        sample, item = wrap(data["sample"]), wrap(data["item"])
    except (RecursionError, MemoryError, ValueError, KeyError, TypeError) as e:
        _send({"input_error": f"{type(e).__name__}: {str(e)[:300]}"})
        return
    try:
        exec(code, glb)
        grade = glb.get("grade")
        if not callable(grade):
            _send({"grader_error": f"{filename}: defines no function `grade`; write `def grade(sample, item): ...`"
                                   " returning a float, or None when the item does not apply"})
            return
        value = grade(sample, item)
        out = encode_grade_value(value)
    except MemoryError:
        _send({"memory": True})
        return
    except BaseException as e:  # noqa: BLE001 - anything the grader raised, SystemExit included
        try:
            text = user_traceback(e, filename, source)
        except BaseException:  # noqa: BLE001
            text = type(e).__name__
        _send({"grader_error": text})
        return
    (key, value), = out.items()
    if type(value) is str:  # the common case, without the json module: a float's hex or an int's digits
        write_all(RESULT_FD, b'{"%s": "%s"}' % (key.encode(), value.encode()))
    else:
        _send(out)


# ---------------------------------------------------------------- model code
def _exec_solution(code: str, name: str) -> dict:
    namespace = {"__name__": name, "__builtins__": builtins}
    exec(compile(code, "<solution>", "exec"), namespace)
    return namespace


def _exit_like_python(exc: BaseException | None) -> None:
    status = 0
    if isinstance(exc, SystemExit):
        c = exc.code
        if c is None:
            status = 0
        elif isinstance(c, int):
            status = c & 0xFF
        else:
            print(c, file=sys.stderr)
            status = 1
    elif exc is not None:
        traceback.print_exception(type(exc), exc, exc.__traceback__, limit=8, file=sys.stderr)
        status = 1
    _flush_std()
    os._exit(status)


def run_stdio(code: str) -> None:
    try:
        _exec_solution(code, "__main__")
    except BaseException as e:  # noqa: BLE001
        _exit_like_python(e)
    _exit_like_python(None)


def run_probe(code: str, expr: str) -> None:
    """Evaluate one side of `assert probe == literal`; the literal never enters this process."""
    try:
        ns = _exec_solution(code, "solution")
        value = eval(compile(expr, "<test>", "eval"), ns)
        tagged = to_tagged(value)
        _flush_std()
        _send({"value": tagged})
    except BaseException as e:  # noqa: BLE001
        _exit_like_python(e)
    _exit_like_python(None)


def run_assert(code: str, test: str, nonce: str) -> None:
    try:
        ns = _exec_solution(code, "solution")
        exec(compile(test, "<test>", "exec"), ns)
    except BaseException as e:  # noqa: BLE001
        _exit_like_python(e)
    _flush_std()
    write_all(RESULT_FD, nonce.encode())
    os._exit(0)


# ---------------------------------------------------------------- self test
def self_test(probe_port: int | None, private: list[str]) -> None:
    """Measure, from inside, what the lock-down achieved. Reported by the zygote at start. `private`: the
    host's own folders (its working directory, its home) that must not be readable either."""
    import socket
    out = {"uid": os.getuid(), "euid": os.geteuid(), "pid": os.getpid(), "ppid": os.getppid()}
    out["no_new_privs"] = harden.prctl(harden.PR_GET_NO_NEW_PRIVS) == 1
    out["seccomp_mode"] = harden.prctl(harden.PR_GET_SECCOMP)
    out["probed"] = ["/etc/shadow", "/etc/passwd", "/root", *private]
    out["readable"] = []
    for path in out["probed"]:
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                open(path, "rb").close()
            out["readable"].append(path)
        except OSError:
            pass
    try:
        with open("/var/tmp/agentrl-sandbox-probe", "wb"):
            pass
        out["write_outside"] = True
    except OSError:
        out["write_outside"] = False
    try:
        with open("scratch-probe", "wb") as f:
            f.write(b"x")
        out["write_scratch"] = True
    except OSError:
        out["write_scratch"] = False
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(("127.0.0.1", probe_port or 9))
        out["network"] = True
    except OSError:
        out["network"] = False
    try:
        harden.unshare(harden.CLONE_NEWNS)
        out["unshare"] = True
    except OSError:
        out["unshare"] = False
    out["env"] = sorted(k for k in os.environ if k not in ("HOME", "TMPDIR"))
    _send(out)
    os._exit(0)
