"""The web app's routes, through FastAPI's test client (the browser tests use a real server)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from agentrl.ui.app import create_app
from agentrl.ui.synthetic import append_step


@pytest.fixture
def client(runs_root):
    return TestClient(create_app(runs_root, background=False))


def test_run_list(client):
    runs = {r["name"]: r for r in client.get("/api/runs").json()}
    assert runs["alpha"]["status"] == "resumable" and runs["alpha"]["step"] == 12 and runs["alpha"]["total"] == 20
    assert runs["done"]["status"] == "finished" and runs["done"]["percent"] == 100.0
    assert "agentrl runs" in client.get("/").text


def test_state_sends_only_new_metric_lines(client, runs_root):
    first = client.get("/api/runs/alpha/state").json()
    assert [m["step"] for m in first["metrics"]] == list(range(1, 13))
    assert "verl" not in first["metrics"][0] and "response_length/max" in first["metrics"][0]
    assert len(first["log"]) > 0 and [c["step"] for c in first["checkpoints"]] == [5, 10]
    append_step(runs_root / "alpha", 13)
    again = client.get(f"/api/runs/alpha/state?offset={first['offset']}").json()
    assert [m["step"] for m in again["metrics"]] == [13] and again["info"]["step"] == 13
    assert max(s["step"] for s in again["steps"] if not s["validation"]) == 12


def test_run_page_shows_config_and_files(client):
    page = client.get("/runs/alpha").text
    for text in ("alpha", "./my_reward.py", "calculator", "algorithm.adv_estimator", "rollouts.jsonl",
                 "static/plotly.min.js", "Evaluation snapshot"):
        assert text in page


def test_downloads(client, runs_root):
    for name in ("config.yaml", "training.log", "metrics.jsonl", "rollouts.jsonl"):
        resp = client.get(f"/runs/alpha/files/{name}")
        assert resp.status_code == 200 and resp.content == (runs_root / "alpha" / name).read_bytes()
    assert client.get("/runs/alpha/files/agentrl_spec.json").status_code == 404
    assert client.get("/runs/alpha/files/..%2F..%2Fetc%2Fpasswd").status_code == 404
    missing = client.get("/api/runs/nope/state")
    assert missing.status_code == 404 and "alpha" in missing.json()["detail"]
    waiting = client.get("/runs/nope")  # the page of a run that is about to start reloads until it exists
    assert waiting.status_code == 404 and "No run named nope" in waiting.text and 'http-equiv="refresh"' in waiting.text
    (runs_root / "nope").mkdir()
    (runs_root / "nope" / "config.yaml").write_text("agentrl: {max_steps: 3}\n")
    assert client.get("/runs/nope").status_code == 200


def test_explorer_pages_filters_and_groups(client, runs_root):
    records = [json.loads(x) for x in (runs_root / "alpha" / "rollouts.jsonl").read_text().splitlines()]
    step4 = [r for r in records if r["step"] == 4 and not r["validation"]]
    page = client.get("/runs/alpha/rollouts?step=4").text
    assert all(r["rollout_id"] in page for r in step4)  # 16 rollouts: one page
    assert "advantage" in page and step4[0]["messages"][0]["content"] in page
    default = client.get("/runs/alpha/rollouts").text
    assert "step <b>11</b>" in default  # the newest training step
    bad = [r for r in step4 if r["reward"] is not None and r["reward"] < 0.5]
    low = client.get("/runs/alpha/rollouts?step=4&reward_max=0.49&unscorable=none").text
    assert all(r["rollout_id"] in low for r in bad)
    assert not any(r["rollout_id"] in low for r in step4 if r not in bad)
    grp = client.get("/runs/alpha/rollouts?step=4&group=train:1").text
    assert grp.count('class="rollout"') == 4
    assert client.get("/runs/alpha/rollouts?step=x").status_code == 400
    assert client.get("/runs/alpha/rollouts?step=4&unscorable=maybe").status_code == 400
    val = client.get("/runs/alpha/rollouts?step=10&validation=1").text
    assert "(validation)" in val


def test_explorer_step_navigation_stays_small_for_long_runs(client, runs_root):
    from agentrl.ui.synthetic import append_step

    for step in range(13, 80):
        append_step(runs_root / "alpha", step, prompts=1, samples=1, val_every=0)
    page = client.get("/runs/alpha/rollouts?step=40").text
    assert page.count('class="steps"') == 1 and page.count("?step=") < 40  # a window, not every step
    assert 'id="prev-step" href="?step=39"' in page and 'id="next-step" href="?step=41"' in page
    missing = client.get("/runs/alpha/rollouts?step=1000").text  # past the end: the nearest steps are offered
    assert 'id="prev-step" href="?step=78"' in missing and "next-step" not in missing


def test_a_run_that_has_only_just_started(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTRL_HOME", str(tmp_path / "home"))
    run = tmp_path / "runs" / "new"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("agentrl: {max_steps: 40, rewards: [{name: math}]}\n")
    (run / "training.log").write_text("\n===== attempt 1 2026-11-23 10:00:00 =====\n")
    client = TestClient(create_app(tmp_path / "runs", background=False))
    state = client.get("/api/runs/new/state").json()
    assert state["metrics"] == [] and state["steps"] == [] and state["checkpoints"] == []
    assert state["info"]["summary"] == "no step finished yet" and state["info"]["step"] == 0
    assert client.get("/runs/new").status_code == 200
    assert "no rollouts yet" in client.get("/runs/new/rollouts").text


def test_run_page_lists_reward_versions_and_tripwire_alerts(client, runs_root):
    from agentrl.rewards import RewardSet
    from agentrl.rewards.versions import record_version
    from agentrl.rundir import RunDir

    run = RunDir(runs_root / "alpha")
    record_version(run, RewardSet.from_config([{"name": "math"}]))
    with run.metrics.open("a") as fh:
        fh.write(json.dumps({"step": 13, "validation": False, "alerts": [
            {"step": 13, "signal": "same_answer", "message": "one answer to 9 prompts", "examples": ["r-abc"]}]}) + "\n")
    page = client.get("/runs/alpha").text
    assert "Reward integrity" in page and RewardSet.from_config([{"name": "math"}]).version in page
    assert "same_answer" in page and "one answer to 9 prompts" in page and "r-abc" in page
