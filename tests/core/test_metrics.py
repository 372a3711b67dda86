"""Run-directory bookkeeping: per-step rollout summaries and checkpoint completeness."""

from __future__ import annotations

import json


from agentrl.metrics import check_checkpoint, last_complete_checkpoint, rollout_summary
from agentrl.rolloutfile import decode
from agentrl.runlog import append_jsonl, read_jsonl


def test_summary_counts_unscorable_apart_and_averages_components():
    rollouts = [decode(json.dumps(line)) for line in (  # as the watcher reads them from rollouts.jsonl
        {"reward": 1.0, "components": {"math": 1.0, "tool_use": None}, "unscorable": None, "tool_calls": 1},
        {"reward": 0.0, "components": {"math": 0.0, "tool_use": 1.0}, "unscorable": None, "tool_calls": 3},
        {"reward": None, "components": {}, "unscorable": "tools: server down", "tool_calls": 0},
    )]
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


def _generated(group, n, drawn, version, reward=1.0):
    return {"rollout_id": f"{group}-{n}-{version}", "prompt_id": f"p-{group}", "step": drawn, "validation": False,
            "group": group, "policy_version": version, "reward": reward, "unscorable": None,
            "components": {"math": reward}, "tool_calls": 1}


def test_off_policy_rollouts_are_placed_at_the_step_that_trained_them(tmp_path):
    """max_off_policy_steps > 0: rollouts wait in logs/generated.jsonl with their group until
    logs/trained.jsonl names the step that trained the group; then they move into rollouts.jsonl under that
    step, with the step they were drawn for and their staleness. A group re-issued after a resume is placed
    with its newest rollouts, once; a group no step trained stays out of the step lines."""
    import io

    from agentrl.metrics import Watcher
    from agentrl.rundir import RunDir

    (tmp_path / "logs").mkdir()
    gen, trained = RunDir(tmp_path).generated, RunDir(tmp_path).trained
    for n in range(2):
        append_jsonl(gen, _generated("a", n, drawn=1, version=0))
        append_jsonl(gen, _generated("b", n, drawn=1, version=0, reward=0.0))
        append_jsonl(gen, _generated("c", n, drawn=1, version=0))  # partly generated, then re-issued
    for n in range(2):
        append_jsonl(gen, _generated("c", n, drawn=1, version=1, reward=0.0))
        append_jsonl(gen, _generated("d", n, drawn=2, version=1))  # drawn, never trained
    append_jsonl(trained, {"step": 1, "groups": ["a"]})
    append_jsonl(trained, {"step": 2, "groups": ["b", "c"]})
    verl = tmp_path / "logs" / "verl_metrics.1.jsonl"
    for step in (1, 2):
        append_jsonl(verl, {"step": step, "data": {"actor/loss": 0.1}})
    out = io.StringIO()
    w = Watcher(tmp_path, 1, 2, out=out, group_size=2)
    w.poll()
    placed = read_jsonl(tmp_path / "rollouts.jsonl")[0]
    assert sorted((r["group"], r["step"], r["drawn_step"], r["staleness"]) for r in placed) == [
        ("a", 1, 1, 0), ("a", 1, 1, 0), ("b", 2, 1, 1), ("b", 2, 1, 1), ("c", 2, 1, 0), ("c", 2, 1, 0)]
    assert all(r["policy_version"] == 1 for r in placed if r["group"] == "c")  # the re-issued rollouts
    lines = {m["step"]: m for m in read_jsonl(tmp_path / "metrics.jsonl")[0]}
    assert lines[1]["rollouts"] == 2 and lines[1]["staleness/0"] == 2 and lines[1]["staleness_max"] == 0
    assert "staleness/1" not in lines[1]
    assert lines[2]["rollouts"] == 4 and (lines[2]["staleness/0"], lines[2]["staleness/1"]) == (2, 2)
    assert lines[2]["staleness_mean"] == 0.5 and lines[2]["reward_mean"] == 0.0
    assert "staleness 0.50 (max 1)" in out.getvalue()

    # a later attempt (after a resume) places nothing twice, and places a group trained again only once
    append_jsonl(trained, {"step": 2, "groups": ["a"]})
    w2 = Watcher(tmp_path, 2, 2, out=io.StringIO(), group_size=2)
    w2.poll()
    assert len(read_jsonl(tmp_path / "rollouts.jsonl")[0]) == 6


def test_rewind_sets_aside_the_trained_groups_of_steps_past_the_checkpoint(tmp_path):
    from agentrl.metrics import rewind
    from agentrl.rundir import RunDir

    (tmp_path / "logs").mkdir()
    trained = RunDir(tmp_path).trained
    for step in (1, 2, 3):
        append_jsonl(trained, {"step": step, "groups": [f"g{step}"]})
    rewind(tmp_path, 2, attempt=2)
    assert [r["step"] for r in read_jsonl(trained)[0]] == [1, 2]
    assert [r["step"] for r in read_jsonl(tmp_path / "logs" / "rewound.2.trained.jsonl")[0]] == [3]


def _step_files(run, step, rewards_by_prompt, grad_norm, log_lines=(), verl=None):
    """One step as verl and the agent loop leave it: verl's metric line, the step's rollouts, training.log."""
    logs = run / "logs"
    logs.mkdir(exist_ok=True)
    append_jsonl(logs / "verl_metrics.1.jsonl", {"step": step, "data": {
        "actor/grad_norm": grad_norm, "actor/ppo_kl": 0.0, "actor/kl_loss": 0.01, "critic/score/mean": 0.0,
        **(verl or {})}})
    for prompt, rewards in rewards_by_prompt.items():
        for i, reward in enumerate(rewards):
            append_jsonl(run / "rollouts.jsonl", {"rollout_id": f"{step}-{prompt}-{i}", "prompt_id": prompt, "step": step,
                                                  "validation": False, "reward": reward, "unscorable": None,
                                                  "components": {"math": reward}, "tool_calls": 0})
    with (run / "training.log").open("a") as fh:
        fh.writelines(line + "\n" for line in log_lines)


def test_steps_with_no_learning_signal_are_flagged_on_the_console_and_in_metrics(tmp_path):
    import io

    from agentrl.metrics import Watcher

    out = io.StringIO()
    watcher = Watcher(tmp_path, attempt=1, total_steps=3, out=out)
    _step_files(tmp_path, 1, {"a": [1.0, 0.0], "b": [0.0, 0.0]}, grad_norm=0.4)  # one group of two has a spread
    watcher.poll()
    _step_files(tmp_path, 2, {"a": [0.0, 0.0], "b": [1.0, 1.0]}, grad_norm=0.0,
                log_lines=["(AgentLoopWorker pid=7) agentrl: tool server 'files': the session ended (EOFError); "
                           "starting a new session (restart 1)"])
    watcher.poll()
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [x["frac_reward_zero_std"] for x in lines] == [0.5, 1.0]
    assert "warning" not in lines[0] and lines[1]["warning"].startswith("no learning signal: in every group")
    assert lines[1]["ppo_kl"] == 0.0 and lines[1]["kl_loss"] == 0.01 and "kl" not in lines[1]
    console = out.getvalue()
    assert "warning: step 2: no learning signal" in console and "warning: step 1" not in console, console
    assert "  agentrl: tool server 'files': the session ended (EOFError); starting a new session (restart 1)" in console


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


def test_a_resume_places_what_the_dead_watcher_had_not_and_recovers_its_step(tmp_path):
    """Off-policy: the attempt was killed after verl checkpointed and logged step 1 but before its watcher
    placed step 1's rollouts or wrote its line. Before rewinding, the resume places them, so step 1's line is
    rebuilt from them ("recovered") and step 2, past the checkpoint, is set aside."""
    from agentrl.metrics import rewind
    from agentrl.placement import place_trained
    from agentrl.rundir import RunDir

    run = RunDir(tmp_path)
    run.logs.mkdir()
    for n in range(2):
        append_jsonl(run.generated, _generated("a", n, drawn=1, version=0))
        append_jsonl(run.generated, _generated("b", n, drawn=1, version=0))
    append_jsonl(run.trained, {"step": 1, "groups": ["a"]})
    append_jsonl(run.trained, {"step": 2, "groups": ["b"]})
    place_trained(tmp_path, group_size=2)
    rewind(tmp_path, 1, attempt=2)
    lines = read_jsonl(run.metrics)[0]
    assert [(m["step"], m.get("recovered")) for m in lines] == [(1, True)] and lines[0]["rollouts"] == 2
    assert sorted({r["step"] for r in read_jsonl(run.rollouts)[0]}) == [1]
    assert [r["step"] for r in read_jsonl(run.trained)[0]] == [1]


def test_entropy_comes_from_the_update_when_verl_skips_its_old_log_prob_pass(tmp_path):
    """In bypass mode (agentrl's CPU rollout) verl logs the policy's entropy as actor/entropy_loss, measured by
    the update; metrics.jsonl's entropy reads it there, and actor/entropy where verl logs both."""
    import json as _json

    from agentrl.metrics import Watcher
    from agentrl.runlog import append_jsonl

    (tmp_path / "logs").mkdir()
    for n, step in enumerate([1, 1, 2, 2]):
        append_jsonl(tmp_path / "rollouts.jsonl", _rollout(step, False, 1.0, f"r{n}"))
    verl = tmp_path / "logs" / "verl_metrics.1.jsonl"
    append_jsonl(verl, {"step": 1, "data": {"actor/loss": 0.1, "actor/entropy_loss": 0.25}})
    append_jsonl(verl, {"step": 2, "data": {"actor/loss": 0.1, "actor/entropy_loss": 0.5, "actor/entropy": 0.75}})
    w = Watcher(tmp_path, 1, 2, out=None)
    w.rollout_offset = 0
    w.poll()
    lines = [_json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(x["step"], x["entropy"]) for x in lines] == [(1, 0.25), (2, 0.75)]


def test_a_rollout_that_samples_off_the_model_is_said_once(tmp_path):
    """verl's rollout_corr/training_log_ppl far above the policy's entropy: the rollout engine samples from another
    distribution than the model (as vLLM's CPU build did with ATEN_CPU_CAPABILITY=avx2: 12.9 nats against 0.41)."""
    import io

    from agentrl.metrics import Watcher

    out = io.StringIO()
    watcher = Watcher(tmp_path, attempt=1, total_steps=3, out=out)
    rewards = {"a": [1.0, 0.0]}
    _step_files(tmp_path, 1, rewards, 0.4, verl={"rollout_corr/training_log_ppl": 0.49, "actor/entropy": 0.35})
    watcher.poll()
    for step in (2, 3):
        _step_files(tmp_path, step, rewards, 0.4, verl={"rollout_corr/training_log_ppl": 12.9, "actor/entropy": 0.41})
        watcher.poll()
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [x["rollout_log_ppl"] for x in lines] == [0.49, 12.9, 12.9]
    assert "rollout_warning" not in lines[0]
    assert all("12.90 nats a token against a policy entropy of 0.41" in x["rollout_warning"] for x in lines[1:])
    console = out.getvalue()
    assert console.count("rollout's tokens are unlikely") == 1 and "warning: step 2: the rollout's tokens" in console
