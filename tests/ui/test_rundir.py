"""What the job page derives from a run directory: status, progress, ETA, checkpoints, log tail, config."""

from __future__ import annotations

import fcntl
import json

from agentrl.ui import rundir
from agentrl.ui.synthetic import write_run


def test_status_running_finished_resumable_failed(tmp_path):
    done = write_run(tmp_path / "done", steps=6, total=6)
    assert rundir.run_info(done)["status"] == "finished"

    stopped = write_run(tmp_path / "stopped", steps=7, total=20)  # checkpoint at 5
    info = rundir.run_info(stopped)
    assert info["status"] == "resumable" and info["checkpoint"] == 5 and "resumes from step 5" in info["detail"]

    crashed = write_run(tmp_path / "crashed", steps=3, total=20)  # no checkpoint yet
    with (crashed / "training.log").open("a") as fh:
        fh.write("Traceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: CUDA out of memory\n")
    info = rundir.run_info(crashed)
    assert info["status"] == "failed" and "RuntimeError: CUDA out of memory" in info["detail"]

    never = tmp_path / "never"
    never.mkdir()
    (never / "config.yaml").write_text("agentrl: {max_steps: 3}\n")
    assert rundir.run_info(never)["status"] == "failed"
    assert "never started" in rundir.run_info(never)["detail"]


def test_running_while_the_trainers_lock_is_held_and_not_after(tmp_path):
    run = write_run(tmp_path / "r", steps=2, total=10)
    handle = open(run / ".agentrl.lock", "w")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what agentrl train holds for the whole run
    try:
        info = rundir.run_info(run)
        assert info["status"] == "running" and info["ended"] is None
        assert info["percent"] == 20.0 and info["step"] == 2 and info["total"] == 10
        # the check must not take the lock: a trainer starting now must still get it
        assert rundir.is_running(run)
    finally:
        handle.close()
    assert rundir.run_info(run)["status"] == "failed"  # no checkpoint at step 2 of 10
    other = open(run / ".agentrl.lock", "w")
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the page never left a lock behind
    other.close()


def test_eta_from_the_pace_between_step_lines(tmp_path):
    run = write_run(tmp_path / "r", steps=3, total=13)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    for i, line in enumerate(lines):
        line["time"] = f"2026-01-01T10:00:{10 * i:02d}"  # 10 s a step
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert rundir._eta(run, 3, 13) == 100.0


def test_total_steps_from_rows_when_max_steps_is_unset(tmp_path):
    run = tmp_path / "r"
    (run / "data").mkdir(parents=True)
    (run / "data" / "train.jsonl").write_text("{}\n" * 50)
    assert rundir.total_steps(run, {"agentrl": {"batch_size": 8, "epochs": 3}}) == 18


def test_summary_checkpoints_log_tail_and_config(tmp_path):
    run = write_run(tmp_path / "r", steps=10, total=10)
    info = rundir.run_info(run)
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert info["summary"] == (f"loss {last['loss']:.4g} • grad {last['grad_norm']:.4g} • lr {last['learning_rate']:.4g}"
                               f" @ step 10")
    cps = rundir.checkpoints(run)
    assert [c["step"] for c in cps] == [5, 10] and all(c["files"] == 2 for c in cps)
    assert cps[-1]["complete"] and cps[-1]["export"] == f"agentrl export {run} --step 10 r-step10"
    with (run / "training.log").open("a") as fh:
        fh.writelines(f"line {i} \x1b[32mgreen\x1b[0m\n" for i in range(100_000))
    tail = rundir.log_tail(run, 200)
    assert len(tail) == 200 and tail[-1] == "line 99999 green"
    view = rundir.config_view(run)
    assert [r["name"] for r in view["rewards"]] == ["math", "./my_reward.py"]
    assert view["rewards"][1]["source"].startswith("file ") and "missing now" in view["rewards"][1]["source"]
    assert view["rewards"][0]["source"].startswith("plugin ") and " from agentrl" in view["rewards"][0]["source"]
    assert view["tools"] == ["calculator"]


def test_find_runs_one_or_two_levels(tmp_path):
    write_run(tmp_path / "a", steps=1)
    write_run(tmp_path / "team" / "b", steps=1)
    (tmp_path / "empty").mkdir()
    assert sorted(rundir.find_runs(tmp_path)) == ["a", "team/b"]
    assert list(rundir.find_runs(tmp_path / "a")) == ["a"]


def test_a_resumed_run_counts_every_attempt(tmp_path):
    """The runner writes a header per attempt into training.log and logs/command.N.json; a long first attempt
    pushes the second header far past the head of the log."""
    run = write_run(tmp_path / "resumed", steps=7, total=20)
    logs = run / "logs"
    logs.mkdir(exist_ok=True)
    with (run / "training.log").open("w") as fh:
        fh.write("\n===== attempt 1 2026-11-25 10:00:00 =====\n" + "verl says something\n" * 2000)
        fh.write("\n===== attempt 2 2026-11-25 10:30:00 =====\n")
    for n in (1, 2):
        (logs / f"command.{n}.json").write_text('["python", "-m", "verl.trainer.main_ppo"]')
    info = rundir.run_info(run)
    assert info["attempts"] == 2
    assert info["started"] == rundir._attempts(run)[0][1]  # the first attempt's start, from the log's head


def test_a_run_that_stopped_before_training_says_why(tmp_path, capsys):
    """`agentrl train` that stops in its checks (here: no model folder) after making the run directory."""
    from agentrl.cli import main

    (tmp_path / "train.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "2+2?"}],
                                                      "metadata": {"expected_answer": "4"}}) + "\n")
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"agentrl": {"name": "early", "model": str(tmp_path / "no-model"),
                                              "train_data": "train.jsonl", "rewards": [{"name": "math"}],
                                              "run_dir": str(tmp_path / "runs" / "early")}}))
    assert main(["train", str(config), "--no-review"]) == 2
    info = rundir.run_info(tmp_path / "runs" / "early")
    assert info["status"] == "failed" and info["detail"].startswith("failed before training started: "), info
    assert "no-model" in info["detail"] and "is not a folder with a HuggingFace model" in info["detail"]
