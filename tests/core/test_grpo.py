"""agentrl_grpo: unscorable rollouts (NaN score) get advantage 0 and stay out of their group's statistics."""

from __future__ import annotations

import numpy as np
import torch

from agentrl.verl.grpo import compute_agentrl_grpo_advantage


def test_unscorable_rollout_does_not_shift_its_siblings():
    scores = torch.tensor([1.0, 0.0, 1.0, 0.0])
    rewards = torch.zeros(4, 3)
    rewards[:, -1] = scores
    mask = torch.ones(4, 3)
    index = np.array(["a", "a", "a", "a"], dtype=object)
    full, _ = compute_agentrl_grpo_advantage(rewards, mask, index)

    unscorable = rewards.clone()
    unscorable[3, -1] = float("nan")  # the fourth rollout could not be scored
    adv, _ = compute_agentrl_grpo_advantage(unscorable, mask, index)
    assert torch.isfinite(adv).all()
    assert torch.all(adv[3] == 0)
    # statistics over the three scored rollouts only: mean 2/3
    expected = (scores[:3] - scores[:3].mean()) / (scores[:3].std() + 1e-6)
    assert torch.allclose(adv[:3, 0], expected, atol=1e-5)
    assert not torch.allclose(adv[:3, 0], full[:3, 0])  # plain GRPO would have differed


def test_groups_are_independent_and_single_members_get_zero_mean():
    rewards = torch.tensor([[1.0], [0.0], [5.0]])
    mask = torch.ones(3, 1)
    adv, _ = compute_agentrl_grpo_advantage(rewards, mask, np.array(["a", "a", "b"], dtype=object))
    assert adv[0, 0] > 0 > adv[1, 0]
    assert abs(float(adv[2, 0]) - 5.0) < 1e-4  # a group of one: mean 0, std 1, as verl's GRPO does
