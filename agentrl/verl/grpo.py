"""GRPO that keeps unscorable rollouts out of their group, and gives each assistant turn its own credit.

A rollout that could not be scored (a tool server down, a reward that crashed or timed out) reaches the
trainer with a NaN score. Plain GRPO would spread that NaN over its whole group (or, with a placeholder
0, shift every sibling's advantage); ``agentrl_grpo`` computes the group statistics from the scored
rollouts only and gives the unscorable ones advantage 0, so they contribute no policy gradient.
Selected with ``algorithm.adv_estimator=agentrl_grpo`` (agentrl's configs do this).

With ``agentrl.credit: turn`` or ``step_group`` (carried in the run spec, whose path ``agentrl train``
also puts at ``algorithm.agentrl_spec``), the agent loop writes each turn's reward at that turn's last
generated token and the episode reward at the response's last token (``rm_scores``); here the assistant
turns are the runs of ``response_mask`` 1, turn k's rewards are those from its first token up to the next
turn's, and :func:`agentrl.credit.advantages` gives every token of turn k turn k's advantage. A NaN
anywhere (an unscorable episode or turn) gives the whole rollout advantage 0, as above.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Optional

import numpy as np
import torch

from verl.trainer.ppo.core_algos import register_adv_est

from agentrl.credit import advantages, grouped

NAME = "agentrl_grpo"
SPEC_KEY = "agentrl_spec"  # algorithm.agentrl_spec: the run spec's path, when the credit is per turn


def grouped_advantages(scores: torch.Tensor, scored: torch.Tensor, index: np.ndarray, epsilon: float = 1e-6,
                       norm_by_std: bool = True) -> torch.Tensor:
    """Per-rollout advantages; rows with ``scored == False`` get 0 and do not enter group statistics
    (:func:`agentrl.credit.grouped`, the one GRPO formula)."""
    return grouped(scores, scored, index, norm_by_std, epsilon)


def turn_spans(mask: torch.Tensor) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of 1s in one row of ``response_mask``: the assistant turns, in order.

    >>> turn_spans(torch.tensor([0, 1, 1, 0, 0, 1, 0]))
    [(1, 3), (5, 6)]
    """
    m = mask.to(torch.int8).tolist()
    spans, start = [], None
    for i, v in enumerate(m + [0]):
        if v and start is None:
            start = i
        elif not v and start is not None:
            spans.append((start, i))
            start = None
    return spans


def turn_rewards(rewards: torch.Tensor, spans: list[tuple[int, int]]) -> Optional[list[float]]:
    """Each turn's reward: the token rewards from its first token to the next turn's (the last turn: to the
    end, where the episode reward sits). None when the row has no turn or any NaN (could not score)."""
    if not spans:
        return None
    out = []
    for k, (start, _) in enumerate(spans):
        end = spans[k + 1][0] if k + 1 < len(spans) else rewards.shape[0]
        out.append(float(rewards[start:end].sum()))
    if not torch.isfinite(rewards).all() or not all(math.isfinite(v) for v in out):
        return None
    return out


@lru_cache(maxsize=4)
def _spec(spec_path: str) -> Any:
    from agentrl.spec import RunSpec

    return RunSpec.read(spec_path)


def spec_of(config: Any) -> Any:
    """The run's :class:`agentrl.spec.RunSpec`, from ``algorithm.agentrl_spec``; None: GRPO as configured."""
    path = config.get(SPEC_KEY) if config is not None and hasattr(config, "get") else None
    return _spec(str(path)) if path else None


def log_advantages(run_dir: str, index: np.ndarray, per_turn: list, adv: list[list[float]]) -> None:
    """A line per rollout in the run's logs/advantages.jsonl: its group, turn rewards as the trainer read
    them (None: could not score) and the advantage each turn's tokens got."""
    import json

    from agentrl.rundir import RunDir

    path = RunDir(run_dir).advantages
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"group": str(g), "turn_rewards": t, "turn_advantages": a}) + "\n"
                    for g, t, a in zip(index, per_turn, adv))
    with path.open("a", encoding="utf-8") as fh:
        fh.write(lines)


def turn_token_advantages(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray,
                          method: str, epsilon: float = 1e-6, norm_by_std: bool = True, run_dir: Optional[str] = None,
                          **options: Any) -> torch.Tensor:
    """Token advantages that follow their turn: turn k's tokens get turn k's advantage from agentrl.credit
    (logged to ``run_dir``'s logs/advantages.jsonl when given)."""
    spans = [turn_spans(response_mask[i]) for i in range(response_mask.shape[0])]
    per_turn = [turn_rewards(token_level_rewards[i], spans[i]) for i in range(len(spans))]
    adv = advantages(method, [0.0 if t is not None else None for t in per_turn],
                     [t if t is not None else [None] * len(s) for t, s in zip(per_turn, spans)], list(index),
                     norm_by_std=norm_by_std, epsilon=epsilon, **options)
    if run_dir:
        log_advantages(run_dir, index, per_turn, adv)
    out = torch.zeros_like(token_level_rewards)
    for i, (row_spans, row_adv) in enumerate(zip(spans, adv)):
        for (start, end), a in zip(row_spans, row_adv):
            out[i, start:end] = a
    return out * response_mask


@register_adv_est(NAME)
def compute_agentrl_grpo_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor,
                                   index: np.ndarray, epsilon: float = 1e-6, norm_adv_by_std_in_grpo: bool = True,
                                   config: Optional[Any] = None, **_: Any) -> tuple[torch.Tensor, torch.Tensor]:
    spec = spec_of(config)
    with torch.no_grad():
        if spec is not None and spec.credit.method != "episode":
            adv = turn_token_advantages(token_level_rewards, response_mask, index, spec.credit.method, epsilon,
                                        norm_adv_by_std_in_grpo, run_dir=spec.run_dir, **spec.credit.options())
            return adv, adv
        scores = token_level_rewards.sum(dim=-1)
        scored = torch.isfinite(scores)
        scores = torch.nan_to_num(scores, nan=0.0, posinf=0.0, neginf=0.0)
        adv = grouped_advantages(scores, scored, index, epsilon, norm_adv_by_std_in_grpo)
        adv = adv.unsqueeze(-1) * response_mask
    return adv, adv
