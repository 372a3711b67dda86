"""``agentrl inspect runs/X/rollouts.jsonl``: each turn's reward and the advantage the run's credit gives it."""

from __future__ import annotations

import json

import pytest

from agentrl.cli import main
from agentrl.credit import advantages
from agentrl.record import RolloutRecord
from agentrl.rundir import RunDir
from agentrl.spec import RunSpec

ROLLOUTS = [(1.0, [-0.2, None]), (0.0, [None, None]), (0.5, [0.3])]


def _run(tmp_path, method):
    run = RunDir(tmp_path / "run")
    run.path.mkdir(parents=True)
    RunSpec(run_dir=str(run.path), rewards=["math"], credit=method).write(run.spec)
    for n, (reward, turns) in enumerate(ROLLOUTS):
        run.append_rollout(RolloutRecord(
            rollout_id=f"r{n}", prompt_id="p1", step=1, group="u1", reward=reward, turn_rewards=turns,
            messages=[{"role": "user", "content": "what is 2+3?"}],
            trajectories=[{"response": f"turn {k}", "tool_calls": [], "tool_results": []} for k in range(len(turns))]))
    return run.rollouts


@pytest.mark.parametrize("method, flag", [("turn", []), ("episode", []), ("episode", ["--credit", "turn"])])
def test_inspect_a_run_shows_per_turn_advantages(tmp_path, capsys, method, flag):
    path = _run(tmp_path, method)
    assert main(["inspect", str(path), "--worst", "3", "--json", *flag]) == 0
    worst = {c["record"]["rollout_id"]: c["record"] for c in json.loads(capsys.readouterr().out)["worst"]}
    used = flag[1] if flag else method
    want = advantages(used, [r for r, _ in ROLLOUTS], [t for _, t in ROLLOUTS], ["g"] * 3)
    for n in range(3):
        assert worst[f"r{n}"]["turn_advantages"] == pytest.approx(want[n])
    assert main(["inspect", str(path), "--worst", "1", *flag]) == 0
    text = capsys.readouterr().out
    assert f"turn 1: reward none, advantage {want[1][0]:+.3f}" in text  # the worst: r1, no turn scores
