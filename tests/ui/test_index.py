"""The rollout index: incremental, persisted, exact against a plain read of the file."""

from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict

import pytest

from agentrl.ui.index import RolloutIndex
from agentrl.ui.synthetic import append_step, rollout, write_run


def plain_read(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_steps_match_a_plain_read_of_the_file(tmp_path):
    run = write_run(tmp_path / "r", steps=7)
    idx = RolloutIndex(run)
    records = plain_read(run / "rollouts.jsonl")
    assert idx.update() == len(records)
    by = defaultdict(list)
    for r in records:
        by[(r["step"], r["validation"])].append(r)
    got = {(s["step"], s["validation"]): s for s in idx.steps()}
    assert set(got) == set(by)
    for key, rs in by.items():
        scored = [r["reward"] for r in rs if r["unscorable"] is None]
        assert got[key]["rollouts"] == len(rs)
        assert got[key]["unscorable"] == len(rs) - len(scored)
        assert got[key]["reward_mean"] == pytest.approx(statistics.fmean(scored) if scored else None)
        assert got[key]["tool_calls_per_rollout"] == pytest.approx(statistics.fmean(r["tool_calls"] for r in rs))


def test_update_reads_only_what_was_appended_and_waits_for_whole_lines(tmp_path):
    run = write_run(tmp_path / "r", steps=3)
    idx = RolloutIndex(run)
    first = idx.update()
    assert idx.update() == 0
    append_step(run, 4)
    assert idx.update() == 16 + 0  # one training step of 4 prompts x 4 samples
    half = json.dumps(rollout(9, 0, 0, __import__("random").Random(1)))
    with (run / "rollouts.jsonl").open("a") as fh:
        fh.write(half[:50])  # a writer mid-line
    assert idx.update() == 0
    with (run / "rollouts.jsonl").open("a") as fh:
        fh.write(half[50:] + "\n")
    assert idx.update() == 1
    assert sum(s["rollouts"] for s in idx.steps()) == first + 17
    rows, total = idx.query(step=9)
    assert total == 1 and idx.read(rows)[0].step == 9


def test_index_is_kept_on_disk_and_reused(tmp_path):
    run = write_run(tmp_path / "r", steps=4)
    a = RolloutIndex(run)
    a.update()
    steps = a.steps()
    a.close()
    b = RolloutIndex(run)
    assert b.indexed_bytes == (run / "rollouts.jsonl").stat().st_size
    assert b.update() == 0
    assert b.steps() == steps


def test_a_rewritten_file_is_indexed_again(tmp_path):
    run = write_run(tmp_path / "r", steps=4)
    idx = RolloutIndex(run)
    idx.update()
    (run / "rollouts.jsonl").unlink()
    write_run(tmp_path / "r2", steps=2, seed=5)
    (tmp_path / "r2" / "rollouts.jsonl").rename(run / "rollouts.jsonl")
    assert idx.update() == len(plain_read(run / "rollouts.jsonl"))
    assert max(s["step"] for s in idx.steps()) == 1


def test_malformed_and_old_format_lines(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    lines = [json.dumps({"rollout_id": "a", "prompt_id": "p", "reward": 1.0, "messages": []}),  # no step, no validation
             "{not json",
             json.dumps({"rollout_id": "b", "prompt_id": "p", "step": 2, "reward": float("nan") if False else None,
                         "unscorable": "reward: timed out", "validation": True}),
             json.dumps(["a list, not an object"])]
    (run / "rollouts.jsonl").write_text("\n".join(lines) + "\n")
    idx = RolloutIndex(run)
    assert idx.update() == 2
    steps = {(s["step"], s["validation"]): s for s in idx.steps()}
    assert steps[(-1, False)]["reward_mean"] == 1.0
    assert steps[(2, True)]["unscorable"] == 1 and steps[(2, True)]["reward_mean"] is None


def test_filters_and_paging(tmp_path):
    run = write_run(tmp_path / "r", steps=3, prompts=6, samples=5)
    idx = RolloutIndex(run)
    idx.update()
    records = [r for r in plain_read(run / "rollouts.jsonl") if r["step"] == 1 and not r["validation"]]
    pages, off = [], 0
    while True:
        rows, total = idx.query(1, limit=7, offset=off)
        if not rows:
            break
        pages += [r["rollout_id"] for r in rows]
        off += 7
    assert pages == [r["rollout_id"] for r in records] and total == 30
    rows, total = idx.query(1, limit=100, reward_min=0.5)
    assert {r["rollout_id"] for r in rows} == {r["rollout_id"] for r in records if r["reward"] is not None and r["reward"] >= 0.5}
    rows, _ = idx.query(1, limit=100, unscorable="only")
    assert {r["rollout_id"] for r in rows} == {r["rollout_id"] for r in records if r["unscorable"]}
    rows, _ = idx.query(1, limit=100, tool="add")
    assert {r["rollout_id"] for r in rows} == {r["rollout_id"] for r in records if r["tool_calls"]}
    needle = records[3]["messages"][0]["content"]
    rows, _ = idx.query(1, limit=100, text=needle.upper())
    assert records[3]["rollout_id"] in {r["rollout_id"] for r in rows}
    assert all(needle in json.dumps(rec.messages) for rec in idx.read(rows))
    assert idx.tools(1) == (["add"] if any(r["tool_calls"] for r in records) else [])


def test_read_only_run_directory_keeps_its_index_in_the_cache(tmp_path, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere; a read-only folder cannot be made here")
    monkeypatch.setenv("AGENTRL_HOME", str(tmp_path / "home"))
    run = write_run(tmp_path / "r", steps=2)
    run.chmod(0o555)
    try:
        idx = RolloutIndex(run)
        assert idx.update() > 0
        assert str(idx.db_path).startswith(str(tmp_path / "home"))
    finally:
        run.chmod(0o755)


def test_two_processes_extending_one_index_do_not_count_twice(tmp_path):
    import multiprocessing

    run = write_run(tmp_path / "r", steps=20, prompts=16, samples=16, pad=2000)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(3)  # all three start indexing the same bytes at once
    procs = [ctx.Process(target=_update, args=(str(run), start)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    idx = RolloutIndex(run)
    assert idx.update() == 0
    assert sum(s["rollouts"] for s in idx.steps()) == len(plain_read(run / "rollouts.jsonl"))


def _update(run: str, start) -> None:
    idx = RolloutIndex(run)
    start.wait()
    idx.update()
