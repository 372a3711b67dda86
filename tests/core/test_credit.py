"""agentrl.credit: the maths of turn-level credit, on CPU.

(a) ``episode`` is verl's GRPO bit for bit; (b) the RFC #7244 bias test on a stop-or-continue bandit;
(c) unscored turns pass credit on, unscorable ones stay out; (d) a three-turn tool task whose second
turn decides the outcome.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from agentrl.credit import CreditError, advantages, returns
from agentrl.verl.grpo import compute_agentrl_grpo_advantage


def _verl_grpo(rewards: list[float], groups: list[str], norm: bool) -> torch.Tensor:
    token_rewards = torch.zeros(len(rewards), 3)
    token_rewards[:, -1] = torch.tensor(rewards)
    adv, _ = compute_grpo_outcome_advantage(token_rewards, torch.ones(len(rewards), 3),
                                            np.array(groups, dtype=object), norm_adv_by_std_in_grpo=norm)
    return adv[:, 0]


@pytest.mark.parametrize("rewards,groups,norm", [
    ([1.0, 0.0, 1.0, 0.0], list("aaaa"), True),
    ([0.3, 0.7, 0.11, 0.9, 0.5, 0.5], list("aabbcc"), True),  # a group with no variance: std 0, epsilon
    ([0.3, 0.7, 0.11, 0.9, 0.5], list("aabbc"), True),        # a group of one: mean 0, std 1
    ([0.3, 0.7, 0.11, 0.9, 0.5], list("aabbc"), False),       # Dr. GRPO: not divided by the std
    ([0.123456, -2.5, 1e-3, 7.75, 0.333333, 0.1], list("aaabbb"), True),
])
def test_episode_is_verl_grpo_bit_for_bit(rewards, groups, norm):
    turns = [[None] * (1 + i % 3) for i in range(len(rewards))]  # turn counts differ; turn rewards absent (weight 0)
    got = advantages("episode", rewards, turns, groups, norm_by_std=norm)
    want = _verl_grpo(rewards, groups, norm).tolist()
    for i, per_turn in enumerate(got):
        assert per_turn == [want[i]] * len(turns[i])  # exact float equality: bit for bit

    # agentrl_grpo (the trainer's estimator) is the same formula
    token_rewards = torch.zeros(len(rewards), 2)
    token_rewards[:, -1] = torch.tensor(rewards)
    ours, _ = compute_agentrl_grpo_advantage(token_rewards, torch.ones(len(rewards), 2), np.array(groups, dtype=object),
                                             norm_adv_by_std_in_grpo=norm)
    assert ours[:, 0].tolist() == want
    # turn rewards of weight 0 (all None) and equal turn counts: turn 1 of ``turn`` is GRPO too
    same = advantages("turn", rewards, [[None, None]] * len(rewards), groups, norm_by_std=norm)
    assert [a[0] for a in same] == want


def test_episode_ignores_turn_rewards_and_keeps_unscorable_out():
    got = advantages("episode", [1.0, 0.0, None, 1.0], [[0.5], [float("nan")], [1.0], [None, None]], list("aaaa"))
    assert got[2] == [0.0]
    kept = advantages("episode", [1.0, 0.0, 1.0], [[0.0], [0.0], [0.0, 0.0]], list("aaa"))
    assert [got[0], got[1], got[3]] == kept


# --- (b) the bias test --------------------------------------------------------------------------------------

def _bandit(seed: int, groups: int, n: int, noise_mean: float, p_continue: float = 0.5):
    """Each rollout stops after turn 1 or continues to turn 2 (probability ``p_continue``). A non-final turn gets
    an intermediate reward that is pure noise, N(noise_mean, 1); the episode reward is Bernoulli(0.5) whatever
    the agent does. Returns the inputs of ``advantages`` and whether each group's rollout 0 continued."""
    rng = random.Random(seed)
    rewards, turns, ids, continued = [], [], [], []
    for g in range(groups):
        for i in range(n):
            go_on = rng.random() < p_continue
            rewards.append(float(rng.random() < 0.5))
            turns.append([rng.gauss(noise_mean, 1.0), None] if go_on else [None])
            ids.append(g)
            if i == 0:
                continued.append(go_on)
    return rewards, turns, ids, continued


def naive(rewards, turns, groups):
    """The per-turn-index normalisation RFC #7244 warns about: centre each turn index's rewards (the episode
    reward counted as the last turn's) over the rollouts that have that turn, and sum from turn k to the
    rollout's own last turn, so the baseline has one term per turn the rollout chose to take."""
    u = [[(t or 0.0) + (r if k == len(ts) - 1 else 0.0) for k, t in enumerate(ts)] for r, ts in zip(rewards, turns)]
    sums: dict = {}
    for g, us in zip(groups, u):
        for k, x in enumerate(us):
            s = sums.setdefault((g, k), [0.0, 0])
            s[0] += x
            s[1] += 1
    out = []
    for g, us in zip(groups, u):
        centred = [x - sums[(g, k)][0] / sums[(g, k)][1] for k, x in enumerate(us)]
        out.append([sum(centred[k:]) for k in range(len(us))])
    return out


def _mean_se(values: list[float]) -> tuple[float, float]:
    m = sum(values) / len(values)
    var = sum((v - m) ** 2 for v in values) / (len(values) - 1)
    return m, math.sqrt(var / len(values))


N, GROUPS = 8, 6000


@pytest.mark.parametrize("noise_mean", [0.0, 0.5])
def test_turn_estimator_has_no_hidden_bonus_for_another_turn(noise_mean):
    """Rollout 0 of every group is one independent sample of "continue"'s advantage at turn 1. Its true
    advantage is Q(continue) - V = (1 - p) * noise_mean (continuing collects the intermediate reward), scaled
    by (n-1)/n because the group mean counts the rollout itself. The ``turn`` estimator (no std division)
    must hit it within 4 standard errors; the naive one misses it by the group mean of turn-1 rewards."""
    rewards, turns, ids, continued = _bandit(seed=7244 + int(noise_mean * 10), groups=GROUPS, n=N, noise_mean=noise_mean)
    truth = (1 - 0.5) * noise_mean * (N - 1) / N
    ours = advantages("turn", rewards, turns, ids, norm_by_std=False)
    bad = naive(rewards, turns, ids)
    pick = [g * N for g in range(GROUPS) if continued[g]]
    m, se = _mean_se([ours[i][0] for i in pick])
    assert se < 0.03  # the test has power: about 3000 independent samples
    assert abs(m - truth) < 4 * se, (m, se, truth)
    m_naive, se_naive = _mean_se([bad[i][0] for i in pick])
    assert abs(m_naive - truth) > 10 * se_naive, (m_naive, se_naive, truth)


def test_turn_estimator_with_std_scale_is_centred_when_noise_has_mean_zero():
    rewards, turns, ids, continued = _bandit(seed=11, groups=GROUPS, n=N, noise_mean=0.0)
    ours = advantages("turn", rewards, turns, ids)
    m, se = _mean_se([ours[g * N][0] for g in range(GROUPS) if continued[g]])
    assert abs(m) < 4 * se, (m, se)


# --- (c) unscored and unscorable turns ----------------------------------------------------------------------

@pytest.mark.parametrize("reward,turns,gamma,want", [
    (1.0, [None, None, None], 1.0, [1.0, 1.0, 1.0]),           # no turn rewards: the episode reward flows back
    (1.0, [None, None, None], 0.5, [0.25, 0.5, 1.0]),          # discounted per turn
    (1.0, [None, 0.5, None], 0.5, [0.5, 1.0, 1.0]),            # turn 1 unscored: its credit is turn 2's, discounted
    (0.0, [-0.2, None], 1.0, [-0.2, 0.0]),                     # a penalised turn keeps its penalty
    (2.0, [0.5], 0.9, [2.5]),                                  # one turn: its reward plus the episode's
])
def test_returns_pass_credit_through_unscored_turns(reward, turns, gamma, want):
    assert returns(reward, turns, gamma) == pytest.approx(want)


def test_unscorable_turn_or_episode_keeps_the_rollout_out():
    base_rewards = [1.0, 0.0, 0.5]
    base_turns = [[0.1, None], [None, None], [None, 0.2]]
    clean = advantages("turn", base_rewards, base_turns, list("aaa"))
    for rewards, turns in [([*base_rewards, None], [*base_turns, [0.3, None]]),            # episode unscorable
                           ([*base_rewards, 1.0], [*base_turns, [float("nan"), None]])]:  # a turn unscorable
        for method in ("turn", "step_group"):
            got = advantages(method, rewards, turns, list("aaaa"))
            assert got[3] == [0.0, 0.0]
            if method == "turn":
                assert got[:3] == clean  # the siblings' baselines did not see it


def test_step_group_defaults_to_turn_index_and_uses_states():
    rewards, turns = [1.0, 0.0, 1.0, 0.0], [[None, None]] * 4
    by_turn = advantages("turn", rewards, turns, list("aaaa"))
    episode = advantages("episode", rewards, turns, list("aaaa"))
    default = advantages("step_group", rewards, turns, list("aaaa"), step_weight=0.5)
    assert default == [[e + 0.5 * t for e, t in zip(es, ts)] for es, ts in zip(episode, by_turn)]
    # turn 2 of rollouts 0 and 1 left the same state; rollouts 2 and 3 each left a state of their own
    states = [["s0", "x"], ["s0", "x"], ["s0", "y"], ["s0", "z"]]
    got = advantages("step_group", rewards, turns, list("aaaa"), states=states, step_weight=1.0)
    assert got[2][1] == pytest.approx(episode[2][0] + 1.0)  # a step group of one: mean 0, std 1 (GRPO's rule)
    assert got[0][1] - episode[0][0] == pytest.approx(-(got[1][1] - episode[1][0]))


@pytest.mark.parametrize("call,message", [
    (lambda: advantages("td", [1.0], [[None]], ["a"]), "not one of episode, turn, step_group"),
    (lambda: advantages("turn", [1.0, 0.0], [[None]], ["a", "a"]), "one entry per rollout"),
    (lambda: advantages("episode", [1.0], [[None]], ["a"], gamma=0.5), "takes no option 'gamma'"),
    (lambda: advantages("turn", [1.0], [[None]], ["a"], gamma=1.5), "gamma must be in [0, 1]"),
    (lambda: advantages("step_group", [1.0], [[None, None]], ["a"], states=[["s"]]), "1 states for 2 turns"),
])
def test_bad_input_fails_before_computing(call, message):
    with pytest.raises(CreditError, match=None) as info:
        call()
    assert message in str(info.value)


# --- (d) the decisive turn -----------------------------------------------------------------------------------

def _tool_task(seed: int, groups: int, n: int = 8):
    """Turn 1 calls a lookup tool (a third of the calls are malformed: tool_use's per-turn -0.2); turn 2 picks
    the argument of the decisive call (right with probability 0.5); turn 3 answers with a format reward that
    is noise. The episode reward is 1 exactly when turn 2 was right."""
    rng = random.Random(seed)
    rewards, turns, ids, right = [], [], [], []
    for g in range(groups):
        for _ in range(n):
            ok = rng.random() < 0.5
            rewards.append(1.0 if ok else 0.0)
            turns.append([-0.2 if rng.random() < 1 / 3 else None, None, rng.uniform(0.0, 0.3)])
            ids.append(g)
            right.append(ok)
    return rewards, turns, ids, right


@pytest.mark.parametrize("method,options", [("turn", {}), ("turn", {"gamma": 0.9}), ("step_group", {})])
def test_decisive_turn_gets_the_right_sign(method, options):
    groups = 400
    rewards, turns, ids, right = _tool_task(seed=36, groups=groups)
    adv = advantages(method, rewards, turns, ids, **options)
    good = counted = 0
    for g in range(groups):
        rows = range(g * 8, g * 8 + 8)
        if len({right[i] for i in rows}) == 1:
            continue  # every rollout alike: no method has a signal
        counted += 1
        good += all((adv[i][1] > 0) == right[i] for i in rows)
    assert counted > 0.9 * groups
    assert good >= 0.95 * counted, (good, counted)
