"""`default_agent_loop=agentrl` from verl's command line: what the agent loop reads from `+agentrl.*` keys, and
what it says when one is missing (the trainer run is in tests/e2e/test_verl_config.py)."""

from __future__ import annotations

import pytest


def test_missing_agentrl_settings_name_the_key_to_add():
    """What the agent loop says when verl selects it without agentrl's keys (before any rollout)."""
    from omegaconf import OmegaConf

    from agentrl.verl.agent_loop import LoopConfigError, worker_state

    with pytest.raises(LoopConfigError, match=r"\+agentrl\.rewards="):
        worker_state(OmegaConf.create({"trainer": {}}))
    with pytest.raises(LoopConfigError, match=r"no rewards; add \+agentrl\.rewards="):
        worker_state(OmegaConf.create({"agentrl": {"tools": ["calculator"]}}))
    with pytest.raises(LoopConfigError, match=r"agentrl\.agent\.max_turnz"):
        worker_state(OmegaConf.create({"agentrl": {"rewards": [{"name": "math"}], "agent": {"max_turnz": 2}}}))
    with pytest.raises(LoopConfigError, match=r"agentrl\.tool: not an agentrl key"):
        worker_state(OmegaConf.create({"agentrl": {"rewards": ["math"], "tool": ["calculator"]}}))


def test_hydra_keys_become_the_same_typed_spec_agentrl_train_writes(tmp_path):
    from omegaconf import OmegaConf

    from agentrl.config import AgentSettings
    from agentrl.verl.agent_loop import worker_state

    config = OmegaConf.create({"agentrl": {"rewards": [{"name": "math", "weight": 1.0}], "tools": ["calculator"],
                                           "agent": {"max_turns": 2}},
                               "trainer": {"default_local_dir": str(tmp_path / "ckpt")}})
    state = worker_state(config)
    assert state.spec.agent == AgentSettings(max_turns=2) and state.spec.tools == ["calculator"]
    assert state.spec.run_dir == str(tmp_path / "ckpt")  # rollouts.jsonl beside verl's checkpoints by default
    assert worker_state(config) is state  # verl builds a loop per rollout: settings are read once
    assert [c.label for c in state.rewards.components] == ["math"]
