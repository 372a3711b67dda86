"""The explorer's page data: advantages as agentrl_grpo computes them, readable trajectories, group view."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentrl.credit import group_advantages
from agentrl.rolloutfile import decode
from agentrl.ui.explorer import Filters, explorer_page, readable
from agentrl.ui.index import RolloutIndex
from agentrl.ui.synthetic import write_run


@pytest.mark.parametrize("rewards", [[1.0, 0.0, 0.5, 0.5], [1.0, None, 0.0], [0.7], [None, None], [0.3, 0.3, 0.3],
                                     [None, 0.4]])
@pytest.mark.parametrize("by_std", [True, False])
def test_advantages_are_the_trainers(rewards, by_std):
    torch = pytest.importorskip("torch")
    from agentrl.verl.grpo import grouped_advantages  # the estimator verl runs with in agentrl configs

    scores = torch.tensor([0.0 if r is None else r for r in rewards])
    scored = torch.tensor([r is not None for r in rewards])
    want = grouped_advantages(scores, scored, np.zeros(len(rewards), dtype=object), norm_by_std=by_std).tolist()
    assert group_advantages(rewards, norm_by_std=by_std) == pytest.approx(want, abs=1e-6)


def test_the_page_shows_the_advantages_of_a_run_that_did_not_divide_by_std(tmp_path):
    """A run trained with algorithm.norm_adv_by_std_in_grpo=false: the page's advantages are centred only."""
    import yaml

    from agentrl.rundir import RunDir
    from agentrl.ui.explorer import advantages

    run = write_run(tmp_path / "run", steps=3, prompts=2, samples=4)
    idx = RolloutIndex(run)
    idx.update()
    divided = advantages(idx, 1)
    config = yaml.safe_load(RunDir(run).config.read_text())
    config.setdefault("verl_overrides", {})["algorithm.norm_adv_by_std_in_grpo"] = False
    RunDir(run).config.write_text(yaml.safe_dump(config))
    centred = advantages(idx, 1)
    for members in idx.group_rewards(1).values():
        scored = [r for _, r in members if r is not None]
        mean = sum(scored) / len(scored) if len(scored) > 1 else 0.0
        for rid, reward in members:
            assert centred[rid] == pytest.approx(0.0 if reward is None else reward - mean, abs=1e-6)
    assert centred and centred != divided  # the synthetic rewards vary within a group: dividing changes them


def test_readable_keeps_calls_results_errors_and_timings():
    record = {
        "rollout_id": "r-1", "prompt_id": "p", "step": 3, "reward": None, "components": {},
        "unscorable": "tools: server down", "stop_reason": "tool_infra_error", "tool_calls": 1,
        "messages": [{"role": "user", "content": "What is 2+2?"},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"type": "function", "id": "c0", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}]},
                     {"role": "tool", "tool_call_id": "c0", "content": "connection refused"}],
        "trajectories": [{"response": "", "tool_calls": [{"id": "c0", "name": "add", "arguments": {"a": 2, "b": 2}}],
                        "tool_results": [{"id": "c0", "name": "add", "content": "connection refused", "is_error": True}]}],
        "seconds": 1.5, "tool_seconds": 1.2,
    }
    view = readable(decode(json.dumps(record)))  # the line as rollouts.jsonl holds it, read by its decoder
    assert view["unscorable"] == "tools: server down" and view["reward"] is None
    assert view["turns"][1]["calls"] == [{"id": "c0", "name": "add", "arguments": '{\n "a": 2,\n "b": 2\n}'}]
    assert view["turns"][2]["is_error"] and view["turns"][2]["call_id"] == "c0"
    assert view["timings"] == {"seconds": 1.5, "tool_seconds": 1.2} and view["tools"] == ["add"]


def test_pages_and_groups(tmp_path):
    run = write_run(tmp_path / "r", steps=5, prompts=6, samples=4)
    idx = RolloutIndex(run)
    idx.update()
    p1 = explorer_page(idx, 1, page=1)
    p2 = explorer_page(idx, 1, page=2)
    assert p1["total"] == 24 and p1["pages"] == 2 and len(p1["rollouts"]) == 20 and len(p2["rollouts"]) == 4
    assert not {r["rollout_id"] for r in p1["rollouts"]} & {r["rollout_id"] for r in p2["rollouts"]}
    g = explorer_page(idx, 1, groups=True)
    assert g["total"] == 6 and len(g["groups"]) == 4 and all(len(x["rollouts"]) == 4 for x in g["groups"])
    for grp in g["groups"]:
        scored = [r for r in grp["rollouts"] if r["reward"] is not None]
        if len(scored) > 1:
            assert sum(r["advantage"] for r in scored) == pytest.approx(0.0, abs=1e-6)
        assert all(r["advantage"] == 0.0 for r in grp["rollouts"] if r["reward"] is None)
    one = explorer_page(idx, 1, group="train:2")
    assert [x["prompt_id"] for x in one["groups"]] == ["train:2"]
    only = explorer_page(idx, 1, filters=Filters(unscorable="none", reward_min=0.99))
    assert all(r["reward"] >= 0.99 for r in only["rollouts"])
    val = explorer_page(idx, 5, validation=True)
    assert len(val["rollouts"]) == 6 and all(r["advantage"] is None for r in val["rollouts"])  # not trained on


def test_a_malformed_call_is_shown_as_the_model_wrote_it():
    """A rollout the demo run recorded: the model wrote broken JSON in <tool_call>; the parser dropped it."""
    from pathlib import Path

    lines = (Path(__file__).parent / "recorded" / "real_run" / "rollouts.jsonl").read_text().splitlines()
    record = next(decode(x) for x in lines if '"(unparsed)"' in x)
    view = readable(record)
    assistant = next(t for t in view["turns"] if t["role"] == "assistant")
    (call,) = assistant["calls"]
    assert call["id"] == "malformed0" and call["name"] == "(malformed call, as the model wrote it)"
    assert call["arguments"].startswith('{"name": "add", "arguments": {"a": 2}}') and '": {"2}}' in call["arguments"]
