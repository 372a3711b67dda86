"""The job page's rollout view shows per-turn rewards and the advantages the run's credit method gives them."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agentrl.credit import advantages
from agentrl.record import RolloutRecord
from agentrl.rundir import RunDir
from agentrl.spec import RunSpec
from agentrl.ui.app import create_app
from agentrl.ui.explorer import explorer_page, per_turn
from agentrl.ui.index import RolloutIndex
from agentrl.ui.synthetic import write_run

TURNS = [(1.0, [-0.2, None], {}), (0.0, [None, None], {}), (1.0, [None, None, None], {"1": "judge: timeout"}),
         (0.5, [0.3], {})]


def _run(tmp_path, method):
    run = write_run(tmp_path / "runs" / "t", steps=1, prompts=1, samples=1)
    RunSpec(run_dir=str(run), rewards=["math"], credit={"method": method}).write(RunDir(run).spec)
    records = []
    for n, (reward, turns, bad) in enumerate(TURNS):
        rec = RolloutRecord(rollout_id=f"r-turn{n}", prompt_id="multi", step=1, group="u1", reward=reward,
                            turn_rewards=turns, turn_unscorable=bad,
                            trajectories=[{"response": f"t{k}", "tool_calls": [], "tool_results": []} for k in range(len(turns))],
                            messages=[{"role": "user", "content": "q"}])
        RunDir(run).append_rollout(rec)
        records.append(rec)
    return run


@pytest.mark.parametrize("method", ["turn", "episode"])
def test_group_view_has_the_trainers_turn_advantages(tmp_path, method):
    run = _run(tmp_path, method)
    idx = RolloutIndex(run)
    idx.update()
    page = explorer_page(idx, 1, group="multi")
    shown = {r["rollout_id"]: r["per_turn"] for r in page["groups"][0]["rollouts"]}
    want = advantages(method, [t[0] for t in TURNS],
                      [[float("nan") if str(k) in bad else v for k, v in enumerate(ts)] for _, ts, bad in TURNS],
                      ["g"] * len(TURNS))
    for n, (reward, turns, bad) in enumerate(TURNS):
        view = shown[f"r-turn{n}"]
        assert [t["reward"] for t in view] == turns
        assert [t["advantage"] for t in view] == pytest.approx(want[n])
    assert shown["r-turn2"][1]["unscorable"] == "judge: timeout"


def test_rollout_page_renders_per_turn_lines(tmp_path):
    run = _run(tmp_path, "turn")
    client = TestClient(create_app(run.parent, background=False))
    html = client.get("/runs/t/rollouts?step=1&group=multi").text
    assert "turn 1: reward -0.2" in html and "turn 2: reward none" in html
    assert 'title="judge: timeout">unscorable' in html and "advantage <b>" in html


def test_records_without_turn_scores_show_no_per_turn_line():
    assert per_turn(RolloutRecord("r", turn_rewards=[None, None]), None) == []
    assert per_turn(RolloutRecord("r"), None) == []
