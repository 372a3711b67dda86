"""The ``bfcl_multi_turn`` reward: a multi-turn BFCL row scored as bfcl-eval scores it, 1.0 valid and 0.0 not.

    rewards: [{"name": "bfcl_multi_turn"}]
    sample.trajectories == [step(tool_calls=[cd(folder="document"), mkdir(dir_name="temp"), mv(...)]),
                            step("Done.", user_reply="Perform a detailed search ..."), ...]
    item.metadata.bfcl == {"initial_config": {...}, "involved_classes": [...], "ground_truth": [[...], ...]}
    grade(sample, item) == 1.0

The rollout is read as bfcl-eval's runner reads a model's multi-turn result: one list per user turn (a step
whose ``user_reply`` is set ends a turn: the agent loop sent the row's next scripted user turn after it), in
it one list per step that made calls, each call written as bfcl-eval writes a decoded call
(``convert_to_function_call``: ``name(key=repr(value), ...)``). Steps without calls are left out, as the runner
leaves out steps that decode to nothing. Then, as ``_evaluate_single_multi_turn_entry`` does: fewer or more
turns than the row has (a rollout that ended early) is invalid ("force-terminated"), and otherwise bfcl-eval's
own ``multi_turn_checker`` decides: it replays the model's calls and the ground truth turn by turn on fresh
instances of the row's classes, initialised from the row's initial config, and after each turn compares the
instances' states and checks that the ground truth's execution results are among the model's.

The checker keeps its instances in a module dictionary keyed by model name and row id (so that a later turn
finds the earlier turn's state); every scoring here uses a model name of its own and removes its instances
afterwards, so rollouts of one row never see each other's state. A row without ``metadata.bfcl.ground_truth``
as a list of turns is not this reward's (None). A checker that raises is "could not score", never 0.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from agentrl.rewards.errors import Unscorable
from agentrl.trajectory import unwrap

from agentrl_bfcl import bfcl


def turns_of(sample: Any) -> list[list[list[str]]]:
    """The rollout's calls per user turn and per step, as bfcl-eval's decoded multi-turn result."""
    from bfcl_eval.model_handler.utils import convert_to_function_call

    turns: list[list[list[str]]] = []
    replied = True  # the row's first user turn opens the first turn
    for step in sample.get("trajectories") or []:
        if replied:  # a user turn is a turn of the result once the model answered it (a rollout may end first)
            turns.append([])
        calls = [{c.get("name"): unwrap(c.get("arguments"))} for c in step.get("tool_calls") or []]
        if calls and all(isinstance(args, dict) for call in calls for args in call.values()):
            turns[-1].append(convert_to_function_call(calls))  # a step that does not decode is left out, as by BFCL
        replied = step.get("user_reply") is not None
    return turns


def score_turns(turns: list, row: dict, row_id: str, category: str) -> float:
    """1.0 when bfcl-eval's runner would count the decoded multi-turn result ``turns`` correct, else 0.0."""
    bfcl.require()
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    ground_truth = unwrap(row["ground_truth"])
    if len(turns) != len(ground_truth):
        return 0.0
    model = f"{bfcl.MODEL}-{uuid.uuid4().hex}"
    entry = {"id": row_id, "initial_config": unwrap(row["initial_config"]),
             "involved_classes": unwrap(row["involved_classes"])}
    try:
        return 1.0 if multi_turn_checker(turns, ground_truth, entry, category, model)["valid"] else 0.0
    finally:
        prefix = re.sub(r"[-./:]", "_", model)
        for name in [n for n in vars(multi_turn_utils) if n.startswith(prefix)]:
            vars(multi_turn_utils).pop(name, None)


def grade(sample: Any, item: Any) -> float | None:
    metadata = item.get("metadata") or {}
    row = metadata.get("bfcl")
    if not isinstance(row, dict) or not isinstance(row.get("ground_truth"), list):
        return None
    category = metadata.get("bfcl_category")
    try:
        if category not in bfcl.MULTI_TURN:
            raise ValueError(f"bfcl_multi_turn scores multi-turn categories ({', '.join(bfcl.MULTI_TURN)}), "
                             f"not {category!r}")
        return score_turns(turns_of(sample), row, item.get("id"), category)
    except bfcl.BfclMissing as exc:
        raise Unscorable(str(exc)) from None
    except Exception as exc:  # bfcl-eval's checker itself failed on this rollout: could not score, not 0
        raise Unscorable(f"bfcl-eval's multi-turn checker raised on row {item.get('id')!r}: "
                         f"{type(exc).__name__}: {exc}") from None
