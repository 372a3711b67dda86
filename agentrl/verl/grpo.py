"""GRPO that keeps unscorable rollouts out of their group.

A rollout that could not be scored (a tool server down, a reward that crashed or timed out) reaches the
trainer with a NaN score. Plain GRPO would spread that NaN over its whole group (or, with a placeholder
0, shift every sibling's advantage); ``agentrl_grpo`` computes the group statistics from the scored
rollouts only and gives the unscorable ones advantage 0, so they contribute no policy gradient.
Selected with ``algorithm.adv_estimator=agentrl_grpo`` (agentrl's configs do this).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch

from verl.trainer.ppo.core_algos import register_adv_est

from agentrl.credit import grouped

NAME = "agentrl_grpo"


def grouped_advantages(scores: torch.Tensor, scored: torch.Tensor, index: np.ndarray, epsilon: float = 1e-6,
                       norm_by_std: bool = True) -> torch.Tensor:
    """Per-rollout advantages; rows with ``scored == False`` get 0 and do not enter group statistics
    (:func:`agentrl.credit.grouped`, the one GRPO formula)."""
    return grouped(scores, scored, index, norm_by_std, epsilon)


@register_adv_est(NAME)
def compute_agentrl_grpo_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
                                   index: np.ndarray, epsilon: float = 1e-6, norm_adv_by_std_in_grpo: bool = True,
                                   config: Optional[Any] = None, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
    scores = token_level_rewards.sum(dim=-1)
    scored = torch.isfinite(scores)
    scores = torch.nan_to_num(scores, nan=0.0, posinf=0.0, neginf=0.0)
    with torch.no_grad():
        adv = grouped_advantages(scores, scored, index, epsilon, norm_adv_by_std_in_grpo)
        adv = adv.unsqueeze(-1) * response_mask
    return adv, adv
