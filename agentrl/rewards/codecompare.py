"""How each coding harness compares what the code gave with what a test wants: the trusted side of a code test,
run here on the sandbox's answer, never inside the sandbox.

    value_equal((1, 2), [1, 2])                 # True: a returned tuple equals a JSON list (every harness)
    stdout_lines("1 \n2\n\n", "1\n2")          # True: trailing spaces and blank lines do not count
    stdout_decimal("0.30000000000000004", "0.3")  # False: LiveCodeBench and rLLM compare decimals exactly
    stdout_apps("1.000001 2", "1 2")             # True: APPS's tolerance (rtol 1e-5, atol 1e-8; an integer exactly)

:mod:`agentrl.rewards.codelayouts` picks one per layout, as that layout's own harness does.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any


def _lists(value: Any) -> Any:
    """Tuples as lists, all the way down: a JSON gold has no tuples."""
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    return value


def value_equal(got: Any, gold: Any) -> bool:
    """LiveCodeBench / rLLM call-based: `==`, a tuple equal to a list."""
    return _lists(got) == gold


def value_equal_apps(got: Any, gold: Any) -> bool:
    """APPS / TACO call-based: as `value_equal`, or equal to the gold's only element (APPS wraps outputs in a list)."""
    got = _lists(got)
    return got == gold or (isinstance(gold, list) and len(gold) == 1 and got == gold[0])


def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def stdout_lines(got: str, want: str) -> bool:
    """open-r1: every line equal once stripped (and as many lines)."""
    return _stripped_lines(got) == _stripped_lines(want)


def _decimals(line: str) -> list[Decimal] | None:
    """The line's tokens as finite decimals, else None. A NaN (quiet or signalling, which raises when compared)
    or an infinity is no number the expected output can equal: such a line only matches as text."""
    try:
        values = [Decimal(token) for token in line.split()]
    except InvalidOperation:
        return None
    return values if all(v.is_finite() for v in values) else None


def stdout_decimal(got: str, want: str) -> bool:
    """LiveCodeBench / rLLM stdin: lines equal once stripped, or equal as decimal numbers ("2.50" is "2.5")."""
    a, b = _stripped_lines(got), _stripped_lines(want)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x != y:
            dx = _decimals(x)
            if dx is None or dx != _decimals(y):
                return False
    return True


def _close(a: float, b: float) -> bool:  # numpy.allclose's rule
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-8 + 1e-5 * abs(b)


_INT = re.compile(r"[+-]?\d+")


def _tokens_match(s: str, t: str) -> bool:
    """APPS's number rule for one token: an expected integer is matched exactly ("7.0" and "007" are 7; the
    float tolerance would let 10**9 pass for 10**9 + 1), any other number within `_close`."""
    if _INT.fullmatch(t):
        try:
            got = Decimal(s)
        except InvalidOperation:
            return False
        return got.is_finite() and got == Decimal(t)
    try:
        return _close(float(s), float(t))
    except (ValueError, OverflowError):
        return False


def stdout_apps(got: str, want: str) -> bool:
    """APPS / TACO / verl prime_code stdin: non-empty lines equal once stripped, or token by token with numbers
    equal within numpy.allclose's tolerance (a float printed with more digits than the expected output).
    Integers are compared exactly: the tolerance is for floats (1e-5 of 10**6 would pass an answer off by 10)."""
    a = [line.strip() for line in got.split("\n") if line.strip()]
    b = [line.strip() for line in want.split("\n") if line.strip()]
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        tx, ty = x.split(), y.split()
        if len(tx) != len(ty):
            return False
        for s, t in zip(tx, ty):
            if s != t and not _tokens_match(s, t):
                return False
    return True

