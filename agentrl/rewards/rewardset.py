"""Several rewards with weights: ``RewardSet([{"name": "math", "weight": 1.0}, ...]).score(sample, item)``.

The score is the weighted mean over the components that apply. A component returning ``None`` does
not apply and is left out (it is not a 0). If any weighted component could not score (exception,
timeout, invalid value) the whole trajectory is unscorable: ``score`` is None and ``unscorable`` says
why, so the trainer can keep it out of the group advantage. Weight 0 components are logged only.
A component may also score each assistant turn (:mod:`agentrl.rewards.turns`): ``turns`` then holds the
set's per-turn rewards, mixed with the same weights, and ``turn_unscorable`` the turns it could not score.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from agentrl.deadline import call_with_deadline
from agentrl.rewards.errors import Unscorable
from agentrl.rewards.errors import RewardConfigError
from agentrl.rewards.loading import Reward
from agentrl.rewards.resolve import load_reward, looks_like_path
from agentrl.rewards.turns import TurnScores, combine


@dataclass
class ScoreResult:
    """One trajectory's reward: ``score`` is None exactly when ``unscorable`` gives the cause."""

    score: float | None
    components: dict[str, float | None] = field(default_factory=dict)
    unscorable: str | None = None
    applicable_weight: float = 0.0
    errors: dict[str, str] = field(default_factory=dict)  # component -> cause (weight-0 ones included)
    passed: dict[str, bool] = field(default_factory=dict)  # component -> score >= its grader's pass_threshold
    turns: list[float | None] | None = None  # per assistant turn, when a component scored turns
    turn_unscorable: dict[int, str] = field(default_factory=dict)  # turn index (from 0) -> cause

    def to_dict(self) -> dict:
        return asdict(self)


# a component's weight: a finite number >= 0 (0: logged, not scored); a bool is not a number here
WEIGHT = TypeAdapter(Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)])


@dataclass(frozen=True)
class Component:
    label: str
    weight: float
    reward: Reward


def _default_label(name: Any) -> str:
    """A component's name in metrics: a preset's name, a file's stem (``./my_reward.py`` -> my_reward)."""
    if isinstance(name, str):
        return Path(name).stem if looks_like_path(name) else name
    return getattr(name, "__name__", "reward")


class RewardSet:
    """Weighted rewards. Each entry: ``{"name": ..., "weight": 1.0, "label": ..., **options}`` or a bare name."""

    def __init__(self, config: list, *, where: str = "rewards") -> None:
        if isinstance(config, (str, dict)):
            config = [config]
        if not isinstance(config, list) or not config:
            raise RewardConfigError(f"{where}: expected a non-empty list of rewards like "
                                    f"[{{\"name\": \"math\", \"weight\": 1.0}}], got {config!r}")
        self.components: list[Component] = []
        for n, entry in enumerate(config):
            at = f"{where}[{n}]"
            entry = {"name": entry} if isinstance(entry, str) else dict(entry) if isinstance(entry, dict) else None
            if entry is not None and "type" in entry and "grader" not in entry:  # an OpenAI grader dict as the entry
                grader = {k: v for k, v in entry.items() if k not in ("weight", "label")}
                entry = {"name": grader, "weight": entry.get("weight", 1.0), "label": entry.get("label") or grader.get("name") or grader["type"]}
            elif entry is not None and "grader" in entry:  # {"grader": {...} or "grader.json", "weight": ...}
                entry["name"] = entry.pop("grader")
                entry.setdefault("label", entry["name"].get("name", "grader") if isinstance(entry["name"], dict) else Path(str(entry["name"])).stem)
            if entry is None or "name" not in entry:
                raise RewardConfigError(f"{at}: each reward needs a \"name\" (a preset, plugin or .py path), got {config[n]!r}")
            name = entry.pop("name")
            weight = entry.pop("weight", 1.0)
            try:
                weight = WEIGHT.validate_python(weight)
            except ValidationError:
                raise RewardConfigError(f"{at}: weight must be a finite number >= 0 (0 = log only), got {weight!r}") from None
            label = entry.pop("label", _default_label(name))
            if any(c.label == label for c in self.components):
                raise RewardConfigError(f"{at}: two rewards are labelled {label!r}; give one a distinct \"label\"")
            reward = load_reward(name, where=at, **entry)
            self.components.append(Component(str(label), weight, reward))

    @classmethod
    def from_config(cls, config: list, where: str = "rewards") -> "RewardSet":
        """Build and validate now: unknown names, bad options and missing env vars fail here."""
        return cls(config, where=where)

    @property
    def version(self) -> str:
        """The reward set's version (``rv-`` and a digest of code, settings and weights; agentrl.rewards.versions)."""
        if getattr(self, "_version", None) is None:
            from agentrl.rewards.versions import describe

            self._version = describe(self)["version"]
        return self._version

    def describe(self) -> list[dict]:
        """Provenance for logs and rollouts.jsonl: which reward version scored what."""
        return [{"label": c.label, "weight": c.weight, "origin": c.reward.origin, "version": c.reward.version,
                 "sandboxed": c.reward.sandboxed, "runs_model_code": c.reward.runs_model_code} for c in self.components]

    @staticmethod
    def _combine(parts: list[tuple[Component, float | TurnScores | None, str | None]]) -> ScoreResult:
        result = ScoreResult(score=None)
        causes = []
        total = 0.0
        per_turn = [(c.weight, v) for c, v, cause in parts if isinstance(v, TurnScores) and cause is None]
        parts = [(c, v.episode if isinstance(v, TurnScores) else v, cause) for c, v, cause in parts]
        for comp, value, cause in parts:
            result.components[comp.label] = value
            threshold = getattr(comp.reward, "pass_threshold", None)
            if threshold is not None and value is not None:
                result.passed[comp.label] = value >= threshold
            if cause is not None:
                result.errors[comp.label] = cause
                if comp.weight > 0:
                    causes.append(cause)
            elif value is not None and comp.weight > 0:
                total += comp.weight * value
                result.applicable_weight += comp.weight
        if causes:
            result.unscorable = "; ".join(causes)
            result.applicable_weight = 0.0
        elif result.applicable_weight == 0:
            result.unscorable = ("no weighted reward scored the episode (they scored turns only); give one reward an "
                                 "'episode' score" if per_turn else "no weighted reward applies to this item (all returned None)")
        else:
            result.score = total / result.applicable_weight
            result.turns, result.turn_unscorable = combine(per_turn, result.applicable_weight)
        return result

    async def ascore(self, sample: Any, item: Any) -> ScoreResult:
        async def one(comp: Component):
            try:
                return comp, await comp.reward.acall(sample, item), None
            except Unscorable as exc:
                return comp, None, exc.cause

        return self._combine(list(await asyncio.gather(*(one(c) for c in self.components))))

    def score(self, sample: Any, item: Any) -> ScoreResult:
        """Synchronous ``ascore``; safe to call from inside a running event loop (it uses a thread then)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.ascore(sample, item))
        # every component has its own deadline; this one only stops a wait on a set that hangs past all of them
        deadline = sum(c.reward.timeout for c in self.components) + 30.0
        return call_with_deadline(lambda: asyncio.run(self.ascore(sample, item)), deadline, "rewardset")
