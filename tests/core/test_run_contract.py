"""What `agentrl train` hands verl, checked without starting it: checkpoints by default, steps past one epoch,
paths relative to the config file, `+key` overrides, and suggestions for the names users bring from other tools."""

from __future__ import annotations

import json
import os

import pytest

from agentrl.config import ConfigError, load_config
from agentrl.verl.args import build_overrides


def config(tmp_path, extra: str = "", overrides=()):
    path = tmp_path / "cfg" / "c.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("agentrl:\n  model: demo\n  train_data: data.jsonl\n  rewards: [{name: math}]\n" + extra)
    return load_config(path, list(overrides))


def overrides(tmp_path, rows: int, extra: str = "", cli=()):
    settings, verl_part, _ = config(tmp_path, extra, cli)
    return build_overrides(settings, verl_part, model_path="/m", train_file="/t", val_file=None, spec_path="/s",
                           run_dir=tmp_path / "run", cpu=True, train_rows=rows)


def test_save_every_left_unset_checkpoints_every_epoch_and_at_the_end(tmp_path):
    # 40 rows, 8 per step: 5 steps an epoch; verl saves when step % save_freq == 0 and at the last step
    out = overrides(tmp_path, 40, "  batch_size: 8\n  epochs: 2\n")
    assert out["trainer.save_freq"] == 5
    out = overrides(tmp_path, 40, "  batch_size: 8\n  save_every: 0\n")
    assert out["trainer.save_freq"] == 5
    assert overrides(tmp_path, 40, "  batch_size: 8\n  save_every: 2\n")["trainer.save_freq"] == 2


def test_max_steps_past_one_epoch_gets_the_epochs_it_needs(tmp_path):
    out = overrides(tmp_path, 10, "  batch_size: 2\n  max_steps: 8\n")  # 5 steps an epoch
    assert out["trainer.total_training_steps"] == 8
    assert out["trainer.total_epochs"] == 2
    out = overrides(tmp_path, 10, "  batch_size: 2\n  max_steps: 3\n  epochs: 3\n")
    assert out["trainer.total_epochs"] == 3 and out["trainer.total_training_steps"] == 3


def test_relative_paths_resolve_against_the_config_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the config's folder
    base = tmp_path / "cfg"
    settings, _, _ = config(tmp_path, "  model: ./model\n  tools: servers.json\n"
                            "  rewards: [{name: ./my_reward.py, weight: 0.5, read_paths: [gold/]}, math]\n")
    assert settings.model == str(base / "model")
    assert settings.tools == str(base / "servers.json")
    assert settings.rewards[0]["name"] == str(base / "my_reward.py")
    assert settings.rewards[0]["read_paths"] == [str(base / "gold")]
    assert settings.rewards[1] == "math"  # a name stays a name


def test_plus_override_reaches_verl_with_its_plus(tmp_path):
    out = overrides(tmp_path, 16, cli=["+trainer.my_new_key=3", "+agentrl.batch_size=4"])
    assert out["+trainer.my_new_key"] == 3
    assert out["data.train_batch_size"] == 4


@pytest.mark.parametrize("key, points_to", [
    ("agentrl.group_size=4", "agentrl.samples_per_prompt"),
    ("agentrl.num_generations=4", "agentrl.samples_per_prompt"),  # TRL
    ("agentrl.beta=0.01", "agentrl.kl_coef"),  # TRL
    ("agentrl.n_epochs=2", "agentrl.epochs"),  # OpenAI fine-tuning
    ("agentrl.max_tool_calls=3", "agentrl.agent.max_tool_calls"),  # a nested key at the top
    ("agentrl.agent.batch_size=3", "agentrl.batch_size"),  # a top key nested
    ("agentrl.lora_rank=8", "agentrl.lora.rank"),
])
def test_suggestions_know_nested_keys_and_peer_names(tmp_path, key, points_to):
    with pytest.raises(ConfigError) as err:
        config(tmp_path, overrides=[key])
    assert f"'{points_to}'" in str(err.value), str(err.value)
    assert "batch_size'?" not in str(err.value) or points_to.endswith("batch_size")


def test_samples_per_prompt_written_as_words(tmp_path):
    with pytest.raises(ConfigError) as err:
        config(tmp_path, "  samples per prompt: 4\n")
    assert "'agentrl.samples_per_prompt'" in str(err.value)


def test_reward_file_the_sandbox_rejects_fails_when_loaded(tmp_path):
    """RestrictedPython refuses names starting with '_': found when the config is loaded, not at every rollout."""
    from agentrl.rewards import RewardSet
    from agentrl.rewards.loading import RewardConfigError

    bad = tmp_path / "bad_reward.py"
    bad.write_text("def grade(sample, item):\n    _secret = 1\n    return 1.0\n")
    with pytest.raises(RewardConfigError) as err:
        RewardSet.from_config([{"name": str(bad)}], where="c.yaml: agentrl.rewards")
    assert "bad_reward.py, line 2" in str(err.value) and "_secret" in str(err.value)


def test_run_spec_round_trips_and_a_worker_state_builds_from_it_without_verl(tmp_path):
    import json

    from agentrl.spec import RunSpec, SpecError
    from agentrl.worker import WorkerState

    settings, _, _ = config(tmp_path, "  agent: {max_turns: 3}\n")
    spec = RunSpec.from_settings(settings, tmp_path / "run")
    path = tmp_path / "agentrl_spec.json"
    spec.write(path)
    back = RunSpec.read(path)
    assert back == spec and back.agent.max_turns == 3
    state = WorkerState(back)  # what a local engine does: no file, no verl
    assert [c.label for c in state.rewards.components] == ["math"]
    raw = json.loads(path.read_text())
    raw["agent"]["max_turnz"] = 3
    path.write_text(json.dumps(raw))
    with pytest.raises(SpecError, match="rerun `agentrl train`"):
        RunSpec.read(path)


def test_an_agentrl_setting_outside_the_agentrl_block_is_pointed_home():
    from agentrl.config import check_verl_keys

    defaults = {"trainer": {"total_epochs": 1}}
    for key, home in (("num_generations", "agentrl.samples_per_prompt"), ("batch_size", "agentrl.batch_size")):
        with pytest.raises(ConfigError) as err:
            check_verl_keys({key: 4}, defaults, "c.yaml")
        assert f"'{home}'" in str(err.value), str(err.value)


def test_a_worker_settles_the_garbage_collector_once_and_still_collects(tmp_path):
    """verl's agent-loop worker: what is loaded is frozen, young collections are rarer, new cycles still go."""
    import subprocess
    import sys

    from agentrl.spec import RunSpec

    settings, _, _ = config(tmp_path, "")
    path = tmp_path / "agentrl_spec.json"
    RunSpec.from_settings(settings, tmp_path / "run").write(path)
    probe = (
        "import gc, json, sys\n"
        "from agentrl.worker import WorkerState\n"
        "before = gc.get_threshold()\n"
        "state = WorkerState.for_file(sys.argv[1])\n"
        "frozen = gc.get_freeze_count()\n"
        "assert WorkerState.for_file(sys.argv[1]) is state and gc.get_freeze_count() == frozen\n"
        "loaded = state._rewards is not None\n"
        "a = []; a.append(a); del a\n"
        "print(json.dumps([before, gc.get_threshold(), frozen, loaded, gc.collect()]))\n"
    )
    for tuning in ("1", "0"):
        env = {**os.environ, "AGENTRL_GC_TUNING": tuning}
        out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, env=env,
                             timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        before, after, frozen, loaded, collected = json.loads(out.stdout.splitlines()[-1])
        assert loaded  # the rewards' modules are loaded before the freeze
        assert collected >= 1  # a cycle made after the freeze is still collected
        if tuning == "1":
            assert tuple(after) == (50_000, 20, 100) and frozen > 10_000
        else:
            assert after == before and frozen == 0
