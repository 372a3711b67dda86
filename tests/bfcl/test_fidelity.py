"""Fidelity: on the same model outputs, agentrl's ``bfcl_ast`` scores what bfcl-eval's own runner scores, for
every row of every supported single-turn category (the outputs and both scorers: tests/bfcl/fidelity.py)."""

from __future__ import annotations

import pytest

from agentrl import plugins
from agentrl.rewards.errors import Unscorable
from agentrl.trajectory import make_item, make_sample, make_step

import agentrl_bfcl.plugin
from agentrl_bfcl import ast_reward, bfcl
from agentrl_bfcl.rows import rows

from . import fidelity

# Rows whose possible answer bfcl-eval's own checker rejects whatever the model writes (read by hand in
# bfcl-eval 2026.3.23's data): their ground truth scores 0 on both sides, every other row's scores 1.
UNPASSABLE = {
    "live_simple_106-63-0": "a possible value [] fails the checker's nested type check for array of strings",
    "live_simple_112-68-0": "a possible value [] fails the checker's nested type check for array of strings",
    "live_multiple_507-149-4": "the required origin_airport has only \"\" (left out) as its possible value",
    "live_multiple_862-181-3": "journey_start_time is required by the possible answer but not a parameter of the function",
    "live_multiple_964-207-0": "the possible answer gives 'question'; the function requires 'statement'",
    # ArrayList<any>: the checker reads every element back as a string (java_type_converter(e, "any")), and the
    # possible answer holds an int and booleans among them
    "simple_java_36": "parts: ArrayList<any> elements become strings, the possible answer has 42 and True",
    "simple_java_65": "params: ArrayList<any> elements become strings, the possible answer has True",
    "simple_java_64": "meta's entry format is the bare string 'epoch_millis', which the checker reads as the list "
                      "of its letters: it accepts 'e' or 'p', never 'epoch_millis'",
}
# Swapped calls in parallel rows pass (bfcl-eval's parallel checker ignores order) except where its greedy
# matching pairs a call with the wrong possible answer:
SWAP_REJECTED = {"parallel_178": "the first possible answer allows Microsoft or Apple; the swapped Apple call is "
                                 "matched to it first, and the Microsoft call then matches nothing"}
ALWAYS_WRONG = ("extra_call", "wrong_function", "no_call", "args_not_object")


@pytest.fixture(scope="module")
def compared():
    return {category: fidelity.compare(category) for category in bfcl.SINGLE_TURN}


@pytest.mark.parametrize("category", bfcl.SINGLE_TURN)
def test_agentrl_scores_every_output_as_bfcl_eval_does(compared, category):
    got = compared[category]
    assert got["rows"] == len(fidelity._file_ids(category))  # every row of the category
    disagree = [(i, k, a, b) for i, k, a, b in zip(got["ids"], got["kinds"], got["agentrl"], got["bfcl"]) if a != b]
    assert not disagree, disagree[:10]
    by_kind: dict[str, list[float]] = {}
    for kind, score in zip(got["kinds"], got["bfcl"]):
        by_kind.setdefault(kind, []).append(score)
    if category in bfcl.RELEVANCE_CATEGORIES:
        want = 1.0 if category != "live_relevance" else 0.0  # a row without a call passes irrelevance only
        assert set(by_kind["no_call"]) == {want} and set(by_kind["a_call"]) == {1.0 - want}
        return
    truth = {i: a for i, k, a in zip(got["ids"], got["kinds"], got["agentrl"]) if k == "ground_truth"}
    assert len(truth) == got["rows"]
    assert {i for i, a in truth.items() if a != 1.0} == {i for i in UNPASSABLE if i in truth}
    for kind in ALWAYS_WRONG:
        assert set(by_kind[kind]) == {0.0}, kind
    # the other perturbations are graded, not assumed: most of them fail (the checker forgives a few, e.g. an
    # optional argument's wrong value where the possible answer also allows it to be left out)
    for kind in ("wrong_value", "wrong_type", "missing_required"):
        assert sum(by_kind[kind]) < 0.2 * len(by_kind[kind]), kind
    if "parallel" in category:
        swapped = {i: a for i, k, a in zip(got["ids"], got["kinds"], got["agentrl"]) if k == "swapped_order"}
        assert swapped and {i for i, a in swapped.items() if a != 1.0} == {i for i in SWAP_REJECTED if i in swapped}


def test_the_reward_is_registered_and_reads_rows_as_converted():
    registered = plugins.rewards(plugins.new_plugin_manager(agentrl_bfcl.plugin))
    grade = registered["bfcl_ast"].value
    row = next(rows("simple_python"))  # simple_python_0: calculate_triangle_area(base=10, height=5)
    item = make_item(row["messages"], row["metadata"], id=row["id"])

    def sample(*calls):
        return make_sample("r", [make_step("", tool_calls=[{"id": f"d{n}", "name": name, "arguments": args}
                                                           for n, (name, args) in enumerate(calls)])])

    assert grade(sample(("calculate_triangle_area", {"base": 10, "height": 5})), item) == 1.0
    assert grade(sample(("calculate_triangle_area", {"base": 10, "height": 5, "unit": "units"})), item) == 1.0
    assert grade(sample(("calculate_triangle_area", {"base": 10, "height": 6})), item) == 0.0
    assert grade(sample(), item) == 0.0
    assert grade(sample(("calculate_triangle_area", {"base": 10, "height": 5})), item) == 1.0  # the row unchanged
    assert grade(sample(), make_item(row["messages"], {"expected_answer": "3"})) is None  # not a BFCL row


def test_a_checker_failure_is_unscorable_not_zero():
    row = next(rows("simple_python"))
    metadata = {**row["metadata"], "bfcl_category": "web_search_base"}  # not a category this reward scores
    step = make_step("", tool_calls=[{"id": "d0", "name": "calculate_triangle_area", "arguments": {"base": 10}}])
    with pytest.raises(Unscorable, match="web_search_base"):
        ast_reward.grade(make_sample("r", [step]), make_item(row["messages"], metadata, id=row["id"]))
