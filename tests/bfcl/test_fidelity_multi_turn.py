"""Multi-turn fidelity: on the same model outputs, ``bfcl_multi_turn`` scores what bfcl-eval's own runner
scores, for every row of every multi-turn category (outputs and both scorers: tests/bfcl/fidelity_multi_turn.py)."""

from __future__ import annotations

import pytest

from agentrl import plugins
from agentrl.rewards.errors import Unscorable
from agentrl.trajectory import make_item, make_sample, make_step

import agentrl_bfcl.plugin
from agentrl_bfcl import bfcl, multi_turn_reward
from agentrl_bfcl.rows import rows

from . import fidelity, fidelity_multi_turn

ALWAYS_RIGHT = ("ground_truth", "ground_truth_one_call_per_step")
ALWAYS_WRONG = ("missing_call", "missing_last_turn", "no_calls")


@pytest.fixture(scope="module")
def compared():
    return {category: fidelity_multi_turn.compare(category) for category in bfcl.MULTI_TURN}


@pytest.mark.parametrize("category", bfcl.MULTI_TURN)
def test_agentrl_scores_every_multi_turn_output_as_bfcl_eval_does(compared, category):
    got = compared[category]
    assert got["rows"] == len(fidelity._file_ids(category)) == 200  # every row of the category
    disagree = [(i, k, a, b) for i, k, a, b in zip(got["ids"], got["kinds"], got["agentrl"], got["bfcl"]) if a != b]
    assert not disagree, disagree[:10]
    by_kind: dict[str, list[float]] = {}
    for kind, score in zip(got["kinds"], got["bfcl"]):
        by_kind.setdefault(kind, []).append(score)
    for kind in ALWAYS_RIGHT:
        assert set(by_kind[kind]) == {1.0} and len(by_kind[kind]) == 200, kind
    for kind in ALWAYS_WRONG:
        assert set(by_kind[kind]) == {0.0}, kind
    # graded, not assumed: most fail; the checker forgives some (an extra `ls`, a wrong value the state ignores)
    for kind in ("wrong_argument", "wrong_step"):
        assert sum(by_kind[kind]) < 0.25 * len(by_kind[kind]), kind
    assert 0 < sum(by_kind["extra_call"]) < len(by_kind["extra_call"])  # a repeated read passes, a repeated write not


def _sample(*turns):
    """Steps of (calls) per turn, a plain answer ending each turn, a user reply between turns."""
    steps = []
    for n, turn in enumerate(turns):
        steps += [make_step("", tool_calls=[{"id": f"c{k}", "name": name, "arguments": args}
                                            for k, (name, args) in enumerate(calls)]) for calls in turn]
        steps.append(make_step("Done."))
        if n < len(turns) - 1:
            steps[-1]["user_reply"] = "next"
    return make_sample("r", steps)


def test_the_reward_is_registered_and_scores_rollouts_of_one_row_independently():
    grade = plugins.rewards(plugins.new_plugin_manager(agentrl_bfcl.plugin))["bfcl_multi_turn"].value
    row = next(r for r in rows("multi_turn_base") if r["id"] == "multi_turn_base_13")
    # ground truth: [cd(documents), tail(report.txt, lines=1)], [diff(report.txt, summary.txt)]
    item = make_item(row["messages"], row["metadata"], id=row["id"])
    right = _sample([[("cd", {"folder": "documents"}), ("tail", {"file_name": "report.txt", "lines": 1})]],
                    [[("diff", {"file_name1": "report.txt", "file_name2": "summary.txt"})]])
    split = _sample([[("cd", {"folder": "documents"})], [("tail", {"file_name": "report.txt", "lines": 1})]],
                    [[("diff", {"file_name1": "report.txt", "file_name2": "summary.txt"})]])
    failed_cd = _sample([[("cd", {"folder": "documents"}), ("tail", {"file_name": "report.txt", "lines": 1})]],
                        [[("cd", {"folder": "documents"}), ("diff", {"file_name1": "report.txt", "file_name2": "summary.txt"})]])
    touched = _sample([[("cd", {"folder": "documents"}), ("tail", {"file_name": "report.txt", "lines": 1})]],
                      [[("touch", {"file_name": "x.txt"}), ("diff", {"file_name1": "report.txt", "file_name2": "summary.txt"})]])
    late = _sample([[("cd", {"folder": "documents"})]],
                   [[("tail", {"file_name": "report.txt", "lines": 1}),
                     ("diff", {"file_name1": "report.txt", "file_name2": "summary.txt"})]])
    for _ in range(2):  # the same row again: each scoring starts from the row's initial config
        assert grade(right, item) == 1.0 and grade(split, item) == 1.0
        assert grade(late, item) == 0.0  # turn 0's tail result is missing at the end of turn 0
        assert grade(failed_cd, item) == 1.0  # an extra cd that fails (no documents/documents) changes no state
        assert grade(touched, item) == 0.0  # an extra file: the file system's state differs from the ground truth's
    assert grade(_sample([[("cd", {"folder": "documents"})]]), item) == 0.0  # one turn of two: ended early
    assert grade(right, make_item(row["messages"], {"expected_answer": "3"})) is None  # not a BFCL row
    single = next(rows("simple_python"))
    assert grade(right, make_item(single["messages"], single["metadata"], id=single["id"])) is None  # bfcl_ast's


def test_a_multi_turn_checker_failure_is_unscorable_not_zero():
    row = next(rows("multi_turn_base"))
    metadata = {**row["metadata"], "bfcl": {**row["metadata"]["bfcl"], "involved_classes": ["NoSuchAPI"]}}
    with pytest.raises(Unscorable, match="multi_turn_base_0.*NoSuchAPI"):
        multi_turn_reward.grade(_sample(*[[[("ls", {})]]] * 4), make_item(row["messages"], metadata, id=row["id"]))
