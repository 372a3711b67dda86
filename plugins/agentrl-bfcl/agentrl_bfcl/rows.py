"""BFCL's rows as agentrl rows: ``agentrl data convert --from bfcl CATEGORY[:train|:heldout] -o FILE``.

    agentrl data convert --from bfcl simple_python -o simple_python.jsonl
    {"id": "simple_python_1",
     "messages": [{"role": "user", "content": "Calculate the factorial of 5 using math functions."}],
     "metadata": {"declared_tools": [{"type": "function", "function": {"name": "math_factorial", ...}}],
                  "split": "train", "bfcl_category": "simple_python",
                  "bfcl": {"functions": [...BFCL's function docs...],
                           "possible_answer": [{"math.factorial": {"number": [5]}}]}}}

Everything is read and shaped by bfcl-eval's own code: ``load_dataset_entry`` (with the language hint BFCL's
generation adds: "Note that the provided function is in Python 3 syntax."; in simple_java and simple_javascript
"... in Java 8 SDK syntax." / "... in JavaScript syntax." and every parameter offered as a string of source text,
"This is Java boolean type parameter in string representation.") and ``convert_to_tool`` with
``GORILLA_TO_OPENAPI`` in the OpenAI style, the tools a function-calling model is given on the leaderboard ("."
in names becomes "_"). The tools are *declared* (``metadata.declared_tools``): nothing executes them, the calls
are the answer, and the episode ends after the turn that makes them. ``metadata.bfcl`` keeps what the checker
reads: the function docs as bfcl-eval's evaluation loads them (no hint) and the possible answer (none for
relevance/irrelevance rows).

The split, by id: a row is held out when ``sha256(id)`` read as a number is divisible by 5 (about one row in
five), so it never moves when rows are added or categories combined. ``CATEGORY:train`` / ``CATEGORY:heldout``
write only that part; plain ``CATEGORY`` writes every row with ``metadata.split`` set.

Multi-turn categories (multi_turn_base, multi_turn_miss_func, multi_turn_miss_param, multi_turn_long_context):

    {"id": "multi_turn_base_0",
     "messages": [{"role": "user", "content": "Move 'final_report.pdf' within document directory to 'temp' ..."}],
     "metadata": {"user_turns": [[{"role": "user", "content": "Perform a detailed search using grep ..."}], ...],
                  "allowed_tools": ["cd", "ls", "mkdir", ...],
                  "tool_setup": [{"name": "bfcl_load_scenario", "arguments": {"id": ..., "initial_config": ...}}],
                  "split": "train", "bfcl_category": "multi_turn_base",
                  "bfcl": {"initial_config": {"GorillaFileSystem": {...}, "TwitterAPI": {...}},
                           "involved_classes": ["GorillaFileSystem", "TwitterAPI"],
                           "functions": [...], "missed_function": {}, "ground_truth": [["cd(folder='document')", ...], ...]}}}

The first user turn is the row's messages; the later ones are ``metadata.user_turns``, sent one by one by the
agent loop whenever the model ends its turn (scripted, no LLM). The functions are *served* (the ``bfcl``
environment server, ``agentrl_bfcl.server``, runs them against the row's initial config, which the agent loop
loads through ``tool_setup`` before the model's first turn) and ``allowed_tools`` names the ones offered at
the start. A miss_func row holds some functions back: BFCL's empty user turn there becomes
``{"messages": [...], "tools": [names]}``, the message BFCL's prompting handlers send at that turn (the new
function docs, then "I have updated some more functions you can choose from. What about now?"), and the
names are offered from that turn on.
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
    if category in bfcl.UNSUPPORTED:
        raise ValueError(f"BFCL category {category!r} is not supported by agentrl-bfcl: {bfcl.UNSUPPORTED[category]}; "
                         f"the supported categories are {', '.join(bfcl.SINGLE_TURN + bfcl.MULTI_TURN)}")
    if category not in bfcl.SINGLE_TURN + bfcl.MULTI_TURN:
        raise ValueError(f"unknown BFCL category {category!r}; use one of "
                         f"{', '.join(bfcl.SINGLE_TURN + bfcl.MULTI_TURN)} "
                         f"(optionally :train or :heldout)")
    if part and part not in SPLITS:
        raise ValueError(f"unknown split {part!r} in {source!r}; use {category}:train or {category}:heldout")
    return category, part or None


def rows(source: str) -> Iterator[dict]:
    """The agentrl rows of one BFCL category (``source``: ``CATEGORY``, ``CATEGORY:train``, ``CATEGORY:heldout``)."""
    category, part = _parse(source)
    bfcl.require()
    if category in bfcl.MULTI_TURN:
        yield from _multi_turn_rows(category, part)
        return
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


def _multi_turn_rows(category: str, part: str | None) -> Iterator[dict]:
    """The rows of one multi-turn category (see the module docstring)."""
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    entries = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    answers = load_ground_truth_entry(category)
    if len(answers) != len(entries):
        raise ValueError(f"bfcl-eval's {category} has {len(entries)} rows and {len(answers)} possible answers")
    for entry, answer in zip(entries, answers):
        split = split_of(entry["id"])
        if part and split != part:
            continue
        missed = entry.get("missed_function") or {}
        turns: list = []
        for n, messages in enumerate(entry["question"][1:], start=1):
            held = missed.get(str(n))
            if held is None:
                turns.append(messages)
                continue
            if messages:
                raise ValueError(f"{entry['id']}: turn {n} adds held-back functions and also has user messages")
            text = DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=held)
            turns.append({"messages": [{"role": "user", "content": text}], "tools": [f["name"] for f in held]})
        yield {
            "id": entry["id"],
            "messages": entry["question"][0],
            "metadata": {
                "user_turns": turns,
                "allowed_tools": [f["name"] for f in entry["function"]],
                "tool_setup": [{"name": "bfcl_load_scenario", "arguments": {
                    "id": entry["id"], "initial_config": entry["initial_config"],
                    "involved_classes": entry["involved_classes"], "long_context": "long_context" in category}}],
                "split": split,
                "bfcl_category": category,
                "bfcl": {"initial_config": entry["initial_config"], "involved_classes": entry["involved_classes"],
                         "functions": entry["function"], "missed_function": missed,
                         "ground_truth": answer["ground_truth"]},
            },
        }
