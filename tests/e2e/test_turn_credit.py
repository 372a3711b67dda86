"""End to end: ``agentrl.credit: turn`` through verl's real GRPO trainer on the CPU.

The demo (``model: demo``, the fully warmed build: it calls the calculator, then answers) with the math
reward and tool_use's per-turn form, and the calculator allowed only ``add``: a call to subtract or multiply
gets an error result, so its turn is penalised while the episode may still be answered. What must hold: the
advantages verl's trainer gave each turn's tokens (logged by ``agentrl_grpo`` to logs/advantages.jsonl) are
the ones :func:`agentrl.credit.fill` computes from the rollouts.jsonl records of the same groups, so the
per-turn rewards reached the trainer, turn by turn. And the update left out exactly the sequences whose every
advantage is zero (``agentrl.verl.flatgroups``), with the loss scale the driver chose applied in the worker's loss.
"""

from __future__ import annotations

import subprocess
from collections import defaultdict

import pytest

from agentrl.credit import fill
from agentrl.verl.flatgroups import choose
from runs import AGENTRL, read_jsonl  # tests/e2e/runs.py
from test_train import write_config


def test_turn_credit_reaches_the_trainer(tmp_path):
    demo = {"model_path": "demo", "train_path": "demo"}
    config = write_config(tmp_path, demo, max_steps=1, batch_size=4, credit={"method": "turn", "gamma": 0.5},
                          tools=["calculator"], tool_allow={"calculator": ["add"]}, agent={"max_turns": 3, "max_tool_calls": 2},
                          max_response_length=256,  # room for a turn after an error result (~60 tokens each)
                          rewards=[{"name": "math", "weight": 1.0},
                                   {"name": "tool_use", "weight": 0.5, "per_turn": True}])
    result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = tmp_path / "run"
    records = [r for r in read_jsonl(run / "rollouts.jsonl") if not r["validation"]]
    trained = read_jsonl(run / "logs" / "advantages.jsonl")
    assert len(records) == len(trained) == 16  # batch_size 4 x samples_per_prompt 4
    assert all(len(r["turn_rewards"]) == len(r["trajectories"]) for r in records)
    # the case this test is for: refused calls penalise their turns, and rollouts go past one turn
    assert any(t is not None and t < 0 for r in records for t in r["turn_rewards"]), [r["turn_rewards"] for r in records]
    assert any(len(a) > 1 for a in (t["turn_advantages"] for t in trained))
    assert any(v != 0 for t in trained for v in t["turn_advantages"])

    fill(records, "turn", gamma=0.5)
    by_group_records, by_group_trainer = defaultdict(list), defaultdict(list)
    for r in records:
        by_group_records[r["group"]].append(r["turn_advantages"])
    for t in trained:
        by_group_trainer[t["group"]].append(t["turn_advantages"])
    assert set(by_group_records) == set(by_group_trainer)
    for group, ours in by_group_records.items():  # the same rollouts, in whatever order each side saw them
        theirs = by_group_trainer[group]
        assert sorted(map(len, ours)) == sorted(map(len, theirs))
        key = lambda advs: [round(v, 4) for v in advs]  # noqa: E731
        for a, b in zip(sorted(ours, key=key), sorted(theirs, key=key)):
            assert a == pytest.approx(b, abs=1e-5)

    (step,) = [m["data"] for m in read_jsonl(run / "logs" / "verl_metrics.1.jsonl") if m["step"] == 1]
    flat = sum(all(v == 0 for v in t["turn_advantages"]) for t in trained)
    # the demo's vocabulary is small: one micro-batch holds the step's 16 sequences (agentrl.verl.cpuplan.cpu_micro_batch)
    kept, _ = choose([t["turn_advantages"] for t in trained], micro=16)
    assert step["agentrl/flat_skipped"] == len(trained) - len(kept) <= flat
    if step["agentrl/flat_skipped"]:
        assert step["actor/agentrl_loss_scale"] == pytest.approx(step["agentrl/flat_loss_scale"])
        assert 0 < step["agentrl/flat_loss_scale"] < 1
