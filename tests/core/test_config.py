"""The training config: agentrl block validation, overrides, and verl key checks."""

from __future__ import annotations

import json

import pytest

from agentrl.config import ConfigError, check_verl_keys, hydra_value, load_config

BASE = """
agentrl:
  model: demo
  train_data: data.jsonl
  rewards: [{name: math, weight: 1.0}]
trainer:
  total_epochs: 2
"""


def write(tmp_path, text=BASE):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_loads_and_applies_overrides(tmp_path):
    settings, verl_part, _ = load_config(write(tmp_path), ["agentrl.batch_size=3", "trainer.total_epochs=5",
                                                           "agentrl.agent.max_turns=2"])
    assert settings.batch_size == 3 and settings.agent.max_turns == 2
    assert verl_part["trainer"]["total_epochs"] == 5
    assert settings.train_data == str(tmp_path / "data.jsonl")  # relative to the config file


@pytest.mark.parametrize("override, needle", [
    ("agentrl.batchsize=3", "unknown key 'agentrl.batchsize'. Did you mean 'batch_size'?"),
    ("agentrl.agent.max_turn=3", "unknown key 'agentrl.agent.max_turn'. Did you mean 'max_turns'?"),
    ("agentrl.samples_per_prompt=1", "agentrl.samples_per_prompt"),
    ("agentrl.temperature=hot", "agentrl.temperature"),
])
def test_bad_keys_and_values_are_named(tmp_path, override, needle):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path), [override])
    assert needle in str(err.value) and str(tmp_path / "c.yaml") in str(err.value)


def test_missing_required_key(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, "agentrl:\n  model: demo\n  train_data: x.jsonl\n"))
    assert "missing key 'agentrl.rewards'" in str(err.value)


def test_missing_file_and_bad_override(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="not key=value"):
        load_config(write(tmp_path), ["agentrl.batch_size"])


def test_verl_key_typo_names_nearest():
    defaults = {"trainer": {"total_epochs": 1, "save_freq": 1}, "actor_rollout_ref": {"rollout": {"temperature": 1}}}
    with pytest.raises(ConfigError) as err:
        check_verl_keys({"trainer.total_epoch": 3, "actor_rollout_ref.rollout.tempreature": 1}, defaults, "c.yaml")
    text = str(err.value)
    assert "Did you mean 'total_epochs'" in text and "Did you mean 'temperature'" in text
    check_verl_keys({"trainer.total_epochs": 3, "+trainer.new_key": 1}, defaults, "c.yaml")  # '+' adds on purpose


def test_hydra_values():
    assert hydra_value(None) == "null" and hydra_value(True) == "true" and hydra_value(3) == "3"
    assert hydra_value(["a", 1]) == "[a,1]"
    assert hydra_value("/tmp/x y") == "'/tmp/x y'"
    assert hydra_value("a'b") == "'a\\'b'"


def test_demo_keeps_its_name(tmp_path):
    settings, _, _ = load_config(write(tmp_path, BASE.replace("data.jsonl", "demo")))
    assert settings.model == "demo" and settings.train_data == "demo"


@pytest.mark.parametrize("overrides, cpus, expected", [
    ({"actor_rollout_ref.rollout.agent.num_workers": 1}, 2, 2),  # the CPU demo: one agent-loop process
    ({}, 64, 8),                                                  # verl's default of 8 processes on a GPU node
    ({"actor_rollout_ref.rollout.agent.num_workers": 4}, 64, 16),
    ({"actor_rollout_ref.rollout.agent.num_workers": 8}, 4, 2),   # never fewer than 2
])
def test_sandbox_workers_share_the_cores_among_agent_loop_processes(overrides, cpus, expected):
    from agentrl.verl.args import sandbox_workers

    assert sandbox_workers(overrides, cpus) == expected


def test_verl_processes_get_the_sandbox_size_unless_the_user_set_one(tmp_path, monkeypatch):
    from agentrl.verl.args import child_env, sandbox_workers

    overrides = {"actor_rollout_ref.rollout.agent.num_workers": 1}
    monkeypatch.delenv("AGENTRL_SANDBOX_WORKERS", raising=False)
    assert child_env(tmp_path, 1, overrides)["AGENTRL_SANDBOX_WORKERS"] == str(sandbox_workers(overrides))
    monkeypatch.setenv("AGENTRL_SANDBOX_WORKERS", "5")
    assert child_env(tmp_path, 1, overrides)["AGENTRL_SANDBOX_WORKERS"] == "5"


def test_verl_defaults_are_verl_s_own_and_read_without_importing_verl():
    """The pre-flight reads verl's config folder (no torch import) and gets what main_ppo composes."""
    import subprocess
    import sys

    probe = (
        "import json, sys\n"
        "from agentrl.config import verl_defaults\n"
        "ours = verl_defaults()\n"
        "print(json.dumps(['torch' in sys.modules, 'verl' in sys.modules]))\n"
        "from hydra import compose, initialize_config_module\n"
        "from hydra.core.global_hydra import GlobalHydra\n"
        "from omegaconf import OmegaConf\n"
        "GlobalHydra.instance().clear()\n"
        "with initialize_config_module(config_module='verl.trainer.config', version_base=None):\n"
        "    theirs = OmegaConf.to_container(compose(config_name='ppo_trainer'), resolve=False)\n"
        "print(json.dumps(ours == theirs))\n"
        "print(json.dumps(ours['actor_rollout_ref']['rollout']['n']))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    imported, same, n = [json.loads(line) for line in out.stdout.splitlines()[-3:]]
    assert imported == [False, False] and same is True and isinstance(n, int)
