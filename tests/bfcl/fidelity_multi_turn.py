"""Multi-turn fidelity: the same model outputs scored by agentrl (verl's Hermes tool-call parser, the steps and
user-turn boundaries the agent loop records, then ``bfcl_multi_turn``) and by bfcl-eval's own runner
(``_evaluate_single_multi_turn_entry`` with its Hermes-format function-calling handler, ``QwenFCHandler``), for
every row of every multi-turn category.

    cd tests && python -m bfcl.fidelity_multi_turn     # prints the agreement table the README quotes

A model output is a list of user turns, each a list of assistant steps (the text of one turn with ``<tool_call>``
blocks); every turn ends with a step that calls nothing, after which the next user turn is sent. Per row:
the ground truth (each turn's calls in one step), the ground truth one call per step, and perturbations: a
wrong argument value, a missing call, an extra call (the turn's first call again), a wrong step (a call made to
another function of the row), a missing last turn, no calls at all. The ground truth's calls are bfcl-eval's
Python call strings, read with ``ast`` into JSON arguments (positional arguments named from the method's
signature).
"""

from __future__ import annotations

import ast
import asyncio
import copy
import importlib
import inspect
import json
import uuid
from collections import Counter
from typing import Any, Iterator

from agentrl.trajectory import make_item, make_sample, make_step

from agentrl_bfcl import bfcl, multi_turn_reward
from agentrl_bfcl.rows import rows

from .fidelity import _ByteTokenizer, text_of

DONE = "Done."


def _methods(classes: list[str]) -> dict[str, inspect.Signature]:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    found = {}
    for name in classes:
        cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)
        for method, fn in inspect.getmembers(cls, inspect.isfunction):
            if not method.startswith("_"):
                found[method] = inspect.signature(fn)
    return found


def parse_call(text: str, methods: dict[str, inspect.Signature]) -> tuple[str, dict]:
    """``"mv(source='a', destination='b')"`` → ``("mv", {"source": "a", "destination": "b"})``."""
    call = ast.parse(text, mode="eval").body
    name = call.func.id
    params = [p for p in methods[name].parameters if p != "self"]
    args = {params[n]: ast.literal_eval(a) for n, a in enumerate(call.args)}
    args.update({k.arg: ast.literal_eval(k.value) for k in call.keywords})
    return name, json.loads(json.dumps(args))  # as a model's JSON arguments arrive (tuples become lists)


def _turn(calls: list[tuple[str, dict]], *, one_per_step: bool = False) -> list[str]:
    steps = [text_of([c]) for c in calls] if one_per_step else [text_of(calls)] if calls else []
    return steps + [DONE if calls else "I cannot do that with the functions I have."]


def _other_value(v: Any) -> Any:
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v + 7
    if isinstance(v, str):
        return v + "_x"
    return [v]


def outputs(row: dict) -> Iterator[tuple[str, list[list[str]]]]:
    """(kind, turns of step texts) for one converted row."""
    meta = row["metadata"]["bfcl"]
    methods = _methods(meta["involved_classes"])
    gt = [[parse_call(c, methods) for c in turn] for turn in meta["ground_truth"]]
    yield "ground_truth", [_turn(t) for t in gt]
    yield "ground_truth_one_call_per_step", [_turn(t, one_per_step=True) for t in gt]
    first = next(n for n, t in enumerate(gt) if t)
    with_args = next(((n, i) for n, t in enumerate(gt) for i, (_, a) in enumerate(t) if a), None)
    if with_args:
        n, i = with_args
        name, args = gt[n][i]
        key = next(iter(args))
        changed = [list(t) for t in gt]
        changed[n][i] = (name, {**args, key: _other_value(args[key])})
        yield "wrong_argument", [_turn(t) for t in changed]
    yield "missing_call", [_turn(t[:-1] if n == first else t) for n, t in enumerate(gt)]
    yield "extra_call", [_turn(t + t[:1] if n == first else t) for n, t in enumerate(gt)]
    last = max(n for n, t in enumerate(gt) if t)
    name, args = gt[last][0]
    other = next(m for m in sorted(methods) if m != name and m in row["metadata"]["allowed_tools"])
    yield "wrong_step", [_turn([(other, args)] + t[1:] if n == last else t) for n, t in enumerate(gt)]
    yield "missing_last_turn", [_turn(t) for t in gt[:-1]]
    yield "no_calls", [_turn([]) for _ in gt]


def agentrl_scores(texts: list[tuple[dict, list[list[str]]]]) -> list[float]:
    """Each output parsed step by step by verl's Hermes parser, recorded as the agent loop records a rollout
    (a scripted user reply after each turn's last step but the final one), scored by ``bfcl_multi_turn``."""
    import logging

    from verl.experimental.agent_loop.tool_parser import ToolParser

    parser = ToolParser.get_tool_parser("hermes", _ByteTokenizer())
    flat = [text for _, turns in texts for turn in turns for text in turn]

    async def parse_all():
        logging.disable(logging.ERROR)
        try:
            return [await parser.extract_tool_calls(list(text.encode("utf-8"))) for text in flat]
        finally:
            logging.disable(logging.NOTSET)

    parsed = iter(asyncio.run(parse_all()))
    scores, items = [], {}
    for row, turns in texts:
        steps = []
        for n, turn in enumerate(turns):
            for text in turn:
                _, calls = next(parsed)
                steps.append(make_step(text, tool_calls=[{"id": f"c{k}", "name": c.name,
                                                          "arguments": json.loads(c.arguments)}
                                                         for k, c in enumerate(calls)]))
            if n < len(row["metadata"]["user_turns"]):
                steps[-1]["user_reply"] = "(the row's next user turn)"
        if row["id"] not in items:  # one item per row, as the reward sees one row's rollouts
            items[row["id"]] = make_item(row["messages"], row["metadata"], id=row["id"])
        scores.append(multi_turn_reward.grade(make_sample("r", steps), items[row["id"]]))
    return scores


def bfcl_scores(category: str, texts: list[tuple[dict, list[list[str]]]]) -> list[float]:
    """Each output scored by bfcl-eval's runner, as it scores a Hermes-format function-calling model's result
    (each output under a model name of its own: a fresh run of the runner)."""
    bfcl.require()
    from bfcl_eval.eval_checker.eval_runner import _evaluate_single_multi_turn_entry
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    handler = QwenFCHandler(model_name=bfcl.MODEL, temperature=0, registry_name=bfcl.MODEL, is_fc_model=True)
    entries = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    prompts = {e["id"]: e for e in entries}
    answers = {e["id"]: a["ground_truth"] for e, a in zip(entries, load_ground_truth_entry(category))}
    scores = []
    for row, turns in texts:
        prompt, answer = copy.deepcopy((prompts[row["id"]], answers[row["id"]]))
        model = f"bfcl-{uuid.uuid4().hex}"
        result = _evaluate_single_multi_turn_entry(handler, row["id"], turns, answer, prompt, model, category)
        scores.append(1.0 if result["valid"] else 0.0)
    return scores


def compare(category: str) -> dict:
    texts, kinds = [], []
    for row in rows(category):
        for kind, turns in outputs(row):
            texts.append((row, turns))
            kinds.append(kind)
    ours, theirs = agentrl_scores(texts), bfcl_scores(category, texts)
    return {"category": category, "rows": len({r["id"] for r, _ in texts}), "kinds": kinds,
            "ids": [r["id"] for r, _ in texts], "agentrl": ours, "bfcl": theirs}


if __name__ == "__main__":
    import time

    total: Counter = Counter()
    for category in bfcl.MULTI_TURN:
        started = time.perf_counter()
        got = compare(category)
        agree = sum(a == b for a, b in zip(got["agentrl"], got["bfcl"]))
        line = {"rows": got["rows"], "outputs": len(got["kinds"]), "agree": agree, "bfcl_valid": int(sum(got["bfcl"]))}
        total.update(line)
        print(f"{category:24s} rows {line['rows']:4d}  outputs {line['outputs']:5d}  agree {agree:5d}  valid by "
              f"bfcl-eval {line['bfcl_valid']:5d}  ({time.perf_counter() - started:.1f} s)")
    print(f"{'all':24s} rows {total['rows']:4d}  outputs {total['outputs']:5d}  agree {total['agree']:5d}  valid by "
          f"bfcl-eval {total['bfcl_valid']:5d}")
