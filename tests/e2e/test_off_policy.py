"""End to end: off-policy training (``agentrl.max_off_policy_steps: 1``) on verl's real trainer, killed with
``kill -9`` in the middle of a step and resumed, with a slow tool (the calculator answering 0.3 s late).

One run, three attempts, killed at two different points: the first (``kill -9`` of `agentrl train`, as a user
would) after verl drew step 2's batch and before step 2's checkpoint, while rollouts for step 3 are being
generated; the second (resumed from the checkpoint verl reached; ``kill -9`` of all its processes at once, as the
OOM killer would) the moment its next checkpoint, and at least step 3's, is complete, with the next batches drawn or being drawn; the third
resumes from the last checkpoint verl completed to the end. The tests count prompts and groups: every step trained once, no prompt group trained twice, no prompt of the
epoch skipped (the only prompts drawn and never trained are the last prefetched batch), and every training
rollout in rollouts.jsonl once, at the step that trained it, with its staleness.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from runs import AGENTRL, kill_9, kill_tree_9, read_jsonl, tracker_step, wait_for  # tests/e2e/runs.py

STEPS = 6  # room for a third attempt however far the first kill's grace let verl go
BATCH = 2
GROUP = 4
AHEAD = 1  # max_off_policy_steps


def trained_steps(run: Path) -> list[int]:
    path = run / "logs" / "trained.jsonl"
    return [r["step"] for r in read_jsonl(path)] if path.exists() else []


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory, demo):  # noqa: F811
    root = tmp_path_factory.mktemp("offpolicy")
    rows = Path(demo["train_path"]).read_text().splitlines()
    (root / "train.jsonl").write_text("\n".join(rows[:20]) + "\n")  # one epoch holds every batch drawn
    run = root / "run"
    slow = {"calculator": {"plugin": "calculator", "args": ["-m", "agentrl_calculator", "--delay", "0.3"]}}
    block = {
        "name": "offpolicy", "model": demo["model_path"], "train_data": "train.jsonl", "tools": slow,
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5}],
        "batch_size": BATCH, "samples_per_prompt": GROUP, "max_steps": STEPS, "save_every": 1,
        "max_off_policy_steps": AHEAD, "max_prompt_length": 320, "max_response_length": 64,
        "learning_rate": 5e-4, "run_dir": str(run), "agent": {"max_turns": 2, "max_tool_calls": 2},
    }
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump({"agentrl": block}))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    result: dict = {"run": run}

    first = subprocess.Popen(AGENTRL + ["train", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env, cwd=root)
    # step 2's batch is drawn and training on it, step 1 is checkpointed, step 2 is not yet
    wait_for(lambda: 2 in trained_steps(run) and tracker_step(run) == 1, 900, first, every=0.1)
    result["generated_at_kill"] = len(read_jsonl(run / "logs" / "generated.jsonl"))
    result["alive_after_kill"] = kill_9(first)["left"]
    # what verl really reached, read once nothing of the attempt is left: off-policy, step 2's rollouts are ready
    # when step 1 ends and step 2 can train and checkpoint in under a second (0.7 s in one CI run), so the kill may
    # land after that checkpoint; the resume must then start from it and set aside only what was trained past it
    result["step_at_kill"] = tracker_step(run)
    result["trained_at_kill"] = trained_steps(run)

    second = subprocess.Popen(AGENTRL + ["train", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env, cwd=root)
    # the checkpoint after the one it resumed from, and at least step 3's: the first kill's guard gives verl up to
    # 4 s, in which steps whose rollouts were ready may go on and checkpoint (one CI run: verl reached step 3, the
    # second attempt was killed before it printed a line)
    target = max(3, result["step_at_kill"] + 1)
    wait_for(lambda: tracker_step(run) >= target, 900, second, every=0.05)  # that checkpoint just completed
    # every process of the attempt at once: after a kill of `agentrl train` alone its guard gives verl up to 4 s,
    # in which off-policy steps whose rollouts are ready go on training (one CI run: steps 4 and 5, checkpoint 4;
    # with the kill 2.5 s late, the run finished)
    result["alive_after_kill2"] = kill_tree_9(second)["left"]
    result["out2"] = second.communicate(timeout=60)[0]
    # what verl reached, read as for the first kill: a step whose rollouts were ready may still have checkpointed
    # in the instant before the kill reached its process
    result["step_at_kill2"] = tracker_step(run)
    assert 3 <= result["step_at_kill2"] < STEPS, result["step_at_kill2"]  # the third attempt has a step to train
    result["trained_at_kill2"] = trained_steps(run)  # once nothing of the attempt is left to write it

    third = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, env=env, cwd=root,
                           timeout=1200)
    result["out"], result["rc"] = third.stdout + third.stderr, third.returncode
    return result


def test_the_killed_run_resumes_and_finishes(killed_run):
    out = killed_run["out"]
    assert killed_run["alive_after_kill"] == [] and killed_run["alive_after_kill2"] == []
    assert f"from checkpoint step {killed_run['step_at_kill']} of {STEPS}" in killed_run["out2"]
    assert killed_run["rc"] == 0, out
    assert f"from checkpoint step {killed_run['step_at_kill2']} of {STEPS}" in out
    assert f"done, step {STEPS} of {STEPS}" in out
    assert "staleness" in out


def test_every_step_once_with_its_staleness(killed_run):
    run = killed_run["run"]
    train = [m for m in read_jsonl(run / "metrics.jsonl") if not m["validation"]]
    assert [m["step"] for m in train] == list(range(1, STEPS + 1))
    assert all(m["rollouts"] == BATCH * GROUP for m in train)
    for m in train:
        assert sum(v for k, v in m.items() if k.startswith("staleness/")) == BATCH * GROUP
        assert 0 <= m["staleness_max"] <= AHEAD, m  # verl's sampler waits rather than train on older
    # generation runs ahead: after the first step the trainer trains on rollouts an update old
    assert any(m["staleness_max"] >= 1 for m in train[1:])
    assert trained_steps(run) == list(range(1, STEPS + 1))  # the killed attempt's step 2 was set aside
    # the killed attempt's steps trained past its last checkpoint were set aside (step 2, when the kill came first)
    first_past = [s for s in killed_run["trained_at_kill"] if s > killed_run["step_at_kill"]]
    aside = run / "logs" / "rewound.2.trained.jsonl"
    assert ([r["step"] for r in read_jsonl(aside)] if aside.exists() else []) == first_past
    # the third attempt set aside what the second trained past its last checkpoint (the next step or two, if verl
    # drew them before the kill)
    past = [s for s in killed_run["trained_at_kill2"] if s > killed_run["step_at_kill2"]]
    aside = run / "logs" / "rewound.3.trained.jsonl"
    assert ([r["step"] for r in read_jsonl(aside)] if aside.exists() else []) == past


def test_no_prompt_trained_twice_or_skipped(killed_run):
    run = killed_run["run"]
    trained = read_jsonl(run / "logs" / "trained.jsonl")
    groups = [g for line in trained for g in line["groups"]]
    assert len(groups) == STEPS * BATCH and len(set(groups)) == len(groups)  # each group trained once

    rollouts = [r for r in read_jsonl(run / "rollouts.jsonl") if not r["validation"]]
    ids = [r["rollout_id"] for r in rollouts]
    assert len(ids) == len(set(ids)) == STEPS * BATCH * GROUP
    for line in trained:  # each step's rollouts are the groups that step trained, all of them
        mine = [r for r in rollouts if r["step"] == line["step"]]
        assert sorted({r["group"] for r in mine}) == sorted(line["groups"])
        assert all(sum(r["group"] == g for r in mine) == GROUP for g in line["groups"])
        assert all(r["staleness"] == line["step"] - 1 - r["policy_version"] for r in mine)
        assert all(r["drawn_step"] <= line["step"] for r in mine)
    trained_prompts = {r["prompt_id"] for r in rollouts}
    assert len(trained_prompts) == STEPS * BATCH  # no prompt trained twice in the epoch

    # every prompt any attempt drew (the killed ones' included) was trained, except the batch the run
    # prefetched last: nothing in flight at either kill was lost
    drawn = {r["prompt_id"] for r in read_jsonl(run / "logs" / "generated.jsonl")}
    assert trained_prompts <= drawn
    assert len(drawn - trained_prompts) <= AHEAD * BATCH, sorted(drawn - trained_prompts)
    assert killed_run["generated_at_kill"] > 0


def test_the_update_left_out_exactly_the_flat_groups(killed_run):
    """agentrl.verl.flatgroups, off-policy and across resumes: each step's update left out the sequences of the
    groups whose rollouts all scored alike (advantage 0 everywhere), and the worker's loss applied the scale the
    driver chose, so the gradient is the whole batch's."""
    run = killed_run["run"]
    rollouts = [r for r in read_jsonl(run / "rollouts.jsonl") if not r["validation"]]
    logged = {}
    for path in sorted((run / "logs").glob("verl_metrics.*.jsonl")):  # a resumed step: its last attempt's line
        logged.update({m["step"]: m["data"] for m in read_jsonl(path) if "agentrl/flat_skipped" in m["data"]})
    # verl writes a step's metrics line after its checkpoint: a kill that lands between the two (the second attempt
    # is killed the moment its target checkpoint completes, and may land after the next one's; the first may land
    # after step 2's or later) loses that one line, and the resumed run goes on from the step after it. Every other step has its line.
    may_miss = {killed_run["step_at_kill2"], killed_run["step_at_kill"]}
    missing = set(range(1, STEPS + 1)) - set(logged)
    assert missing <= may_miss and set(logged) <= set(range(1, STEPS + 1)), (sorted(logged), may_miss)
    for step, data in logged.items():
        groups: dict = {}
        for r in rollouts:
            if r["step"] == step:
                groups.setdefault(r["group"], []).append(r)
        flat = 0
        for g in groups.values():  # an unscorable rollout has advantage 0 and the rest are grouped without it
            scored = [r for r in g if not r["unscorable"]]
            flat += len(g) - len(scored) + (len(scored) if len({r["reward"] for r in scored}) <= 1 else 0)
        total = sum(len(g) for g in groups.values())
        assert data["agentrl/flat_skipped"] == (total - 1 if flat == total else flat), (step, groups)
        if data["agentrl/flat_skipped"]:
            assert data["actor/agentrl_loss_scale"] == pytest.approx(data["agentrl/flat_loss_scale"])
    assert any(data["agentrl/flat_skipped"] for data in logged.values())  # not a check that could not fail
