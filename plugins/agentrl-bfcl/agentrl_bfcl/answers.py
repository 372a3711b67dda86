"""BFCL rows with their answer as a demonstration (``metadata.demonstration``): data for a supervised warm-up.

    agentrl data convert --from bfcl-answers multiple -o data/bfcl/warmup_multiple.jsonl
    agentrl models warmup smollm2-135m-instruct --data data/bfcl/warmup_multiple.jsonl -o models/smollm2-bfcl

Each row of a single-turn category (relevance and multi-turn categories have no single answer to show) gets, in
``metadata.demonstration``, the assistant turns that answer it (one here, OpenAI's message layout) with the calls
of its possible answer: every argument takes the first value BFCL accepts (and so does each entry of a dict
argument), and an optional argument whose accepted values include ``""`` (BFCL's "may be left out") is left out
(a required one takes its first other value); in simple_java and simple_javascript each value is written as the
Java / JavaScript source text those rows ask for (:mod:`agentrl_bfcl.literals`). Names are offered with "." as
"_", as the rows offer them. Every demonstration is scored by bfcl-eval's own checker (``bfcl_ast``) before it is
written; one it does not pass is left out and counted, never written.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from agentrl_bfcl import bfcl, literals
from agentrl_bfcl.ast_reward import score_output
from agentrl_bfcl.rows import rows


def _value(accepted: list, required: bool) -> tuple[bool, Any]:
    """(present, value): the first accepted value; absent when BFCL accepts leaving it out ("" among the accepted
    values) and the function does not require it, else the first accepted value other than ""."""
    given = [a for a in accepted if a != ""]
    if not given or ("" in accepted and not required):
        return False, None
    return True, given[0]


_LEFT_OUT = object()


def _concrete(value: Any) -> Any:
    """A value with each dict entry inside it at its first accepted value (BFCL lists the accepted values of every
    entry of a dict argument, also of dicts in a list); an entry whose only accepted value is "" is left out."""
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, accepted in value.items():
        if isinstance(accepted, list):
            given = [a for a in accepted if a != ""]
            if not given:
                continue
            accepted = given[0]
        out[key] = _concrete(accepted)
    return out


def answer_calls(possible_answer: list[dict], functions: list[dict] | None = None,
                 category: str = "simple_python") -> list[dict]:
    """The calls ``[{"name": ..., "arguments": {...}}]`` of a BFCL possible answer. ``functions``, the row's
    function docs, say which arguments are required (kept even where BFCL also accepts "" for them) and, in
    simple_java and simple_javascript, each argument's type, for the Java / JavaScript source text the row asks
    for (:mod:`agentrl_bfcl.literals`)."""
    language = bfcl.language(category).value
    documented = {f["name"]: f["parameters"].get("properties", {}) for f in functions or []}
    required = {f["name"]: f["parameters"].get("required", []) for f in functions or []}
    calls = []
    for entry in possible_answer:
        (name, params), = entry.items()
        arguments = {}
        for key, accepted in params.items():
            present, value = _value(accepted, key in required.get(name, ()))
            if not present:
                continue
            value = _concrete(value)
            if language != "python":
                value = literals.source(value, documented.get(name, {}).get(key, {}), language)
            arguments[key] = value
        calls.append({"name": name.replace(".", "_"), "arguments": arguments})
    return calls


def answer_rows(source: str) -> Iterator[dict]:
    """``rows(source)`` with each row's answer as its demonstration (see the module docstring)."""
    category = source.partition(":")[0]
    if category in bfcl.MULTI_TURN or category in bfcl.RELEVANCE_CATEGORIES:
        raise ValueError(f"bfcl-answers writes single-turn categories with one answer to show; {category!r} is not "
                         f"one (use one of {', '.join(c for c in bfcl.SINGLE_TURN if c not in bfcl.RELEVANCE_CATEGORIES)})")
    left_out = 0
    for row in rows(source):
        meta = row["metadata"]["bfcl"]
        calls = answer_calls(meta["possible_answer"], meta["functions"], category)
        if score_output(category, meta["functions"], meta["possible_answer"],
                        [{c["name"]: c["arguments"]} for c in calls]) != 1.0:
            left_out += 1
            continue
        turn = {"role": "assistant", "content": "",
                "tool_calls": [{"type": "function", "function": c} for c in calls]}
        yield {**row, "metadata": {**row["metadata"], "demonstration": [turn]}}
    if left_out:
        print(f"bfcl-answers: left out {left_out} rows of {source} whose first accepted values bfcl-eval's checker "
              f"does not pass", file=sys.stderr)
