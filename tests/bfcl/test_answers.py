"""``agentrl data convert --from bfcl-answers``: BFCL's possible answers as warm-up demonstrations, each one
passed by bfcl-eval's own checker through the ``bfcl_ast`` reward before it is written."""

import pytest

from agentrl_bfcl import bfcl
from agentrl_bfcl.answers import answer_calls, answer_rows
from agentrl_bfcl.ast_reward import grade
from agentrl_bfcl.rows import rows

from .test_fidelity import UNPASSABLE

ANSWERED = [c for c in bfcl.SINGLE_TURN if c not in bfcl.RELEVANCE_CATEGORIES]


def test_first_accepted_values_and_optional_arguments_left_out():
    answer = [{"math.hypot": {"x": [4], "y": [5], "z": ["", 0]}}, {"f": {"s": ["a", "b"], "n": []}}]
    assert answer_calls(answer) == [{"name": "math_hypot", "arguments": {"x": 4, "y": 5}},
                                    {"name": "f", "arguments": {"s": "a"}}]


def test_required_arguments_and_dict_entries_take_their_first_value():
    # BFCL accepts "" (left out) for some required arguments (the function's default); the demonstration gives
    # the value, which the checker requires. A dict argument lists the accepted values of each entry.
    functions = [{"name": "g", "parameters": {"type": "dict", "required": ["formatted", "opts"], "properties": {
        "formatted": {"type": "boolean"}, "opts": {"type": "dict"}, "rows": {"type": "array"}}}}]
    answer = [{"g": {"formatted": [True, ""], "opts": [{"limit": [50, 10], "skip": [""], "tag": ["", "x"]}],
                     "rows": [[{"a": [1]}, {"a": [2, 3]}]]}}]
    assert answer_calls(answer, functions) == [{"name": "g", "arguments": {
        "formatted": True, "opts": {"limit": 50, "tag": "x"}, "rows": [{"a": 1}, {"a": 2}]}}]


@pytest.mark.parametrize("category", ANSWERED)
def test_every_demonstration_scores_one_with_bfcls_checker(category):
    every = {r["id"]: r for r in rows(category)}
    made = list(answer_rows(category))
    # left out: only the rows whose possible answer bfcl-eval's own checker cannot pass (see test_fidelity)
    assert set(every) - {r["id"] for r in made} == {i for i in UNPASSABLE if i in every}
    for row in made:
        (turn,) = row["metadata"]["demonstration"]
        assert turn["role"] == "assistant" and row["messages"] == every[row["id"]]["messages"]
        calls = [{"id": f"c{n}", **c["function"]} for n, c in enumerate(turn["tool_calls"])]
        assert grade({"trajectories": [{"tool_calls": calls}]}, row) == 1.0, row["id"]
        wrong = [dict(calls[0], name=calls[0]["name"] + "_x")] + calls[1:]
        assert grade({"trajectories": [{"tool_calls": wrong}]}, row) == 0.0, row["id"]


def test_categories_without_one_answer_are_refused():
    for category in ("irrelevance", "multi_turn_base"):
        with pytest.raises(ValueError, match="single-turn categories with one answer"):
            list(answer_rows(category))
