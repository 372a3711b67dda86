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


def _rollout(step, validation, reward, rid):
    return {"rollout_id": rid, "step": step, "validation": validation, "reward": reward, "unscorable": None,
            "components": {"math": reward}, "tool_calls": 1}


def test_validation_is_its_own_stream(tmp_path):
    """Rollouts carry their trainer step and split; a step's line counts only its training rollouts and each
    evaluation gets a line of its own with val/* keys (verl logs step 2's validation inside step 2's record)."""
    import io
    import json as _json

    from agentrl.metrics import Watcher
    from agentrl.runlog import append_jsonl

    (tmp_path / "logs").mkdir()
    for n, (step, val, reward) in enumerate([(0, True, 0.0), (0, True, 1.0), (1, False, 1.0), (1, False, 1.0),
                                             (2, False, 0.0), (2, False, 1.0), (2, True, 1.0), (2, True, 1.0)]):
        append_jsonl(tmp_path / "rollouts.jsonl", _rollout(step, val, reward, f"r{n}"))
    verl = tmp_path / "logs" / "verl_metrics.1.jsonl"
    for step, data in [(0, {"val-core/x": 0.5}), (1, {"actor/loss": 0.1, "critic/score/mean": 1.0}),
                       (2, {"actor/loss": 0.2, "critic/score/mean": 0.5, "val-core/x": 1.0})]:
        append_jsonl(verl, {"step": step, "data": data})
    out = io.StringIO()
    w = Watcher(tmp_path, 1, 2, out=out)
    w.rollout_offset = 0
    w.poll()
    lines = [_json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in lines if not x["validation"]]
    val = [x for x in lines if x["validation"]]
    assert [x["step"] for x in train] == [1, 2] and [x["step"] for x in val] == [0, 2]
    assert train[0]["rollouts"] == 2 and train[0]["reward_mean"] == 1.0
    assert train[1]["rollouts"] == 2 and train[1]["reward_mean"] == 0.5
    assert val[0]["val/reward_mean"] == 0.5 and val[0]["val/reward/math"] == 0.5 and val[0]["val/rollouts"] == 2
    assert val[1]["val/reward_mean"] == 1.0 and "reward_mean" not in val[1]
    assert "validation at step 2: reward 1.000 (math 1.000)" in out.getvalue()


def test_rewind_sets_aside_what_a_resumed_run_writes_again(tmp_path):
    from agentrl.metrics import rewind
    from agentrl.runlog import append_jsonl

    (tmp_path / "logs").mkdir()
    for step, val in [(0, True), (1, False), (2, False), (2, True), (3, False)]:
        append_jsonl(tmp_path / "metrics.jsonl", {"step": step, "validation": val})
        append_jsonl(tmp_path / "rollouts.jsonl", _rollout(step, val, 1.0, f"{step}{val}"))
    assert rewind(tmp_path, 2, attempt=2) == 4
    for name in ("metrics.jsonl", "rollouts.jsonl"):
        kept = [(r["step"], r["validation"]) for r in read_jsonl(tmp_path / name)[0]]
        assert kept == [(0, True), (1, False), (2, False)]
        aside = [(r["step"], r["validation"]) for r in read_jsonl(tmp_path / "logs" / f"rewound.2.{name}")[0]]
        assert aside == [(2, True), (3, False)]


def test_a_checkpointed_step_whose_metrics_line_was_lost_is_recovered_from_its_rollouts(tmp_path):
    from agentrl.metrics import rewind

    (tmp_path / "logs").mkdir()
    append_jsonl(tmp_path / "metrics.jsonl", {"step": 1, "validation": False, "loss": 0.1})
    for step in (1, 2, 2, 3):  # step 2 was checkpointed, then the attempt stopped before verl logged it
        append_jsonl(tmp_path / "rollouts.jsonl", _rollout(step, False, 1.0, f"r{step}{id(step)}"))
    rewind(tmp_path, 2, attempt=2)
    lines = read_jsonl(tmp_path / "metrics.jsonl")[0]
    assert [(m["step"], m.get("recovered", False)) for m in lines] == [(1, False), (2, True)]
    assert lines[1]["rollouts"] == 2 and lines[1]["reward_mean"] == 1.0


def test_rewind_reads_each_record_s_own_step_whatever_its_text_or_key_order(tmp_path):
    """A message quoting `"step": 9, "validation": true`, keys in another order, a line cut short."""
    from agentrl.metrics import rewind

    (tmp_path / "logs").mkdir()
    tricky = _rollout(1, False, 1.0, "quoted")
    tricky["messages"] = [{"role": "user", "content": 'log: "step": 9, "validation": true'}]
    append_jsonl(tmp_path / "rollouts.jsonl", tricky)
    append_jsonl(tmp_path / "rollouts.jsonl", {"validation": False, "reward": 1.0, "step": 3, "rollout_id": "reordered"})
    append_jsonl(tmp_path / "rollouts.jsonl", {"rollout_id": "no-step", "reward": 1.0})
    with (tmp_path / "rollouts.jsonl").open("a") as fh:
        fh.write('{"rollout_id": "cut", "step": 1, "valid')  # the last attempt died mid-line
    assert rewind(tmp_path, 2, attempt=2) == 2
    kept = [r["rollout_id"] for r in read_jsonl(tmp_path / "rollouts.jsonl")[0]]
    assert kept == ["quoted", "no-step"]
    aside = (tmp_path / "logs" / "rewound.2.rollouts.jsonl").read_text().splitlines()
    assert [json.loads(aside[0])["rollout_id"], aside[1]] == ["reordered", '{"rollout_id": "cut", "step": 1, "valid']


def test_a_restart_with_no_checkpoint_sets_aside_every_step_the_last_attempt_wrote(tmp_path):
    """verl starts again from step 1 when no checkpoint was complete: rewinding to step 0 leaves nothing it
    would write twice (an attempt killed before its first checkpoint)."""
    from agentrl.metrics import rewind

    (tmp_path / "logs").mkdir()
    for step, val in [(0, True), (1, False), (2, False)]:
        append_jsonl(tmp_path / "metrics.jsonl", {"step": step, "validation": val})
        append_jsonl(tmp_path / "rollouts.jsonl", _rollout(step, val, 1.0, f"{step}{val}"))
    assert rewind(tmp_path, 0, attempt=2) == 6
    assert read_jsonl(tmp_path / "metrics.jsonl")[0] == [] and read_jsonl(tmp_path / "rollouts.jsonl")[0] == []
    aside = [(r["step"], r["validation"]) for r in read_jsonl(tmp_path / "logs" / "rewound.2.metrics.jsonl")[0]]
    assert aside == [(0, True), (1, False), (2, False)]
