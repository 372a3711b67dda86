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
from .callio import RESULT_FD, read_blobs
from .callio import send as _send
from .policy import user_traceback
from .protocol import to_tagged, write_all

ENV: dict[str, str] = {}  # the variables a grader declared, read by its getenv()


def use_stdio() -> None:
    """Python-level stdin/stdout/stderr on the call's descriptors 0, 1 and 2 (model code)."""
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), errors="replace")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace", write_through=True)


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
    exec(compile(code, "<solution>", "exec", dont_inherit=True), namespace)  # not this module's __future__ flags
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
        value = eval(compile(expr, "<test>", "eval", dont_inherit=True), ns)
        tagged = to_tagged(value)
        _flush_std()
        _send({"value": tagged})
    except BaseException as e:  # noqa: BLE001
        _exit_like_python(e)
    _exit_like_python(None)


# ---------------------------------------------------------------- opaque tests: two processes
# An assert that is not `expr == literal` (HumanEval's `check(candidate)`) must run code on both sides: the
# test's and the model's. They run in two processes. This one (the call's child) forks the model's process
# before it reads anything of the test, then runs the test with a stand-in for each name the model's code
# defined: calling one sends the arguments as plain data to the model's process, which calls the real
# function and sends the value back as plain data (protocol.to_tagged / from_tagged: exact builtin types).
# Nothing the model writes ever runs in the test's process, which alone holds the result pipe and the
# nonce; the model's process never sees the test. Patching builtins, walking frames, tracing or replacing
# the harness all act on the model's own process. Limits: values that are not plain data (objects of the
# model's classes, generators, functions as arguments) do not cross, and the test then fails.
TEST_FD = 5
_LEN = 4


def _send_msg(sock, obj) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(len(data).to_bytes(_LEN, "little") + data)


def _recv_exact(sock, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise EOFError
        out += chunk
    return bytes(out)


def _recv_msg(sock):
    return json.loads(_recv_exact(sock, int.from_bytes(_recv_exact(sock, _LEN), "little")))


def _error_of(e: BaseException) -> list:
    try:
        return [type(e).__name__[:80], str(e)[:1000]]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return ["Exception", ""]


def _serve_model(job_len: int, sock) -> None:
    """The model's process: run its code, list its names, then answer calls. Never returns."""
    from .protocol import from_tagged
    try:
        job = read_blobs(4, job_len)
        os.close(4)
        code = job["blobs"][0].decode("utf-8", "replace")
        del job
        ns = _exec_solution(code, "solution")
        names = {}
        for name, value in list(ns.items()):
            if type(name) is not str or name.startswith("__"):
                continue
            if isinstance(value, type(sys)):
                names[name] = {"module": value.__name__ if type(value.__name__) is str else ""}
            elif callable(value):
                names[name] = {"call": True}
            else:
                tagged = to_tagged(value)
                if not (isinstance(tagged, dict) and "x" in tagged):
                    names[name] = {"value": tagged}
        _send_msg(sock, {"names": names})
    except BaseException as e:  # noqa: BLE001
        _flush_std()
        _send_msg(sock, {"raise": _error_of(e)})
        os._exit(1)
    while True:
        try:
            req = _recv_msg(sock)
        except (EOFError, OSError, ValueError):
            _flush_std()
            os._exit(0)
        try:
            fn = ns[req["call"]]
            args = [from_tagged(a) for a in req["args"]]
            kwargs = {k: from_tagged(v) for k, v in req["kwargs"].items()}
            reply = {"value": to_tagged(fn(*args, **kwargs))}
        except BaseException as e:  # noqa: BLE001
            reply = {"raise": _error_of(e)}
        _send_msg(sock, reply)


# Exceptions that steer control flow where they surface: StopIteration raised inside `map()` ends the
# iteration, so `all(map(candidate, cases))` would be vacuously True. A solution's exception crosses as data
# (a name and a message); one of these names becomes a RuntimeError here, as PEP 479 does for generators.
CONTROL_FLOW = frozenset({"StopIteration", "StopAsyncIteration", "GeneratorExit", "KeyboardInterrupt", "SystemExit"})


class SolutionError(RuntimeError):
    """An exception the solution raised whose class the test's process does not re-raise as itself."""


def _raise_remote(err) -> None:
    name, message = (err + ["", ""])[:2] if isinstance(err, list) else ("Exception", "")
    name, message = str(name)[:80], str(message)[:1000]
    cls = getattr(builtins, name, None)
    if name not in CONTROL_FLOW and isinstance(cls, type) and issubclass(cls, Exception) \
            and not issubclass(cls, (StopIteration, StopAsyncIteration)):
        raise cls(message)  # ValueError, KeyError...: a test may expect the solution to raise one
    raise SolutionError(f"the solution raised {name}: {message}")


class _Remote:
    """Stands for a callable of the model's code in the test's process."""

    def __init__(self, sock, name: str) -> None:
        self._sock, self.__name__ = sock, name

    def __call__(self, *args, **kwargs):
        from .protocol import NotPlain, from_tagged
        _send_msg(self._sock, {"call": self.__name__, "args": [to_tagged(a) for a in args],
                               "kwargs": {str(k): to_tagged(v) for k, v in kwargs.items()}})
        try:
            reply = _recv_msg(self._sock)
        except (EOFError, OSError, ValueError):
            raise RuntimeError("the solution's process ended during a call") from None
        if not isinstance(reply, dict) or len(reply) != 1:
            raise RuntimeError("malformed reply from the solution's process")
        if "raise" in reply:
            _raise_remote(reply["raise"])
        try:
            return from_tagged(reply.get("value", {"x": "no value"}))
        except NotPlain as e:
            raise TypeError(f"{self.__name__}() returned a value that is not plain data: {e}") from None


def run_assert_split(job_len: int, test_len: int) -> None:
    """Run an opaque test (test source and nonce in memfd TEST_FD) against the model's code (in the job
    memfd) in two processes; the nonce is written only if the test ran to its end. Never returns."""
    import socket
    from .protocol import NotPlain, from_tagged
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # the model's process: no result pipe, no test
        try:
            ours.close()
            os.close(TEST_FD)
            os.close(RESULT_FD)
            use_stdio()
            _serve_model(job_len, theirs)
        finally:
            os._exit(1)
    theirs.close()
    os.close(4)
    try:
        use_stdio()
        job = read_blobs(TEST_FD, test_len)
        os.close(TEST_FD)
        test, nonce = job["test"].decode("utf-8", "replace"), job["nonce"]
        first = _recv_msg(ours)
        if "raise" in first:
            _raise_remote(first["raise"])
        ns = {"__name__": "__main__", "__builtins__": builtins}
        for name, what in first["names"].items():
            if hasattr(builtins, name):
                continue  # a test's `len`, `abs` or `AssertionError` is the builtin, never the model's
            if "call" in what:
                ns[name] = _Remote(ours, name)
            elif "module" in what and what["module"] in sys.modules:
                ns[name] = sys.modules[what["module"]]  # our own copy: the model's may be patched
            elif "value" in what:
                try:
                    ns[name] = from_tagged(what["value"])
                except NotPlain:
                    pass
        exec(compile(test, "<test>", "exec", dont_inherit=True), ns)
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
