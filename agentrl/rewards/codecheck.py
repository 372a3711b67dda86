"""Code out of a response, and the row's tests run against it in the sandbox.

``metadata.tests`` entries: ``{"type": "assert", "code": "assert f(2) == 4"}``,
``{"type": "stdio", "stdin": "2\\n", "expected_stdout": "4\\n"}``, or a plain string (an assert).
The verdict of each test is decided by ``agentrl.sandbox`` outside the sandboxed process, so code that
prints "PASSED" or exits early does not pass.
"""

from __future__ import annotations

import re
from typing import Any

from agentrl.rewards.errors import Unscorable

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.S)
_PY = {"python", "py", "python3", "py3", ""}
MAX_CODE = 200_000


def extract_code(text: str | None) -> str:
    """The last fenced python block (else the last fenced block of any language), else the whole text."""
    text = text or ""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    for lang, body in reversed(blocks):
        if lang in _PY and body.strip():
            return body[:MAX_CODE]
    if blocks:
        return blocks[-1][1][:MAX_CODE]
    return text.strip()[:MAX_CODE]


def normalise_tests(tests: Any) -> list[dict]:
    """agentrl's own test list; a string must be Python test code (JSON text is never run as an assert)."""
    from agentrl.rewards.codelayouts import _agentrl

    return _agentrl(tests if isinstance(tests, list) else [tests]).tests


def run_tests(code: str, tests: list[dict], timeout_per_test: float = 5.0) -> list:
    """Verdicts from the sandbox; a sandbox failure (not the code's) is Unscorable."""
    from agentrl.sandbox import SandboxError, get_sandbox

    try:
        return list(get_sandbox().run_tests(code, tests, timeout_per_test=timeout_per_test))
    except SandboxError as exc:
        raise Unscorable(f"sandbox failed: {getattr(exc, 'cause', exc)}") from exc


def pass_fraction(code: str, tests: list[dict], timeout_per_test: float = 5.0) -> float:
    if not code.strip():
        return 0.0
    verdicts = run_tests(code, tests, timeout_per_test)
    if len(verdicts) != len(tests):
        raise Unscorable(f"sandbox returned {len(verdicts)} verdicts for {len(tests)} tests")
    return sum(1 for v in verdicts if v.passed is True) / len(tests)
