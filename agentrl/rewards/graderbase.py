"""What every OpenAI grader type shares: its name, its ``range`` and ``pass_threshold`` normalised to [0, 1], its
templates. The types themselves are in :mod:`agentrl.rewards.graders` and :mod:`agentrl.rewards.modelgraders`.

    class Exact(Grader):
        type = "exact"
        def raw(self, sample, item): return float(sample["output_text"] == item["reference"])
"""

from __future__ import annotations

from typing import Any

from agentrl.rewards.errors import RewardConfigError, Unscorable
from agentrl.rewards.gradertemplate import Template, openai_sample


class Grader:
    """One grader: ``score(sample, item) -> [0, 1]`` from a raw value in ``range``; what review and multi use."""

    type = ""
    is_model = False

    def __init__(self, spec: dict, where: str) -> None:
        self.spec, self.where = spec, where
        self.name = str(spec.get("name") or spec.get("type"))
        self.templates: list[Template] = []
        lo, hi = spec.get("range", [0, 1])
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lo, hi)) or not hi > lo:
            raise RewardConfigError(f"{where}: range must be [low, high] numbers with high > low, got {spec.get('range')!r}")
        self.lo, self.hi = float(lo), float(hi)
        threshold = spec.get("pass_threshold")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
            raise RewardConfigError(f"{where}: pass_threshold must be a number, got {threshold!r}")
        self.pass_threshold = None if threshold is None else self.normalise(float(threshold), check=False)
        self.env: dict[str, str] = {}
        self.temperature = 0.0

    def template(self, key: str, default: Any = None) -> Template:
        value = self.spec.get(key, default)
        if value is None:
            raise RewardConfigError(f"{self.where}: a {self.type} grader needs \"{key}\" (a template such as "
                                    f"\"{{{{sample.output_text}}}}\" or \"{{{{item.reference_answer}}}}\")")
        t = Template(value, f"{self.where}.{key}")
        self.templates.append(t)
        return t

    @property
    def item_fields(self) -> set[str]:
        return set().union(*(t.item_fields for t in self.templates)) if self.templates else set()

    def normalise(self, value: float, check: bool = True) -> float:
        if check and not (self.lo - 1e-9 <= value <= self.hi + 1e-9):
            raise Unscorable(f"{self.name}: score {value:g} is outside the grader's range [{self.lo:g}, {self.hi:g}]")
        return (value - self.lo) / (self.hi - self.lo)

    def raw(self, sample: dict, item: Any) -> float:
        raise NotImplementedError

    def score(self, sample: Any, item: Any) -> float:
        return self.normalise(float(self.raw(openai_sample(sample), item)))
