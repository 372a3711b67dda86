"""Per-turn credit from the config to the trainer: config and spec, the agent loop's rm_scores, agentrl_grpo."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

from agentrl.config import AgentrlSettings, ConfigError, load_config
from agentrl.credit import advantages
from agentrl.record import RolloutRecord
from agentrl.spec import RunSpec
from agentrl.verl.agent_loop import TurnCreditOutput, turn_rewards_at
from agentrl.verl.args import build_overrides
from agentrl.verl.grpo import compute_agentrl_grpo_advantage, turn_rewards, turn_spans


def settings(**kw):
    return AgentrlSettings(**{"model": "m", "train_data": "t.jsonl", "rewards": ["math"], **kw})


def test_config_line_picks_the_estimator(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("agentrl:\n  model: demo\n  train_data: d.jsonl\n  rewards: [math]\n  credit: turn\n")
    s, _, _ = load_config(path, [])
    assert s.credit.method == "turn" and s.credit.options() == {"gamma": 1.0}
    s, _, _ = load_config(path, ["agentrl.credit={method: step_group, gamma: 0.9, step_weight: 0.5}"])
    assert s.credit.options() == {"gamma": 0.9, "step_weight": 0.5}
    assert load_config(path, ["agentrl.credit=episode"])[0].credit.method == "episode"
    with pytest.raises(ConfigError) as info:
        load_config(path, ["agentrl.credit=td_lambda"])
    assert "agentrl.credit" in str(info.value) and "step_group" in str(info.value)


def test_the_spec_carries_the_credit_and_verl_gets_only_the_spec_path(tmp_path):
    s = settings(credit="turn")
    spec = RunSpec.from_settings(s, tmp_path)
    spec.write(tmp_path / "spec.json")
    assert RunSpec.read(tmp_path / "spec.json").credit.method == "turn"
    kw = dict(model_path="/m", train_file="/t", val_file=None, spec_path="/run/agentrl_spec.json", run_dir=Path("/run"),
              cpu=False)
    assert build_overrides(s, {}, **kw)["+algorithm.agentrl_spec"] == "/run/agentrl_spec.json"
    assert "+algorithm.agentrl_spec" not in build_overrides(settings(), {}, **kw)  # episode: today's keys


def test_turn_spans_and_rewards_decode_the_loop_output():
    mask = torch.tensor([1, 1, 0, 0, 1, 1, 1, 0, 1, 0])
    assert turn_spans(mask) == [(0, 2), (4, 7), (8, 9)]
    rewards = torch.zeros(10)
    rewards[1], rewards[6], rewards[9] = -0.2, 0.5, 1.0  # turn ends, and the episode at the last token
    assert turn_rewards(rewards, turn_spans(mask)) == pytest.approx([-0.2, 0.5, 1.0])
    rewards[6] = math.nan
    assert turn_rewards(rewards, turn_spans(mask)) is None


def _output(record: RolloutRecord, mask: list[int], turn_ends: list[int]) -> dict:
    n = len(mask)
    out = TurnCreditOutput(prompt_ids=[1, 2], response_ids=list(range(n)), response_mask=mask,
                           reward_score=record.reward if record.reward is not None else math.nan,
                           metrics=AgentLoopMetrics(), turn_rewards_at=turn_rewards_at(record, turn_ends, n))
    return out.as_dict()


ROLLOUTS = [  # reward, turn rewards, turn unscorable, response mask; turns end at each run's last 1
    (1.0, [None, 0.5], {}, [1, 1, 0, 1, 1, 0]),
    (0.0, [-0.2, None], {}, [1, 0, 0, 1, 1, 1]),
    (1.0, [None], {}, [1, 1, 1, 0, 0, 0]),
    (0.0, [None, None, None], {}, [1, 0, 1, 0, 1, 0]),
    (1.0, [None, None], {"1": "judge down"}, [1, 0, 1, 1, 0, 0]),  # a turn could not be scored
]


@pytest.mark.parametrize("method, options", [("turn", {"gamma": 1.0}), ("turn", {"gamma": 0.8}),
                                             ("step_group", {"gamma": 1.0, "step_weight": 0.5})])
def test_agentrl_grpo_gives_each_turns_tokens_the_advantage_agentrl_credit_computes(tmp_path, method, options):
    spec = RunSpec(run_dir=str(tmp_path), rewards=["math"], credit={"method": method, **options})
    spec.write(tmp_path / "spec.json")
    rows = []
    for reward, turns, bad, mask in ROLLOUTS:
        record = RolloutRecord(rollout_id="r", reward=reward, turn_rewards=turns, turn_unscorable=bad)
        ends = [end - 1 for _, end in turn_spans(torch.tensor(mask))]
        rows.append(_output(record, mask, ends))
    token_rewards = torch.stack([r["rm_scores"] for r in rows])
    assert token_rewards[0].sum().item() == pytest.approx(1.5)  # the episode reward plus the turn rewards
    mask = torch.stack([r["response_mask"] for r in rows]).float()
    index = np.array(["g"] * len(rows), dtype=object)
    adv, _ = compute_agentrl_grpo_advantage(token_rewards, mask, index, config={"agentrl_spec": str(tmp_path / "spec.json")})

    nan = {int(k) for _, _, bad, _ in ROLLOUTS for k in bad}
    want = advantages(method, [r for r, *_ in ROLLOUTS],
                      [[math.nan if (i == 4 and k in nan) else t for k, t in enumerate(turns)]
                       for i, (_, turns, _, _) in enumerate(ROLLOUTS)], ["g"] * len(ROLLOUTS), **options)
    for i, (_, _, _, row_mask) in enumerate(ROLLOUTS):
        for k, (start, end) in enumerate(turn_spans(torch.tensor(row_mask))):
            assert adv[i, start:end].tolist() == pytest.approx([want[i][k]] * (end - start), abs=1e-6)
        assert (adv[i][torch.tensor(row_mask) == 0] == 0).all()  # tool and template tokens: no gradient
    assert (adv[4] == 0).all()  # the rollout with an unscorable turn
    assert adv[0, 0] != adv[0, 3]  # turns of one rollout differ
    logged = [json.loads(x) for x in (tmp_path / "logs" / "advantages.jsonl").read_text().splitlines()]
    assert len(logged) == len(want)
    for line, row in zip(logged, want):
        assert line["turn_advantages"] == pytest.approx(row, abs=1e-6)
    assert logged[4]["turn_rewards"] is None and logged[0]["turn_rewards"] == pytest.approx([0.0, 1.5])


def test_episode_output_is_todays_and_the_estimator_without_a_spec_is_grpo():
    record = RolloutRecord(rollout_id="r", reward=1.0, turn_rewards=[0.5, None])
    plain = AgentLoopOutput(prompt_ids=[1], response_ids=[1, 2, 3], response_mask=[1, 0, 1], reward_score=1.0,
                            metrics=AgentLoopMetrics()).as_dict()
    assert plain["rm_scores"].tolist() == [0.0, 0.0, 1.0]
    assert _output(record, [1, 0, 1], [0, 2])["rm_scores"].tolist() == [0.5, 0.0, 1.0]
