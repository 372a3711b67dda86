"""A child process that compares two answers symbolically (math_verify + sympy).

Run as ``python -m agentrl.rewards._mathworker``; reads one JSON request per line on stdin
(``{"gold": ..., "pred": ..., "numeric": false}``) and writes ``{"value": ...}`` or ``{"error": "..."}``
per line: ``value`` is whether they are equal, or with ``numeric`` the gold's decimal value (or null).
It lives in its own process so a simplify that never ends can be killed (see mathsymbolic.SymbolicPool).
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache


def _as_latex(s: str) -> str:
    return s if "$" in s or "\\boxed" in s else f"${s}$"


@lru_cache(maxsize=1)
def _configs():
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())


@lru_cache(maxsize=4096)
def parsed(text: str) -> tuple:
    """math_verify's reading of one answer, parsed once: a gold is parsed once per item, not per sample.
    No signal-based timeout here: the caller's deadline kills this process instead."""
    from math_verify import parse

    return tuple(parse(_as_latex(text), extraction_config=list(_configs()), parsing_timeout=None))


def compare(gold: str, pred: str) -> bool:
    from math_verify import verify

    g, p = parsed(gold), parsed(pred)
    if not g or not p:
        return gold.strip() == pred.strip()
    return bool(verify(list(g), list(p), timeout_seconds=None)) or identity(g[0], p[0])


def identity(a, b, points: int = 4) -> bool:
    """Two expressions verify could not simplify into each other (``i(2-i)`` and ``1+2i``, ``\\csc^2 t`` and
    ``1+\\cot^2 t``) are equal where they agree at random points, negative ones included (so ``|x|`` is not
    ``x``), with ``i`` the imaginary unit. Rounded decimals are left to verify's own precision rules."""
    import random

    import sympy

    if not (isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr)) or a.has(sympy.Float) or b.has(sympy.Float):
        return False
    unit = {s: sympy.I for s in (a.free_symbols | b.free_symbols) if s.name == "i"}
    a, b = a.subs(unit), b.subs(unit)
    names = sorted(a.free_symbols | b.free_symbols, key=str)
    unknown = (sympy.core.function.AppliedUndef, sympy.Derivative, sympy.Integral, sympy.Sum, sympy.Product)
    if a.atoms(*unknown) or b.atoms(*unknown):  # f(x), sums: nothing to evaluate
        return False
    rng, agreed = random.Random(0), 0
    for n in range(3 * points):
        at = {s: (-1) ** (n + j) * rng.uniform(0.5, 2.5) for j, s in enumerate(names)}  # both signs
        try:
            va, vb = complex(a.evalf(20, subs=at)), complex(b.evalf(20, subs=at))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            continue
        if not all(map(lambda v: abs(v) < 1e12, (va, vb))):
            continue
        if abs(va - vb) > 1e-9 * max(1.0, abs(va), abs(vb)):
            return False
        agreed += 1
        if agreed >= (points if names else 1):
            return True
    return False


def numeric_value(gold: str) -> str | None:
    """The value of a constant expression like ``\\sqrt{3}`` as a decimal string (30 digits), else None."""
    g = parsed(gold)
    if not g or not hasattr(g[0], "free_symbols") or g[0].free_symbols:
        return None
    value = g[0].evalf(30)
    return str(value) if value.is_real and value.is_finite else None


def main() -> None:
    import logging

    logging.disable(logging.WARNING)
    import math_verify  # noqa: F401  (import cost paid once, before the first request)

    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints from libraries must not corrupt the protocol
    out.write(json.dumps({"ready": True}) + "\n")  # imports done: deadlines start counting from here
    out.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            if req.get("clear"):  # benchmarks time every pass from cold caches (math_verify's own too)
                from math_verify.parser import parse_expr_cached, parse_latex_cached

                parsed.cache_clear()
                parse_latex_cached.cache_clear()
                parse_expr_cached.cache_clear()
                out.write(json.dumps({"value": True}) + "\n")
                out.flush()
                continue
            work = numeric_value(req["gold"]) if req.get("numeric") else compare(req["gold"], req["pred"])
            reply = {"value": work}
        except Exception as exc:  # report, keep serving
            reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
