"""Negative controls: each catches the grader mistake it is built for (real reward files, run in the sandbox),
the demo's own rewards pay for none, and train's pre-flight names the row and the reward before it starts."""

from __future__ import annotations

import pytest

from agentrl.cli import main
from agentrl.rewards import RewardSet
from agentrl.rewards.controls import negative_controls, truncated
from agentrl.trajectory import make_item

from test_review import write_config

GOLD = 'str(item.get("reference_answer") or item["metadata"].get("expected_answer"))'
MISTAKES = {
    # the grader reads the reasoning as well as the answer
    "the gold answer in the reasoning only": f'''
def grade(sample, item):
    return 1.0 if {GOLD} in sample["final_answer"] + sample.get("reasoning", "") else 0.0
''',
    # the grader reads every assistant message, not the final answer
    "the gold answer in an earlier turn only": f'''
def grade(sample, item):
    said = sample["final_answer"] + " ".join(m["content"] for m in sample["messages"] if m["role"] == "assistant")
    return 1.0 if {GOLD} in said else 0.0
''',
    # the grader accepts an answer the gold starts with
    "the gold answer truncated": f'''
def grade(sample, item):
    words = sample["final_answer"].split()
    return 1.0 if words and {GOLD}.startswith(words[-1]) else 0.0
''',
    # the grader checks the format and not the content
    "format without content": f'''
def grade(sample, item):
    return 1.0 if "boxed" in sample["final_answer"] or {GOLD} in sample["final_answer"] else 0.0
''',
    # the grader accepts any bare number
    "a constant answer": f'''
def grade(sample, item):
    answer = sample["final_answer"].strip()
    return 1.0 if answer.isdigit() or answer == {GOLD} else 0.0
''',
}


@pytest.mark.parametrize("control", sorted(MISTAKES))
def test_each_control_catches_its_mistake_and_names_row_and_reward(tmp_path, capsys, control):
    assert main(["reward", "review", write_config(tmp_path, MISTAKES[control])]) == 1
    out = capsys.readouterr().out
    assert "adversarial  FAIL" in out and f"{control} scored 1.00 on train.jsonl:2" in out, out
    assert "gold         ok" in out  # each of them still pays the right answer


def test_the_demo_rewards_pay_for_no_control():
    from agentrl.demo.data import make_rows

    rewards = RewardSet.from_config([{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5}])
    for row in make_rows(4, 0):
        item = make_item(row["messages"], row["metadata"])
        controls = negative_controls(item)
        assert {"empty", "a constant answer", "the gold answer truncated", "format without content",
                "the gold answer in the reasoning only", "the gold answer in an earlier turn only"} <= set(controls)
        for label, sample in controls.items():
            result = rewards.score(sample, item)
            assert result.score is not None and result.score < 0.5, (label, row, result)


def test_the_truncated_gold_and_the_constant_are_never_the_gold():
    assert truncated("208") == "2" and truncated("Paris, France") == "Paris," and truncated("7") is None
    item = make_item([{"role": "user", "content": "6 * 7?"}], {"expected_answer": "42"})
    assert negative_controls(item)["a constant answer"]["final_answer"] == "0"


def test_train_reports_a_paid_control_with_row_and_reward_before_anything_starts(tmp_path, capsys):
    config = write_config(tmp_path, MISTAKES["the gold answer in the reasoning only"])
    assert main(["train", config]) == 2  # the warning, then the 2-row dataset stops it before verl starts
    captured = capsys.readouterr()
    assert "the gold answer in the reasoning only scored 1.00 on train.jsonl:1" in captured.out
    assert "training goes on" in captured.out and "no full training step" in captured.err
    assert not list((tmp_path / "runs" / "x").glob("logs/command.*.json"))  # verl was never started
