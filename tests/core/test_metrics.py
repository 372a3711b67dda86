"""Run-directory bookkeeping: per-step rollout summaries and checkpoint completeness."""

from __future__ import annotations

import json

from agentrl.metrics import check_checkpoint, last_complete_checkpoint, rollout_summary
from agentrl.runlog import append_jsonl, read_jsonl


def test_summary_counts_unscorable_apart_and_averages_components():
    rollouts = [
        {"reward": 1.0, "components": {"math": 1.0, "tool_use": None}, "unscorable": None, "tool_calls": 1},
        {"reward": 0.0, "components": {"math": 0.0, "tool_use": 1.0}, "unscorable": None, "tool_calls": 3},
        {"reward": None, "components": {}, "unscorable": "tools: server down", "tool_calls": 0},
    ]
    s = rollout_summary(rollouts)
    assert s["rollouts"] == 3 and s["unscorable"] == 1
    assert s["reward_mean"] == 0.5 and s["reward/math"] == 0.5 and s["reward/tool_use"] == 1.0
    assert s["tool_calls_per_rollout"] == 4 / 3


def test_checkpoint_marked_complete_only_when_files_exist(tmp_path):
    ckpt = tmp_path / "checkpoints"
    hf = ckpt / "global_step_2" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")
    assert check_checkpoint(tmp_path) is None  # no weights yet: a half-written checkpoint
    assert last_complete_checkpoint(tmp_path) is None
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"x")
    status = check_checkpoint(tmp_path)
    assert status["step"] == 2 and last_complete_checkpoint(tmp_path)["step"] == 2
    assert check_checkpoint(tmp_path) is None  # reported once


def test_jsonl_reader_skips_a_partial_last_line(tmp_path):
    path = tmp_path / "r.jsonl"
    append_jsonl(path, {"a": 1})
    with path.open("a") as fh:
        fh.write('{"b": ')
    records, offset = read_jsonl(path)
    assert records == [{"a": 1}]
    with path.open("a") as fh:
        fh.write('2}\n')
    more, _ = read_jsonl(path, offset)
    assert more == [{"b": 2}]
