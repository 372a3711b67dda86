"""BFCL rows with their answer as a demonstration (``metadata.demonstration``): data for a supervised warm-up.

    agentrl data convert --from bfcl-answers multiple -o data/bfcl/warmup_multiple.jsonl
    agentrl models warmup smollm2-135m-instruct --data data/bfcl/warmup_multiple.jsonl -o models/smollm2-bfcl

Each row of a single-turn category (relevance and multi-turn categories have no single answer to show) gets, in
``metadata.demonstration``, the assistant turns that answer it (one here, OpenAI's message layout) with the calls of its possible answer: every argument takes the first value BFCL accepts, and an
optional argument whose accepted values include ``""`` (BFCL's "may be left out") is left out; in simple_java and
simple_javascript each value is written as the Java / JavaScript source text those rows ask for
(:mod:`agentrl_bfcl.literals`). Names are offered with "." as "_", as the rows offer them. Every demonstration is scored by bfcl-eval's own checker (``bfcl_ast``)
before it is written; one it does not pass is left out and counted, never written.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from agentrl_bfcl import bfcl, literals
from agentrl_bfcl.ast_reward import score_output
from agentrl_bfcl.rows import rows


def _value(accepted: list) -> tuple[bool, Any]:
    """(present, value): the first accepted value; absent when BFCL accepts leaving it out."""
    if not accepted or "" in accepted:
        return False, None
    return True, accepted[0]


def _entries_first(value: Any) -> Any:
    """A dict argument's entries at their first accepted value (BFCL lists the accepted values of each entry)."""
    if not isinstance(value, dict):
        return value
    return {k: v[0] if isinstance(v, list) and v else v for k, v in value.items()}


def answer_calls(possible_answer: list[dict], functions: list[dict] | None = None,
                 category: str = "simple_python") -> list[dict]:
    """The calls ``[{"name": ..., "arguments": {...}}]`` of a BFCL possible answer; in simple_java and
    simple_javascript (``functions``: the row's function docs) each argument written as the Java / JavaScript
    source text the row asks for (:mod:`agentrl_bfcl.literals`)."""
    language = bfcl.language(category).value
    documented = {f["name"]: f["parameters"].get("properties", {}) for f in functions or []}
    calls = []
    for entry in possible_answer:
        (name, params), = entry.items()
        arguments = {}
        for key, accepted in params.items():
            present, value = _value(accepted)
            if present and language != "python":
                value = literals.source(_entries_first(value), documented.get(name, {}).get(key, {}), language)
            if present:
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
