"""The reward set's version: a digest of code, settings and weights, carried by every score and listed per run."""

from __future__ import annotations

import json

from agentrl.metrics import rollout_summary
from agentrl.record import RolloutRecord
from agentrl.rewards import RewardSet
from agentrl.rewards.versions import describe, record_version
from agentrl.rundir import RunDir

DEMO = [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5}]
FILE = "def grade(sample, item):\n    return 1.0 if '7' in sample['final_answer'] else 0.0\n"


def test_the_same_rewards_built_twice_have_the_same_version_and_any_change_gives_another(tmp_path):
    base = RewardSet.from_config(DEMO).version
    assert base.startswith("rv-") and base == RewardSet.from_config([dict(r) for r in DEMO]).version
    reweighted = RewardSet.from_config([DEMO[0], {**DEMO[1], "weight": 1.0}]).version
    relabelled = RewardSet.from_config([DEMO[0], {**DEMO[1], "label": "tools"}]).version
    other_judge = RewardSet.from_config([{"name": "llm_judge", "model": "openai/judge-b"}]).version
    judge = RewardSet.from_config([{"name": "llm_judge", "model": "openai/judge-a"}]).version
    prompt = RewardSet.from_config([{"name": "llm_judge", "model": "openai/judge-a", "template": "{sample.final_answer}?"}])
    assert len({base, reweighted, relabelled, other_judge, judge, prompt.version}) == 6


def test_a_reward_files_text_is_its_code(tmp_path):
    path = tmp_path / "my_reward.py"
    path.write_text(FILE)
    first = RewardSet.from_config([str(path)]).version
    assert RewardSet.from_config([str(path)]).version == first
    path.write_text(FILE.replace("'7'", "'8'"))
    assert RewardSet.from_config([str(path)]).version != first


def test_a_preset_is_versioned_with_the_helpers_it_uses_and_no_secret_reaches_the_description(monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", "sk-secret-value")
    described = describe(RewardSet.from_config([{"name": "math"}, {"name": "llm_judge", "env": ["JUDGE_KEY"]}]))
    math, judge = described["components"]
    assert "agentrl.rewards.mathcheck" in math["code"] and math["distribution"].startswith("agentrl ")
    assert "agentrl.rewards.judge" in judge["code"] and judge["env_names"] == ["JUDGE_KEY"]
    assert "sk-secret-value" not in json.dumps(described)


def test_the_run_directory_lists_each_version_and_a_change_is_said(tmp_path):
    run = RunDir(tmp_path)
    assert record_version(run, RewardSet.from_config(DEMO)) == ""  # a new run: listed, nothing to say
    assert record_version(run, RewardSet.from_config(DEMO)) == ""  # a resume with the same rewards
    note = record_version(run, RewardSet.from_config([DEMO[0], {**DEMO[1], "weight": 2.0}]), "new.yaml")
    assert "the rewards changed" in note and "tool_use: weight 0.5 -> 2.0" in note
    assert f"agentrl rescore {tmp_path} --config new.yaml --out DIR" in note
    listed = json.loads(run.reward_versions.read_text())
    assert [v["version"] for v in listed] == [RewardSet.from_config(DEMO).version,
                                               RewardSet.from_config([DEMO[0], {**DEMO[1], "weight": 2.0}]).version]
    assert all(v["first_used"] for v in listed)


def test_metrics_carry_the_version_of_the_scores_they_sum():
    a = [RolloutRecord(rollout_id=f"r{i}", prompt_id="p", reward=1.0, reward_version="rv-a") for i in range(2)]
    assert rollout_summary(a)["reward_version"] == "rv-a"
    b = RolloutRecord(rollout_id="r9", prompt_id="p", reward=0.0, reward_version="rv-b")
    assert rollout_summary([*a, b])["reward_version"] == ["rv-a", "rv-b"]
    assert "reward_version" not in rollout_summary([RolloutRecord(rollout_id="old")])


def test_train_says_at_start_that_a_resumed_runs_rewards_changed(tmp_path, capsys):
    from agentrl.cli import main
    from test_review import HONEST, write_config

    config = write_config(tmp_path, HONEST)
    assert main(["train", config, "--no-review"]) == 2  # stops at its 2-row dataset, after the versions are listed
    assert "the rewards changed" not in capsys.readouterr().err
    (tmp_path / "reward.py").write_text(HONEST.replace("lines[-1]", "lines[0]"))
    assert main(["train", config, "--no-review"]) == 2
    err = capsys.readouterr().err
    assert "the rewards changed since this run's last attempt" in err and "reward: code changed (file)" in err
    assert len(json.loads((tmp_path / "runs" / "x" / "reward_versions.json").read_text())) == 2
