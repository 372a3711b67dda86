"""Per-turn scores: a reward may score each assistant turn as well as the episode.

    def grade(sample, item):
        turns = [-0.2 if failed_call(step) else None for step in sample["trajectories"]]
        return {"episode": final_answer_score(sample, item), "turns": turns}

``grade`` returns a float (the episode, as always), None (does not apply), or a dict with
``"episode"`` (a float, or None: the reward scores turns only) and ``"turns"``: exactly one entry per
assistant turn (``sample.trajectories``), each a float, None (no score for this turn: it adds no
reward, and its credit comes from the turns after it) or ``{"unscorable": "why"}`` (this turn could not
be scored: with per-turn credit the whole rollout then gets advantage 0 and stays out of its group, see
:mod:`agentrl.credit`). Anything else makes the trajectory unscorable with a message that says so.

The reward set mixes turn scores with the same weights as episode scores: turn k's reward is
``sum_c w_c t_ck / sum_c w_c`` over the components that scored the episode, so a component of weight
0.5 out of 1.5 moves a turn by a third of its value, as it moves the episode. Per-turn results come from
rewards that run in this process (presets, plugins); a ``grade`` file run in the sandbox returns a float.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from agentrl.rewards.errors import Unscorable

MAX_ABS = 1e6


@dataclass(frozen=True)
class TurnUnscorable:
    """A turn a reward could not score, and why."""

    cause: str


TurnValue = Union[float, None, TurnUnscorable]


@dataclass(frozen=True)
class TurnScores:
    """One reward's result for a trajectory: its episode score and one entry per assistant turn."""

    episode: Optional[float]
    turns: tuple[TurnValue, ...] = field(default_factory=tuple)


def _number(name: str, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unscorable(f"{name}: {where} is {type(value).__name__} {str(value)[:40]!r}; it must be a float or None")
    value = float(value)
    if not math.isfinite(value) or abs(value) > MAX_ABS:
        raise Unscorable(f"{name}: {where} is {value!r}; it must be finite and within [-{MAX_ABS:g}, {MAX_ABS:g}]")
    return value


def parse(name: str, value: dict) -> TurnScores:
    """A ``grade`` dict as :class:`TurnScores`; a shape it does not know raises :class:`Unscorable` naming it."""
    unknown = sorted(set(value) - {"episode", "turns"})
    if unknown or "turns" not in value:
        raise Unscorable(f"{name}: returned a dict with keys {sorted(value)}; a per-turn result is "
                         "{'episode': float or None, 'turns': [float, None or {'unscorable': why}, one per turn]}")
    turns = value["turns"]
    if not isinstance(turns, (list, tuple)):
        raise Unscorable(f"{name}: 'turns' is {type(turns).__name__}; it must be a list with one entry per assistant turn")
    out: list[TurnValue] = []
    for k, t in enumerate(turns):
        if isinstance(t, dict):
            if set(t) != {"unscorable"}:
                raise Unscorable(f"{name}: turns[{k}] is a dict with keys {sorted(t)}; the only dict is {{'unscorable': why}}")
            out.append(TurnUnscorable(f"{name}: turn {k + 1}: {t['unscorable']}"))
        else:
            out.append(None if t is None else _number(name, f"turns[{k}]", t))
    episode = value.get("episode")
    return TurnScores(None if episode is None else _number(name, "'episode'", episode), tuple(out))


def check_length(name: str, scores: TurnScores, sample: Any) -> None:
    """One turn score per assistant turn of ``sample``, or :class:`Unscorable` saying how many of each."""
    steps = sample.get("trajectories") if isinstance(sample, dict) else getattr(sample, "trajectories", None)
    n = len(steps or [])
    if len(scores.turns) != n:
        raise Unscorable(f"{name}: returned {len(scores.turns)} turn scores for {n} assistant turns; "
                         "give one per entry of sample.trajectories (None where a turn has no score)")


def combine(parts: list[tuple[float, Optional[TurnScores]]], applicable_weight: float
            ) -> tuple[Optional[list[Optional[float]]], dict[int, str]]:
    """The reward set's turn rewards from ``(weight, turn scores or None)`` per weighted component, and the
    turns that could not be scored (turn index from 0 -> cause). None when no component scored turns."""
    scored = [(w, s) for w, s in parts if s is not None and w > 0]
    if not scored or applicable_weight <= 0:
        return None, {}
    n = len(scored[0][1].turns)
    totals: list[Optional[float]] = [None] * n
    unscorable: dict[int, str] = {}
    for weight, scores in scored:
        for k, t in enumerate(scores.turns[:n]):
            if isinstance(t, TurnUnscorable):
                unscorable.setdefault(k, t.cause)
            elif t is not None:
                totals[k] = (totals[k] or 0.0) + weight * t / applicable_weight
    return totals, unscorable
