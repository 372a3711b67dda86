"""``agentrl rescore``: a stored run's rollouts scored again with other rewards, through the same reward path
as training (reward files in the sandbox), old scores kept beside the new, the same bytes twice."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentrl.dataset import convert
from agentrl.record import RolloutRecord
from agentrl.rescore import RescoreError, rescore
from agentrl.rewards import RewardSet
from agentrl.rundir import RunDir
from agentrl.trajectory import make_item, make_sample, make_step

REAL_RUN = Path(__file__).parents[1] / "ui" / "recorded" / "real_run"
HOLE = Path(__file__).parents[1] / "fixtures" / "planted" / "hole_reward.py"


def _config(path: Path, rewards: list) -> str:
    path.write_text(json.dumps({"agentrl": {"name": "demo", "model": "demo", "train_data": "demo", "rewards": rewards}}))
    return str(path)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def real_run(tmp_path) -> Path:
    """The recorded demo run, with its rows in data/ as `agentrl train` keeps them (the demo's own generator
    rebuilds them; the recorded sources point at a machine's cache, so they are moved out of reach)."""
    from agentrl.demo.data import make_rows, write_jsonl

    run = tmp_path / "run"
    shutil.copytree(REAL_RUN, run)
    train = make_rows(512, 0)
    val = make_rows(64, 1, exclude={r["messages"][-1]["content"] for r in train})
    for name, rows in (("train", train), ("val", val)):
        write_jsonl(str(tmp_path / f"{name}.jsonl"), rows)
        convert(tmp_path / f"{name}.jsonl", RunDir(run).data / f"{name}.jsonl", split=name)
    lines = run.joinpath("rollouts.jsonl").read_text().splitlines()
    moved = [json.dumps({**json.loads(x), "source": "/nowhere/" + json.loads(x)["source"]}) for x in lines]
    run.joinpath("rollouts.jsonl").write_text("\n".join(moved) + "\n")
    return run


def test_the_recorded_demo_run_rescored_with_math_alone(real_run, tmp_path, capsys):
    out = tmp_path / "out"
    before = (real_run / "rollouts.jsonl").read_bytes()
    summary = rescore(str(real_run), _config(tmp_path / "math.json", [{"name": "math"}]), str(out))
    assert (real_run / "rollouts.jsonl").read_bytes() == before  # the old scores are never written over
    stored = _lines(real_run / "rollouts.jsonl")
    scores = _lines(out / "scores.jsonl")
    assert [s["rollout_id"] for s in scores] == [r["rollout_id"] for r in stored]
    for s, r in zip(scores, stored):
        assert s["old"] == {"reward": r["reward"], "components": r["components"], "unscorable": None, "reward_version": None}
        # the same math code as in training: every rollout's math part is scored as it was then
        assert s["new"]["components"] == {"math": r["components"]["math"]} and s["new"]["reward"] == r["components"]["math"]
        assert s["new"]["unscorable"] is None and s["new"]["reward_version"] == summary["new_reward_version"]
    assert summary["counts"]["changed"] == sum(r["reward"] != r["components"]["math"] for r in stored) > 0
    assert summary["flips_by_reward"]["tool_use"] == {"not in the new rewards": len(stored)}
    # dropping tool_use takes away the signal of groups that differed only in their tool use
    by_step = summary["advantages"]["by step"]
    assert summary["advantages"]["steps trained differently"] == len(by_step) > 0
    assert sum(s["groups losing their signal"] for s in by_step.values()) > 0
    assert f"rescored {len(stored)} rollouts" in capsys.readouterr().out


def test_the_same_rescore_twice_writes_the_same_bytes(real_run, tmp_path):
    config = _config(tmp_path / "math.json", [{"name": "math"}])
    rescore(str(real_run), config, str(tmp_path / "a"))
    rescore(str(real_run), config, str(tmp_path / "b"))
    for name in ("scores.jsonl", "groups.jsonl", "summary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def _run_scored_with_the_hole(tmp_path: Path) -> Path:
    """A run whose rollouts the planted-hole reward (a file, run in the sandbox) scored: the real record type,
    answers that echo the question's numbers, some right answers, one rollout lost to a tool server."""
    run = RunDir(tmp_path / "holed")
    rows = [{"messages": [{"role": "user", "content": f"What is {a} + {b}?"}],
             "metadata": {"expected_answer": str(a + b), "difficulty": "easy" if a < 20 else "hard"}}
            for a, b in ((12, 7), (31, 5), (8, 9))]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    convert(tmp_path / "train.jsonl", run.train_data)
    rows = [json.loads(json.loads(x)["extra_info"]["agentrl_row"]) for x in run.train_data.read_text().splitlines()]
    hole = RewardSet.from_config([str(HOLE)])
    for step, row in enumerate(rows, 1):
        a, b = (int(x) for x in row["messages"][0]["content"][8:-1].split(" + "))
        for n, answer in enumerate((f"{a} {b}", f"{a} and {b}", f"The answer is {a + b}.", "The answer is 0.")):
            rid = f"r-{step}-{n}"
            item = make_item(row["messages"], row["metadata"], id=row["id"], source=row["source"])
            result = hole.score(make_sample(rid, [make_step(answer)]), item)
            run.append_rollout(RolloutRecord(rollout_id=rid, prompt_id=row["id"], source=row["source"], step=step,
                                             trajectories=[{"response": answer, "tool_calls": [], "tool_results": []}],
                                             reward=result.score, components=result.components,
                                             reward_version=hole.version))
    run.append_rollout(RolloutRecord(rollout_id="r-lost", prompt_id=rows[0]["id"], source=rows[0]["source"], step=1,
                                     unscorable="tools: calculator did not answer", stop_reason="tool_infra_error"))
    return run.path


def test_closing_a_planted_hole_shows_the_flips_by_reward_slice_and_step(tmp_path):
    run = _run_scored_with_the_hole(tmp_path)
    summary = rescore(str(run), _config(tmp_path / "math.json", [{"name": "math", "label": "hole_reward"}]),
                      str(tmp_path / "out"))
    counts = summary["counts"]
    assert counts["passed -> failed"] == 6 and counts.get("failed -> passed", 0) == 0  # the two echoes of 3 rows
    assert summary["flips_by_reward"]["hole_reward"]["passed -> failed"] == 6
    assert summary["flips_by_slice"]["difficulty=easy"]["passed -> failed"] == 4
    assert summary["flips_by_slice"]["difficulty=hard"]["passed -> failed"] == 2
    assert counts["unscorable before"] == counts["unscorable now"] == 1  # the lost rollout stays unscorable
    lost = [s for s in _lines(tmp_path / "out" / "scores.jsonl") if s["rollout_id"] == "r-lost"][0]
    assert lost["new"]["reward"] is None and lost["new"]["unscorable"] == "tools: calculator did not answer"
    assert summary["advantages"]["steps trained differently"] == 3
    groups = _lines(tmp_path / "out" / "groups.jsonl")
    echo = [r for g in groups for r in g["rollouts"] if r["rollout_id"] == "r-1-0"][0]
    assert echo["old_advantage"] > 0 > echo["new_advantage"]  # the echo was pushed up; now it is pushed down
    assert summary["old_reward_versions"] == {RewardSet.from_config([str(HOLE)]).version: 12, "None": 1}


def test_a_new_reward_that_cannot_score_leaves_the_rollout_unscorable_never_zero(tmp_path):
    run = _run_scored_with_the_hole(tmp_path)
    broken = tmp_path / "broken.py"
    broken.write_text("def grade(sample, item):\n    return 1 / 0\n")
    summary = rescore(str(run), _config(tmp_path / "b.json", [{"name": str(broken)}]), str(tmp_path / "out"))
    assert summary["counts"]["unscorable now"] == 13
    news = [s["new"] for s in _lines(tmp_path / "out" / "scores.jsonl")]
    assert all(n["reward"] is None and n["unscorable"] for n in news)
    assert any("ZeroDivisionError" in n["unscorable"] for n in news)


def test_judge_calls_are_asked_once_per_model_and_prompt(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from judge_server import JudgeServer

    from agentrl.rewards import judge

    run = RunDir(tmp_path / "judged")
    (tmp_path / "t.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "Capital of France?"}],
                                                  "metadata": {"rubric": "Names Paris."}}) + "\n")
    convert(tmp_path / "t.jsonl", run.train_data)
    row = json.loads(json.loads(run.train_data.read_text())["extra_info"]["agentrl_row"])
    for n in range(40):  # 40 rollouts, 2 distinct answers
        answer = "Paris" if n % 2 else "Lyon"
        run.append_rollout(RolloutRecord(rollout_id=f"r{n}", prompt_id=row["id"], source=row["source"], step=1,
                                         trajectories=[{"response": answer}], reward=0.0))
    judge.clear_cache()
    with JudgeServer(["Score: 9/10"]) as server:
        config = _config(tmp_path / "j.json", [{"name": "llm_judge", "model": "openai/judge", "api_base": server.api_base}])
        summary = rescore(str(run.path), config, str(tmp_path / "out"))
        assert len(server.requests) == 2
    assert summary["counts"]["rollouts"] == 40 and summary["counts"]["unscorable now"] == 0
    judge.clear_cache()


def test_bad_input_fails_before_scoring(tmp_path):
    with pytest.raises(RescoreError, match="no rollouts.jsonl here"):
        rescore(str(tmp_path), "x.yaml", str(tmp_path / "out"))
    run = _run_scored_with_the_hole(tmp_path)
    with pytest.raises(RescoreError, match="never writes over the old scores"):
        rescore(str(run), "x.yaml", str(run))


def test_the_command(real_run, tmp_path):
    config = _config(tmp_path / "math.json", [{"name": "math"}])
    done = subprocess.run([sys.executable, "-m", "agentrl.cli", "rescore", str(real_run), "--config", config,
                           "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "steps that would have trained differently" in done.stdout and (tmp_path / "o" / "summary.json").is_file()


def test_memory_holds_a_few_steps_and_a_rollout_after_its_step_was_summed_is_counted_apart(tmp_path):
    run = _run_scored_with_the_hole(tmp_path)
    late = RolloutRecord(rollout_id="r-late", prompt_id="x", step=1, trajectories=[{"response": "1"}], reward=0.0)
    RunDir(run).append_rollout(late)  # step 1's groups were summed when step 3's rollouts came
    summary = rescore(str(run), _config(tmp_path / "m.json", [{"name": "math"}]), str(tmp_path / "out"), batch=1)
    # r-late, and r-lost (a step-1 rollout the helper writes after step 3's): both counted, neither mixed in
    assert summary["counts"]["rollouts after their step was summed (not in the advantage figures)"] == 2
    assert summary["advantages"]["steps"] == 3
