"""A child process that compares two answers symbolically (math_verify + sympy).

Run as ``python -m agentrl.rewards._mathworker``; reads one JSON request per line on stdin
(``{"gold": ..., "pred": ...}``) and writes ``{"equal": bool}`` or ``{"error": "..."}`` per line.
It lives in its own process so a simplify that never ends can be killed (see mathcheck.SymbolicPool).
"""

from __future__ import annotations

import json
import sys


def _as_latex(s: str) -> str:
    return s if "$" in s or "\\boxed" in s else f"${s}$"


def compare(gold: str, pred: str) -> bool:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    configs = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    g = parse(_as_latex(gold), extraction_config=configs, parsing_timeout=None)
    p = parse(_as_latex(pred), extraction_config=configs, parsing_timeout=None)
    if not g or not p:
        return gold.strip() == pred.strip()
    return bool(verify(g, p, timeout_seconds=None))


def main() -> None:
    import logging

    logging.disable(logging.WARNING)
    import math_verify  # noqa: F401  (import cost paid once, before the first request)

    out = sys.stdout
    sys.stdout = sys.stderr  # stray prints from libraries must not corrupt the protocol
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply = {"equal": compare(req["gold"], req["pred"])}
        except Exception as exc:  # report, keep serving
            reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
