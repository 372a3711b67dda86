"""Trusted-side planning and judging of unit tests for model-written code.

Expected values never enter the sandbox: a stdio test's expected stdout stays here, and an
`assert <expr> == <literal>` test whose `<expr>` only calls the solution with literal arguments
(`f(2)`, `Solution().run([1, 2])`) sends only `<expr>`; the child returns the value through a strict
codec and the comparison happens here. Every other assert runs in two processes (child.run_assert_split):
the test's own operators and modules work on plain data that crossed from the solution's process, and it
counts only if the test's process wrote a per-call random nonce after the assert ran, exited 0, and wrote
nothing else on the result pipe.
"""

from __future__ import annotations

import ast
import json
import secrets

from .protocol import NotPlain, from_tagged, short
from .results import SandboxError, TestVerdict


def _literal(node: ast.AST):
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _chain(node: ast.AST) -> bool:
    """Whether `node` only names something of the solution and calls, indexes or reads attributes of it, with
    literal arguments: `f(2)`, `Solution().two_sum([2, 7], 9)`, `f("ab")[0]`. Such an expression computes
    nothing but the value that is compared, so it may run in the solution's process and come back as plain
    data. Anything else (`math.isclose(f(x), y)`, `round(f(x) - y, 9)`, `(f(x) == y)`) has the expected
    value or a comparison inside it; run there, the solution's own `math`, `__sub__` or `__eq__` would
    decide the verdict."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return not node.attr.startswith("__") and _chain(node.value)
    if isinstance(node, ast.Subscript):
        return _literal(node.slice)[0] and _chain(node.value)
    if isinstance(node, ast.Call):
        return (all(not isinstance(a, ast.Starred) and _literal(a)[0] for a in node.args)
                and all(k.arg is not None and _literal(k.value)[0] for k in node.keywords) and _chain(node.func))
    return False


def plan(test: dict, out_cap: int) -> tuple[dict, list[bytes], object]:
    """Return (header, [probe_or_test, stdin], expected) for one test dict."""
    if not isinstance(test, dict):
        raise SandboxError(f"a test must be a dict, got {type(test).__name__}", "bad_input")
    kind = test.get("type")
    if kind == "stdio":
        stdin, expected = test.get("stdin", ""), test.get("expected_stdout")
        if not isinstance(stdin, str) or not isinstance(expected, str):
            raise SandboxError("stdio test needs str 'stdin' and 'expected_stdout'", "bad_input")
        return {"mode": "stdio", "out_cap": out_cap}, [b"", stdin.encode()], expected
    if kind == "assert":
        src = test.get("code")
        if not isinstance(src, str):
            raise SandboxError("assert test needs str 'code', e.g. 'assert f(2) == 4'", "bad_input")
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            raise SandboxError(f"assert test does not parse: {e}", "bad_input") from None
        body = tree.body
        if (len(body) == 1 and isinstance(body[0], ast.Assert) and isinstance(body[0].test, ast.Compare)
                and len(body[0].test.ops) == 1 and isinstance(body[0].test.ops[0], ast.Eq)):
            left, right = body[0].test.left, body[0].test.comparators[0]
            for probe, lit in ((left, right), (right, left)):
                ok, value = _literal(lit)
                if ok and not _literal(probe)[0] and _chain(probe):
                    return {"mode": "probe", "out_cap": out_cap}, [ast.unparse(probe).encode(), b""], value
        if test.get("equal") is not None:  # its comparison could not be applied to a value judged there
            raise SandboxError("a test with its own `equal` must be `assert <call with literal arguments> == "
                               f"<literal>`, got {src[:120]!r}", "bad_input")
        nonce = secrets.token_hex(16)
        return {"mode": "assert", "nonce": nonce, "out_cap": out_cap}, [src.encode(), b""], nonce
    raise SandboxError(f"unknown test type {kind!r}; use 'assert' or 'stdio'", "bad_input")


def _normalize(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _stderr_tail(err: bytes) -> str:
    text = err.decode("utf-8", "replace").strip()
    return text.splitlines()[-1][:300] if text else ""


def judge(header: dict, status: dict, blobs: list[bytes], expected, equal=None) -> TestVerdict:
    """`equal(got, expected) -> bool`: the test's own comparison (trusted code, e.g. a peer harness's
    tolerance for floats) in place of line-by-line equality (stdio) or `==` (probe)."""
    result, stdout, stderr = (blobs + [b"", b"", b""])[:3]
    if status.get("timed_out"):
        return TestVerdict(False, "timeout", f"killed after {status.get('elapsed', 0):.1f} s wall time")
    if status.get("overflow"):
        return TestVerdict(False, "error", f"{status['overflow']} exceeded its size limit; the process was killed")
    if status.get("memory"):
        return TestVerdict(False, "error", "the memory limit for all of the test's processes was reached; one was "
                                           "killed")
    code = status.get("exit")
    if not isinstance(code, int):
        return TestVerdict(False, "crash", "no exit status")
    if code < 0:
        sig = -code
        why = "CPU time limit" if sig in (9, 24) and status.get("elapsed", 0) > 0.5 else f"signal {sig}"
        return TestVerdict(False, "crash", f"killed by {why}")
    if code == 121:
        return TestVerdict(False, "crash", "sandbox harness failed in the child: " + _stderr_tail(stderr))
    if code != 0:
        return TestVerdict(False, "error", f"exit status {code}: {_stderr_tail(stderr)}")
    mode = header["mode"]
    if mode == "stdio":
        got = stdout.decode("utf-8", "replace")
        same, why = _compare(equal, got, expected) if equal else (_normalize(got) == _normalize(expected), "")
        if same:
            return TestVerdict(True, "pass", "")
        return TestVerdict(False, "fail", f"expected stdout {short(expected, 120)}, got {short(got, 120)}{why}")
    if mode == "assert":
        if result == header["nonce"].encode():
            return TestVerdict(True, "pass", "")
        return TestVerdict(False, "fail", "the assert did not complete (exited before it ran)")
    # probe
    if not result:
        return TestVerdict(False, "fail", "exited before the test expression was evaluated")
    try:
        obj = json.loads(result)
        if not isinstance(obj, dict) or set(obj) != {"value"}:
            raise NotPlain("malformed result")
        value = from_tagged(obj["value"])
    except NotPlain as e:
        return TestVerdict(False, "fail", f"returned a value that is not plain data: {e}")
    except (ValueError, RecursionError, MemoryError, OverflowError, TypeError):
        return TestVerdict(False, "fail", "returned a value that could not be decoded")
    same, why = _compare(equal, value, expected)
    if same:
        return TestVerdict(True, "pass", "")
    return TestVerdict(False, "fail", f"expected {short(expected)}, got {short(value)}{why}")


def _compare(equal, got, expected) -> tuple[bool, str]:
    """(passed, why not) of a comparison on the host. Only the code's output varies between calls of one
    test, so an exception the comparison raises on it (Decimal('sNaN') compared, a deep structure, an
    overflow) is the output's failure, never an error of the sandbox that would make the test unscorable."""
    try:
        same = equal(got, expected) if equal else got == expected
        return same is True or (type(same) is bool and same), ""
    except Exception as exc:  # noqa: BLE001 - any exception of the comparison on this output is its failure
        return False, f" (the comparison raised {type(exc).__name__} on this output)"
