"""``agentrl prior | eval | compare | inspect`` on the tiny demo, through the real calculator server."""

from __future__ import annotations

import json

import pytest

from agentrl.cli import main
from agentrl.workflow import compare as compare_mod
from agentrl.workflow.evaluate import verdict


def test_eval_writes_per_sample_records(demo_config, tmp_path, capsys):
    out = tmp_path / "base.jsonl"
    assert main(["eval", str(demo_config), "--model", "base", "--samples", "2", "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    header, records = lines[0]["agentrl_eval"], lines[1:]
    assert header["samples"] == 2 and header["rows"] == 8 and header["temperature"] == 1.0
    assert len(records) == 16 == summary["rollouts"]
    for r in records:
        assert {"id", "reward", "components", "tool_calls", "tokens", "latency", "messages", "trajectories",
                "metadata"} <= set(r)
    assert summary["reward_mean"] == pytest.approx(sum(r["reward"] for r in records) / 16)


def test_eval_of_a_missing_run_is_a_clear_error(demo_config, tmp_path, capsys):
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    assert main(["eval", str(demo_config), "--model", str(tmp_path / "run"), "-o", str(tmp_path / "x.jsonl")]) == 2
    assert "has no checkpoints" in capsys.readouterr().err
    assert main(["eval", str(demo_config), "--model", str(tmp_path / "nothing"), "-o", str(tmp_path / "x.jsonl")]) == 2
    assert "neither 'base', a run directory" in capsys.readouterr().err


def test_prior_buckets_and_verdict(demo_config, capsys):
    assert main(["prior", str(demo_config), "--samples", "3", "--limit", "4", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["prompts"] == 4 and sum(result["counts"].values()) == 4
    assert sum(result["histogram"].values()) == 4
    assert result["signal_band"] == result["shares"]["sometimes"]
    assert result["verdict"] == verdict(result["shares"]["sometimes"], result["shares"]["never"])[0]


@pytest.mark.parametrize("sometimes,never,word", [
    (0.0, 1.0, "fix the prior"), (0.40, 0.3, "go"), (0.20, 0.5, "go (thin)"), (0.05, 0.5, "rework the data")])
def test_verdict_follows_the_tutorial(sometimes, never, word):
    assert verdict(sometimes, never)[0] == word


def _rec(id_, reward, tools=0, tokens=10, **meta):
    return {"id": id_, "sample": 0, "reward": reward, "components": {"math": reward}, "unscorable": None,
            "tool_calls": tools, "tokens": tokens, "latency": 0.1, "metadata": meta, "stop_reason": "answered",
            "prompt": [{"role": "user", "content": f"q {id_}"}],
            "messages": [{"role": "user", "content": f"q {id_}"}, {"role": "assistant", "content": f"a {reward}"}],
            "trajectories": [{"response": f"answer {reward}", "tool_calls": [{"id": "c0", "name": "add", "arguments": {"a": 1}}],
                            "tool_results": [{"id": "c0", "name": "add", "content": "2", "is_error": False}]}]}


def _eval_file(path, records, model):
    path.write_text(json.dumps({"agentrl_eval": {"model_arg": model}}) + "\n"
                    + "".join(json.dumps(r) + "\n" for r in records))
    return str(path)


@pytest.fixture
def pair(tmp_path):
    a = [_rec("p1", 0.0, kind="x"), _rec("p2", 1.0, kind="x"), _rec("p3", 0.0, kind="y"), _rec("p4", 1.0, kind="y"),
         _rec("p5", 0.5, kind="y")]
    b = [_rec("p1", 1.0, 1, 30, kind="x"), _rec("p2", 1.0, 1, 30, kind="x"), _rec("p3", 0.0, 1, 30, kind="y"),
         _rec("p4", 0.0, 1, 30, kind="y"), _rec("p5", 0.5, 1, 30, kind="y")]
    return _eval_file(tmp_path / "a.jsonl", a, "base"), _eval_file(tmp_path / "b.jsonl", b, "runs/x")


def test_compare_counts_deltas_and_slices(pair, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert main(["compare", *pair, "--by", "metadata.kind", "-o", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    s = result["summary"]
    assert s["reward"]["a"] == pytest.approx(0.5) and s["reward"]["b"] == pytest.approx(0.5)
    assert s["tool_calls"]["delta"] == pytest.approx(1.0) and s["tokens"]["delta"] == pytest.approx(20)
    assert s["counts"] == {"improved": 1, "regressed": 1, "already solved": 1, "never solved": 1, "unscorable": 0,
                                "unchanged (partial)": 1, "unchanged": 3}
    x, y = result["slices"]["metadata.kind"]["x"], result["slices"]["metadata.kind"]["y"]
    assert x["reward"]["delta"] == pytest.approx(0.5) and x["counts"]["improved"] == 1
    assert y["reward"]["delta"] == pytest.approx(-1 / 3) and y["counts"]["regressed"] == 1
    assert json.loads(out.read_text())["prompts"][3]["status"] == "regressed"


def test_compare_table_for_people(pair, capsys):
    assert main(["compare", *pair, "--by", "kind"]) == 0
    text = capsys.readouterr().out
    assert "mean reward" in text and "+0.000" in text and "regressed" in text and "by kind" in text
    assert "95% interval over prompts (paired bootstrap, 5 prompts)" in text and "(includes 0)" in text


def test_the_interval_of_the_change_is_over_paired_prompts():
    assert compare_mod.interval([0.5]) is None
    assert compare_mod.interval([1.0] * 10) == (1.0, 1.0)
    deltas = [1.0] * 12 + [-1.0] * 5 + [0.0] * 71  # 88 prompts, +0.08 on average
    lo, hi = compare_mod.interval(deltas)
    assert lo < 7 / 88 < hi and lo < 0  # seven more solved out of 88 could be the draw of prompts
    assert compare_mod.interval(deltas) == (lo, hi)  # the same interval every time
    lo, hi = compare_mod.interval([1.0] * 30 + [0.0] * 58)
    assert lo > 0.2 and hi < 0.45


def test_inspect_shows_the_regression_side_by_side(pair, tmp_path, capsys):
    cmp = tmp_path / "cmp.json"
    main(["compare", *pair, "-o", str(cmp)])
    capsys.readouterr()
    assert main(["inspect", str(cmp), "--worst", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in result["regressions"]] == ["p4"]
    assert main(["inspect", str(cmp)]) == 0
    text = capsys.readouterr().out
    assert "q p4" in text and "answer 1.0" in text and "answer 0.0" in text and '→ add({"a": 1})' in text


def test_inspect_an_eval_file_lists_its_worst(pair, capsys):
    assert main(["inspect", pair[1], "--worst", "2", "--json"]) == 0
    assert [c["reward"] for c in json.loads(capsys.readouterr().out)["worst"]] == [0.0, 0.0]


def test_compare_rejects_files_that_are_not_evals(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    assert main(["compare", str(bad), str(bad)]) == 2
    assert f"{bad}:1: not an `agentrl eval` record" in capsys.readouterr().err


def test_status_rules():
    assert compare_mod._status(0.0, 0.0) == "never solved" and compare_mod._status(1.0, 1.0) == "already solved"
    assert compare_mod._status(None, 1.0) == "unscorable"


def test_eval_of_a_run_directory_step(demo_config, tiny_demo, tmp_path, capsys):
    import shutil

    run = tmp_path / "runs" / "r"
    for step in (2, 4):
        shutil.copytree(tiny_demo["model_path"], run / "checkpoints" / f"global_step_{step}" / "actor" / "huggingface")
    (run / "checkpoint_status.json").write_text(json.dumps({"complete": True, "step": 4}))
    out = tmp_path / "r.jsonl"
    assert main(["eval", str(demo_config), "--model", f"{run}:2", "--limit", "2", "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"].endswith("global_step_2/actor/huggingface")
    assert main(["eval", str(demo_config), "--model", str(run), "--limit", "2", "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"].endswith("global_step_4/actor/huggingface")
    assert main(["eval", str(demo_config), "--model", f"{run}:3", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no HuggingFace model for step 3" in err and "global_step_2, global_step_4" in err


@pytest.mark.parametrize("change,message", [
    ({"rewards": [{"name": "mathh"}]}, "unknown reward 'mathh'"),
    ({"tools": {"mcpServers": {"calc": {"command": "/bin/false"}}}}, "tool server 'calc' failed"),
])
def test_bad_rewards_and_dead_tool_servers_stop_before_the_model_loads(demo_config, tmp_path, capsys, change, message,
                                                                       monkeypatch):
    import yaml

    from agentrl.verl import engine

    def no_engine(*a, **k):
        raise AssertionError("the model was loaded before the config was checked")

    monkeypatch.setattr(engine, "open_engine", no_engine)
    cfg = yaml.safe_load(demo_config.read_text())
    cfg["agentrl"].update(change)
    cfg["agentrl"]["val_data"] = str(demo_config.parent / "data" / "val.jsonl")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    assert main(["eval", str(bad), "--model", "base", "-o", str(tmp_path / "x.jsonl")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()
