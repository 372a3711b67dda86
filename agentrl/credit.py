"""Turn-level credit: one advantage per assistant turn, from episode and per-turn rewards, verl-free.

    from agentrl.credit import advantages
    advantages("turn", rewards=[1.0, 1.0], turn_rewards=[[0.5, None], [None, None]], groups=["p1", "p1"])
    # [[0.7071..., 0.0], [-0.7071..., 0.0]]: one list per rollout, one value per assistant turn; both
    # rollouts succeeded, so only the turn that earned rollout 1's 0.5 is told apart

Arguments, one entry per rollout: ``rewards[i]`` its episode reward (None: could not be scored);
``turn_rewards[i]`` one value per assistant turn (a float, None where the turn has no reward, NaN where
a reward could not score that turn); ``groups[i]`` its GRPO group (verl's uid). The trainer
(``agentrl.verl.grpo``), ``agentrl inspect``, the job page and the tests all call this function.

Methods (``agentrl.credit`` in the config; options in brackets):

``episode`` (default) is GRPO: every turn gets the rollout's group-normalised episode reward,
``(R_i - mean_g R) / (std_g R + epsilon)`` (``norm_by_std=False``: not divided), computed with the same
float32 operations as verl's ``compute_grpo_outcome_advantage``, so it is bit-identical to it; a group of
one gets mean 0 and std 1, as there. Turn rewards are ignored.

``turn`` [gamma=1.0, norm_by_std, epsilon]: discounted per-turn returns with a per-turn-index baseline.
With ``u_ik = r_ik + [k = T_i] R_i`` (a turn's own reward, None counted 0, and the episode reward arriving
with the last turn ``T_i``), the return of turn k is ``G_ik = sum_{j>=k} gamma^(j-k) u_ij`` and
``A_ik = (G_ik - b_gk) / s_gk`` with ``b_gk``, ``s_gk`` the mean and standard deviation of ``G_jk`` over
the group's scored rollouts that took a k-th turn. Why it is unbiased (verl RFC #7244): the policy
gradient is ``E[sum_k grad log pi(a_k | s_k) (G_k - b_k)]`` and a baseline leaves it unbiased when it
does not depend on the action ``a_k`` or anything after it. The naive per-turn normalisation sums
per-index baselines ``sum_{j=k}^{T_i} mean_j`` whose number of terms is the rollout's own stopping turn
``T_i``, decided by ``a_k`` and later actions: a "take another turn" is charged the group mean of the
turn rewards it collects, a hidden ``-E[R_intermediate]``. Here the baseline is one number per turn
index; the set of rollouts it averages over is decided by the other rollouts (whether they reached turn
k) and by this rollout's past (it reached turn k), never by its choices from turn k on. Counting the
rollout itself in the mean scales the leave-one-out advantage by ``(m-1)/m`` (m the rollouts at turn
k), a factor that does not depend on its actions either. ``s_gk`` is GRPO's scale (it includes the
rollout, as GRPO's std does; ``norm_by_std=False`` removes it). With gamma 1, no turn rewards and equal
turn counts, turn 1 of ``turn`` equals ``episode``.

``step_group`` [gamma=1.0, step_weight=1.0, states, norm_by_std, epsilon]: GiGPO-style. ``A_ik = E_i +
step_weight * S_ik``: ``E_i`` is GRPO over the rollouts' total returns ``sum_k u_ik``; ``S_ik``
normalises ``G_ik`` within the step group of turns that left the same state, ``states[i][k]`` (any
hashable, e.g. the tool results so far; default: the turn index, which makes ``S`` the ``turn``
advantage). A step group is fixed by the past, so its baseline is unbiased for the same reason.

Unscored turns (None) add no reward: their credit comes from the turns after them and the episode
reward, discounted (``G_ik = gamma G_i,k+1``). A rollout that could not be scored (episode reward None,
or any turn NaN) gets advantage 0 on every turn and stays out of every baseline; with ``episode`` only
the episode reward counts. Inputs that do not line up fail before anything is computed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Hashable, Optional, Sequence

import torch

METHODS = ("episode", "turn", "step_group")
DEFAULT_EPSILON = 1e-6


class CreditError(ValueError):
    """The inputs of :func:`advantages` do not line up, or the method or an option is unknown."""


def normalise(values: torch.Tensor, norm_by_std: bool = True, epsilon: float = DEFAULT_EPSILON) -> torch.Tensor:
    """GRPO's statistic over one group's float32 values, with verl's operations: a group of one gets mean 0, std 1."""
    if values.shape[0] == 1:
        mean, std = torch.tensor(0.0), torch.tensor(1.0)
    else:
        mean, std = values.mean(), values.std()
    centred = values - mean
    return centred / (std + epsilon) if norm_by_std else centred


def grouped(scores: torch.Tensor, scored: torch.Tensor, index: Sequence[Any], norm_by_std: bool = True,
            epsilon: float = DEFAULT_EPSILON) -> torch.Tensor:
    """Per-rollout GRPO advantages; rows with ``scored == False`` get 0 and stay out of their group's statistics."""
    groups: dict[Any, list[int]] = defaultdict(list)
    for i in range(scores.shape[0]):
        if bool(scored[i]):
            groups[index[i]].append(i)
    adv = torch.zeros_like(scores)
    for rows in groups.values():
        adv[rows] = normalise(scores[rows], norm_by_std, epsilon)
    return adv


def group_advantages(rewards: Sequence[Optional[float]], norm_by_std: bool = True,
                     epsilon: float = DEFAULT_EPSILON) -> list[float]:
    """The GRPO advantage of each rollout of one group, as the trainer computes it (None: unscorable, gets 0 and
    stays out of the statistics). What the job page and `agentrl rescore` show."""
    scored = torch.tensor([r is not None and math.isfinite(r) for r in rewards], dtype=torch.bool)
    scores = torch.tensor([float(r) if ok else 0.0 for r, ok in zip(rewards, scored.tolist())], dtype=torch.float32)
    return grouped(scores, scored, [0] * len(rewards), norm_by_std, epsilon).tolist()


def _check(method: str, rewards: Sequence, turn_rewards: Sequence, groups: Sequence, states: Optional[Sequence],
           options: dict) -> None:
    if method not in METHODS:
        raise CreditError(f"credit method {method!r} is not one of {', '.join(METHODS)}; set agentrl.credit to one")
    allowed = {"episode": {"norm_by_std", "epsilon"}, "turn": {"gamma", "norm_by_std", "epsilon"},
               "step_group": {"gamma", "step_weight", "norm_by_std", "epsilon"}}[method]
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise CreditError(f"credit method {method!r} takes no option {unknown[0]!r}; it takes {', '.join(sorted(allowed))}")
    if not len(rewards) == len(turn_rewards) == len(groups):
        raise CreditError(f"rewards, turn_rewards and groups must have one entry per rollout: got {len(rewards)}, "
                          f"{len(turn_rewards)} and {len(groups)}")
    gamma = options.get("gamma", 1.0)
    if not 0.0 <= gamma <= 1.0:
        raise CreditError(f"credit gamma must be in [0, 1], got {gamma!r}")
    if states is not None:
        if len(states) != len(turn_rewards):
            raise CreditError(f"states must have one list per rollout: got {len(states)} for {len(turn_rewards)} rollouts")
        for i, (s, t) in enumerate(zip(states, turn_rewards)):
            if len(s) != len(t):
                raise CreditError(f"rollout {i}: {len(s)} states for {len(t)} turns; give one state per assistant turn")


def _scored(reward: Optional[float], turns: Sequence[Optional[float]]) -> bool:
    return (reward is not None and math.isfinite(reward) and len(turns) > 0
            and all(t is None or math.isfinite(t) for t in turns))


def returns(reward: float, turns: Sequence[Optional[float]], gamma: float = 1.0) -> list[float]:
    """``G_k`` for each turn: its own reward (None: 0), the episode reward with the last turn, discounted.

    >>> returns(1.0, [None, 0.5, None], gamma=0.5)
    [0.5, 1.0, 1.0]
    """
    out = [0.0] * len(turns)
    after = 0.0
    for k in range(len(turns) - 1, -1, -1):
        u = (turns[k] or 0.0) + (reward if k == len(turns) - 1 else 0.0)
        after = u + gamma * after
        out[k] = after
    return out


def _by_key(values: dict[tuple[int, int], float], keys: dict[tuple[int, int], Hashable], norm_by_std: bool,
            epsilon: float) -> dict[tuple[int, int], float]:
    """Normalise ``values[(rollout, turn)]`` within the sets of equal ``keys``."""
    sets: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    for at, key in keys.items():
        sets[key].append(at)
    out = {}
    for members in sets.values():
        adv = normalise(torch.tensor([values[at] for at in members], dtype=torch.float32), norm_by_std, epsilon)
        out.update(zip(members, adv.tolist()))
    return out


def advantages(method: str, rewards: Sequence[Optional[float]], turn_rewards: Sequence[Sequence[Optional[float]]],
               groups: Sequence[Hashable], *, states: Optional[Sequence[Sequence[Hashable]]] = None,
               **options: Any) -> list[list[float]]:
    """One advantage per assistant turn of each rollout (see the module's docstring for the methods)."""
    _check(method, rewards, turn_rewards, groups, states, options)
    norm, eps = bool(options.get("norm_by_std", True)), float(options.get("epsilon", DEFAULT_EPSILON))
    gamma = float(options.get("gamma", 1.0))
    out = [[0.0] * len(t) for t in turn_rewards]
    if method == "episode":
        scored = torch.tensor([r is not None and math.isfinite(r) for r in rewards])
        scores = torch.tensor([r if s else 0.0 for r, s in zip(rewards, scored.tolist())], dtype=torch.float32)
        adv = grouped(scores, scored, list(groups), norm, eps).tolist()
        return [[adv[i]] * len(t) for i, t in enumerate(turn_rewards)]
    ok = [i for i in range(len(rewards)) if _scored(rewards[i], turn_rewards[i])]
    g = {i: returns(float(rewards[i]), turn_rewards[i], gamma) for i in ok}
    values = {(i, k): g[i][k] for i in ok for k in range(len(g[i]))}
    keys: dict[tuple[int, int], Hashable] = {
        (i, k): (groups[i], k if states is None or method == "turn" else ("state", states[i][k])) for (i, k) in values}
    step = _by_key(values, keys, norm, eps)
    if method == "turn":
        for (i, k), a in step.items():
            out[i][k] = a
        return out
    weight = float(options.get("step_weight", 1.0))
    totals = torch.tensor([sum((t or 0.0) for t in turn_rewards[i]) + float(rewards[i]) for i in ok], dtype=torch.float32)
    episode = dict(zip(ok, grouped(totals, torch.ones(len(ok), dtype=torch.bool), [groups[i] for i in ok], norm,
                                   eps).tolist()))
    for (i, k), a in step.items():
        out[i][k] = episode[i] + weight * a
    return out


def fill(records: Sequence[Any], method: str = "episode", **options: Any) -> None:
    """Set ``turn_advantages`` on rollout records (:class:`agentrl.record.RolloutRecord` or their dicts) whose
    groups are all here: a group is (step, ``group``), else (step, ``prompt_id``); a turn a reward could not
    score (``turn_unscorable``) counts as NaN. Validation rollouts are not trained on and get None."""

    def get(r: Any, key: str, default: Any = None) -> Any:
        return r.get(key, default) if isinstance(r, dict) else getattr(r, key, default)

    def put(r: Any, value: Any) -> None:
        if isinstance(r, dict):
            r["turn_advantages"] = value
        else:
            r.turn_advantages = value

    trained = [r for r in records if not get(r, "validation", False)]
    for r in records:
        if get(r, "validation", False):
            put(r, None)
    if not trained:
        return
    turns = []
    for r in trained:
        bad = {int(k) for k in (get(r, "turn_unscorable") or {})}
        values = list(get(r, "turn_rewards") or [None] * len(get(r, "trajectories") or []))
        turns.append([math.nan if k in bad else v for k, v in enumerate(values)])
    groups = [(get(r, "step"), get(r, "group") or get(r, "prompt_id")) for r in trained]
    for r, adv in zip(trained, advantages(method, [get(r, "reward") for r in trained], turns, groups, **options)):
        put(r, adv)
