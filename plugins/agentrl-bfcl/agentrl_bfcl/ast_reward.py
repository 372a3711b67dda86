"""The ``bfcl_ast`` reward: a single-turn BFCL row scored as bfcl-eval scores it, 1.0 valid and 0.0 not.

    rewards: [{"name": "bfcl_ast"}]
    sample.trajectories[0].tool_calls == [{"id": "d0", "name": "math_factorial", "arguments": {"number": 5}}]
    item.metadata.bfcl == {"functions": [...], "possible_answer": [{"math.factorial": {"number": [5]}}]}
    grade(sample, item) == 1.0

The model's answer is its first turn (BFCL's single-turn rows are one model response): the calls the tool-call
parser found there, as ``[{name: arguments}]``, which is what bfcl-eval's Hermes-format function-calling handler
(``QwenFCHandler.decode_ast``) makes of the same text: a ``<tool_call>`` block that is not JSON is dropped by both,
and a call whose arguments are not an object fails decoding in both. Then, as bfcl-eval's runner does:

* relevance / irrelevance rows: the output "contains a call" when it decodes and is not empty
  (``bfcl_eval.utils.is_empty_output``); irrelevance rows pass without one, relevance rows with one;
* every other category: the decoded output must have the function-calling format
  (``is_function_calling_format_output``), then bfcl-eval's own ``ast_checker`` decides, with the row's
  function docs and possible answer, the category's language (Python; Java for simple_java and JavaScript for
  simple_javascript, whose arguments are source text the checker reads back with its own type converters) and
  names read with "." as "_" (``agentrl_bfcl.bfcl.MODEL``).

Rows without ``metadata.bfcl``, and multi-turn rows (``bfcl_multi_turn`` scores those), are not this reward's:
it returns None (not applicable). A checker that raises is
"could not score" (:class:`~agentrl.rewards.errors.Unscorable`), never 0.
"""

from __future__ import annotations

from typing import Any

from agentrl.rewards.errors import Unscorable
from agentrl.trajectory import unwrap

from agentrl_bfcl import bfcl


class _Undecodable(ValueError):
    pass


def first_turn_output(sample: Any) -> list[dict]:
    """The first turn's calls as bfcl-eval's decoded output ``[{name: arguments}]``; :class:`_Undecodable`
    when a call's arguments are not an object (bfcl-eval's decoder fails on those)."""
    steps = sample.get("trajectories") or []
    calls = (steps[0].get("tool_calls") or []) if steps else []
    decoded = []
    for call in calls:
        arguments = call.get("arguments")
        if not isinstance(arguments, dict):
            raise _Undecodable(f"the arguments of {call.get('name')!r} are not an object: {arguments!r}")
        decoded.append({call.get("name"): unwrap(arguments)})
    return decoded


def score_output(category: str, functions: list, possible_answer: list | None, output: list | Exception) -> float:
    """1.0 when bfcl-eval's runner would count ``output`` (decoded, or the decoding error) correct, else 0.0."""
    bfcl.require()
    from bfcl_eval.utils import is_empty_output, is_function_calling_format_output

    decoded_ok = not isinstance(output, Exception)
    if category in bfcl.RELEVANCE_CATEGORIES:
        has_call = decoded_ok and not is_empty_output(output)
        return float(has_call != ("irrelevance" in category))
    if category not in bfcl.AST_CATEGORIES:
        raise ValueError(f"bfcl_ast scores single-turn categories ({', '.join(bfcl.SINGLE_TURN)}), not {category!r}")
    if not decoded_ok or not is_function_calling_format_output(output):
        return 0.0
    # plain dicts and lists, freshly made: the checker tests `type(x) == dict` (the sample's and item's attribute
    # dicts would fail it), and it may edit what it is given, while one row is scored for many rollouts
    functions, output, possible_answer = unwrap((functions, output, possible_answer))
    result = bfcl.ast_checker(functions, output, possible_answer, bfcl.language(category), category, bfcl.MODEL)
    return 1.0 if result["valid"] else 0.0


def grade(sample: Any, item: Any) -> float | None:
    metadata = item.get("metadata") or {}
    row = metadata.get("bfcl")
    category = metadata.get("bfcl_category")
    if not isinstance(row, dict) or category in bfcl.MULTI_TURN:
        return None
    try:
        output: list | Exception = first_turn_output(sample)
    except _Undecodable as exc:
        output = exc
    try:
        return score_output(category, row.get("functions") or [], row.get("possible_answer"), output)
    except bfcl.BfclMissing as exc:
        raise Unscorable(str(exc)) from None
    except Exception as exc:  # bfcl-eval's checker itself failed on this output: could not score, not 0
        raise Unscorable(f"bfcl-eval's checker raised on row {item.get('id')!r}: {type(exc).__name__}: {exc}") from None
