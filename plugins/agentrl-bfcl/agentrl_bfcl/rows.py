"""BFCL's rows as agentrl rows: ``agentrl data convert --from bfcl CATEGORY[:train|:heldout] -o FILE``.

    agentrl data convert --from bfcl simple_python -o simple_python.jsonl
    {"id": "simple_python_1",
     "messages": [{"role": "user", "content": "Calculate the factorial of 5 using math functions."}],
     "metadata": {"declared_tools": [{"type": "function", "function": {"name": "math_factorial", ...}}],
                  "split": "train", "bfcl_category": "simple_python",
                  "bfcl": {"functions": [...BFCL's function docs...],
                           "possible_answer": [{"math.factorial": {"number": [5]}}]}}}

Everything is read and shaped by bfcl-eval's own code: ``load_dataset_entry`` (with the language hint BFCL's
generation adds: "Note that the provided function is in Python 3 syntax.") and ``convert_to_tool`` with
``GORILLA_TO_OPENAPI`` in the OpenAI style, the tools a function-calling model is given on the leaderboard ("."
in names becomes "_"). The tools are *declared* (``metadata.declared_tools``): nothing executes them, the calls
are the answer, and the episode ends after the turn that makes them. ``metadata.bfcl`` keeps what the checker
reads: the function docs as bfcl-eval's evaluation loads them (no hint) and the possible answer (none for
relevance/irrelevance rows).

The split, by id: a row is held out when ``sha256(id)`` read as a number is divisible by 5 (about one row in
five), so it never moves when rows are added or categories combined. ``CATEGORY:train`` / ``CATEGORY:heldout``
write only that part; plain ``CATEGORY`` writes every row with ``metadata.split`` set.
"""

from __future__ import annotations

import hashlib
from typing import Iterator

from agentrl_bfcl import bfcl

SPLITS = ("train", "heldout")


def split_of(row_id: str) -> str:
    """``"heldout"`` for about one id in five (``sha256(id) % 5 == 0``), else ``"train"``."""
    return "heldout" if int(hashlib.sha256(row_id.encode()).hexdigest(), 16) % 5 == 0 else "train"


def _parse(source: str) -> tuple[str, str | None]:
    category, _, part = source.partition(":")
    if category in bfcl.MULTI_TURN:
        raise ValueError(f"{category} is a multi-turn category, which this plugin does not convert yet; "
                         f"single-turn categories: {', '.join(bfcl.SINGLE_TURN)}")
    if category not in bfcl.SINGLE_TURN:
        raise ValueError(f"unknown BFCL category {category!r}; use one of {', '.join(bfcl.SINGLE_TURN)} "
                         f"(optionally :train or :heldout)")
    if part and part not in SPLITS:
        raise ValueError(f"unknown split {part!r} in {source!r}; use {category}:train or {category}:heldout")
    return category, part or None


def rows(source: str) -> Iterator[dict]:
    """The agentrl rows of one BFCL category (``source``: ``CATEGORY``, ``CATEGORY:train``, ``CATEGORY:heldout``)."""
    category, part = _parse(source)
    bfcl.require()
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler.utils import convert_to_tool
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    hinted = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=True)
    plain = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    answers = [] if category in bfcl.RELEVANCE_CATEGORIES else load_ground_truth_entry(category)
    if answers and len(answers) != len(plain):
        raise ValueError(f"bfcl-eval's {category} has {len(plain)} rows and {len(answers)} possible answers")
    for n, (entry, doc) in enumerate(zip(hinted, plain)):
        split = split_of(entry["id"])
        if part and split != part:
            continue
        if len(entry["question"]) != 1:
            raise ValueError(f"{entry['id']}: {len(entry['question'])} user turns in a single-turn category")
        yield {
            "id": entry["id"],
            "messages": entry["question"][0],
            "metadata": {
                # the OpenAI style already wraps each as {"type": "function", "function": {...}}
                "declared_tools": convert_to_tool(entry["function"], GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS),
                "split": split,
                "bfcl_category": category,
                "bfcl": {"functions": doc["function"],
                         "possible_answer": answers[n]["ground_truth"] if answers else None},
            },
        }
