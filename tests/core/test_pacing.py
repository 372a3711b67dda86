"""verl's replay buffer polls at agentrl's interval (issue: generation times quantised to 2 s)."""

from __future__ import annotations

from omegaconf import OmegaConf

from agentrl.verl import pacing as verl_pacing

# The keyword arguments verl 0.9.1's trainer_base._build_replay_buffer passes (no poll_interval).
VERL_KWARGS = dict(trainer_mode="sync", trainer_config=OmegaConf.create({}), max_off_policy_threshold=None,
                   max_off_policy_strategy="drop", sampler_kwargs=OmegaConf.create({}), refill_fn=None,
                   train_batch_size=8, gen_batch_size=8, max_inflight_gen_batches=1)


def _buffers():
    import verl  # noqa: F401  (loads agentrl's verl plugin, which installs the pacing)
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

    return ReplayBuffer, ReplayBufferAsync


def test_verl_default_poll_replaced(monkeypatch):
    monkeypatch.delenv("AGENTRL_REPLAY_POLL_S", raising=False)
    for cls in _buffers():
        kwargs = dict(VERL_KWARGS) if cls.__name__ == "ReplayBuffer" else {
            k: v for k, v in VERL_KWARGS.items() if k not in ("train_batch_size", "gen_batch_size", "max_inflight_gen_batches")}
        assert cls(**kwargs).poll_interval == verl_pacing.DEFAULT_POLL_S


def test_explicit_poll_interval_kept_and_env_override(monkeypatch):
    ReplayBuffer, _ = _buffers()
    assert ReplayBuffer(**VERL_KWARGS, poll_interval=1.5).poll_interval == 1.5
    monkeypatch.setenv("AGENTRL_REPLAY_POLL_S", "0.5")
    assert ReplayBuffer(**VERL_KWARGS).poll_interval == 0.5


def test_each_training_sample_records_its_groups(monkeypatch, tmp_path):
    """Both of verl's replay buffers append the prompt groups of every training batch they hand out to
    logs/trained.jsonl (validation batches are not training); without a run directory nothing is written."""
    import json

    from transfer_queue import KVBatchMeta

    (tmp_path / "logs").mkdir()
    for cls in _buffers():
        calls = []

        def fake(self, global_steps, partition_id, batch_size, _calls=calls):
            _calls.append(global_steps)
            keys = [f"u{global_steps}a_0_0", f"u{global_steps}a_1_0", f"u{global_steps}b_0_0"]
            return KVBatchMeta(partition_id=partition_id, keys=keys, tags=[{}] * 3), {"m": 1}

        sample = verl_pacing._recording(fake)
        monkeypatch.setenv("AGENTRL_RUN_DIR", str(tmp_path))
        assert sample(None, 3, "train", 2)[1] == {"m": 1}
        sample(None, 3, "val", 2)
        monkeypatch.delenv("AGENTRL_RUN_DIR")
        sample(None, 4, "train", 2)
        assert calls == [3, 3, 4]
        assert "sample" in vars(cls) and getattr(vars(cls)["sample"], "_agentrl_recording", False)
    lines = [json.loads(x) for x in (tmp_path / "logs" / "trained.jsonl").read_text().splitlines()]
    assert lines == [{"step": 3, "groups": ["u3a", "u3b"]}] * 2
