"""Did the agent call the tools it was expected to call?

``metadata.expected_tools`` is a list of tool names or ``{"name": ..., "arguments": {...}}``. Given
arguments are a subset match (the call may pass more; numbers compare by value, so 2 == 2.0). A call
whose result was an error does not count as a match. Names match exactly or by their last part, so
"add" matches a call to "calc.add" or "calc__add".
"""

from __future__ import annotations

import json
import math
from typing import Any


def tool_calls(sample: Any) -> list[dict]:
    """Every tool call across ``sample.trajectories``, in order, with ``arguments`` decoded and ``failed`` set."""
    calls = []
    for step in sample.get("trajectories") or []:
        errors = {r.get("id") for r in step.get("tool_results") or [] if r.get("is_error")}
        for call in step.get("tool_calls") or []:
            args = call.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = {"__unparsed__": args}
            calls.append({"name": str(call.get("name", "")), "arguments": args if isinstance(args, dict) else {},
                          "failed": call.get("id") is not None and call.get("id") in errors})
    return calls


def turn_penalties(sample: Any, penalty: float) -> list[float | None]:
    """Per assistant turn: ``-penalty`` for each of its tool calls that failed or did not parse (the episode
    feeds both back as error results), None for a turn without one.

    >>> turn_penalties({"trajectories": [{"tool_results": [{"id": "c0", "is_error": True}]}, {}]}, 0.2)
    [-0.2, None]
    """
    out: list[float | None] = []
    for step in sample.get("trajectories") or []:
        bad = sum(1 for r in step.get("tool_results") or [] if r.get("is_error"))
        out.append(-penalty * bad if bad else None)
    return out


def _short(name: str) -> str:
    return name.replace("__", ".").rsplit(".", 1)[-1]


def _same(want: Any, got: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return want is got or want == got and type(want) is type(got)
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(want, (int, float)) and isinstance(got, str):
        try:
            return math.isclose(want, float(got), rel_tol=1e-9)
        except ValueError:
            return False
    if isinstance(want, dict) and isinstance(got, dict):
        return all(k in got and _same(v, got[k]) for k, v in want.items())
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(_same(a, b) for a, b in zip(want, got))
    if isinstance(want, str) and isinstance(got, str):
        return want.strip() == got.strip()
    return want == got


def normalise_expected(expected: Any) -> list[dict]:
    out = []
    for e in expected if isinstance(expected, list) else [expected]:
        if isinstance(e, str):
            out.append({"name": e, "arguments": None})
        elif isinstance(e, dict) and e.get("name"):
            out.append({"name": str(e["name"]), "arguments": e.get("arguments")})
        else:
            raise ValueError(f"metadata.expected_tools entries must be a name or {{\"name\": ..., \"arguments\": {{...}}}}, got {e!r}")
    return out


def matches(want: dict, call: dict) -> bool:
    if call["failed"]:
        return False
    if want["name"] != call["name"] and _short(want["name"]) != _short(call["name"]):
        return False
    return want["arguments"] is None or _same(want["arguments"], call["arguments"])


def matched_unordered(expected: list[dict], calls: list[dict]) -> int:
    """How many expected tools are matched by distinct calls (most specific expectations first)."""
    free = list(range(len(calls)))
    count = 0
    for want in sorted(expected, key=lambda w: w["arguments"] is None):
        hit = next((i for i in free if matches(want, calls[i])), None)
        if hit is not None:
            free.remove(hit)
            count += 1
    return count


def matched_ordered(expected: list[dict], calls: list[dict]) -> int:
    """The longest run of expected tools matched in order (a longest common subsequence)."""
    prev = [0] * (len(calls) + 1)
    for want in expected:
        cur = [0] * (len(calls) + 1)
        for j, call in enumerate(calls, 1):
            cur[j] = prev[j - 1] + 1 if matches(want, call) else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def tool_score(expected: Any, calls: list[dict], *, ordered: bool = False, budget: int | None = None,
               extra_call_penalty: float = 0.1) -> float:
    """Fraction of expected tools matched, minus ``extra_call_penalty`` per call beyond ``budget``; in [0, 1].

    ``budget`` defaults to the number of expected tools. ``expected == []`` means "call nothing".
    """
    want = normalise_expected(expected)
    budget = len(want) if budget is None else int(budget)
    if not want:
        base = 1.0
    else:
        hit = matched_ordered(want, calls) if ordered else matched_unordered(want, calls)
        base = hit / len(want)
    extra = max(0, len(calls) - budget)
    return max(0.0, base - extra_call_penalty * extra)
