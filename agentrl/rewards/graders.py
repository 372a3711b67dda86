"""OpenAI grader dicts as agentrl rewards: ``load_reward({"type": "string_check", ...})`` or ``load_reward("grader.json")``.

    reward = load_grader({"type": "score_model", "name": "judge", "model": "openai/judge",
                          "api_base": "http://127.0.0.1:8000/v1", "range": [0, 1], "pass_threshold": 0.5,
                          "input": [{"role": "user", "content": "Ref: {{item.reference_answer}} Ans: {{sample.output_text}}"}]})
    reward(sample, item)           # a score in [0, 1]; reward.pass_threshold == 0.5

Types: ``string_check`` (eq, ne, like, ilike), ``text_similarity`` (fuzzy_match via rapidfuzz, bleu via sacrebleu,
gleu via nltk, rouge_1..5 and rouge_l via rouge-score), ``score_model``, ``label_model``, ``endpoint``
(:mod:`agentrl.rewards.modelgraders`), ``python`` (``source`` with ``grade(sample, item)``, run in the sandbox)
and ``multi`` (``graders`` plus a ``calculate_output`` formula, evaluated by simpleeval, never eval()).
Every score is normalised from the grader's ``range`` to [0, 1]; ``pass_threshold`` is normalised with it.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Callable

from agentrl.rewards.errors import RewardConfigError, Unscorable
from agentrl.rewards.graderbase import Grader
from agentrl.rewards.loading import Reward, SandboxedGrade, check_settings, check_source, resolve_env

SIMILARITY = ("fuzzy_match", "bleu", "gleu", "rouge_1", "rouge_2", "rouge_3", "rouge_4", "rouge_5", "rouge_l")
UNSUPPORTED = {"meteor": "it needs NLTK's WordNet data, which agentrl cannot download",
               "cosine": "it needs an embedding model; use a score_model grader instead"}


class StringCheck(Grader):
    type = "string_check"
    OPS: dict[str, Callable[[str, str], bool]] = {
        "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
        "like": lambda a, b: b in a, "ilike": lambda a, b: b.lower() in a.lower(),
    }

    def __init__(self, spec: dict, where: str) -> None:
        super().__init__(spec, where)
        self.input, self.reference = self.template("input"), self.template("reference")
        self.op = spec.get("operation")
        if self.op not in self.OPS:
            raise RewardConfigError(f"{where}: operation must be one of {', '.join(self.OPS)}, got {self.op!r}")

    def raw(self, sample: dict, item: Any) -> float:
        return float(self.OPS[self.op](self.input.render(sample, item), self.reference.render(sample, item)))


class TextSimilarity(Grader):
    type = "text_similarity"

    def __init__(self, spec: dict, where: str) -> None:
        super().__init__(spec, where)
        self.input, self.reference = self.template("input"), self.template("reference")
        self.metric = spec.get("evaluation_metric")
        if self.metric in UNSUPPORTED:
            raise RewardConfigError(f"{where}: evaluation_metric {self.metric!r} is not supported: {UNSUPPORTED[self.metric]}")
        if self.metric not in SIMILARITY:
            raise RewardConfigError(f"{where}: evaluation_metric must be one of {', '.join(SIMILARITY)}, got {self.metric!r}")
        if self.metric.startswith("rouge"):
            from rouge_score import rouge_scorer

            self._key = "rougeL" if self.metric == "rouge_l" else self.metric.replace("_", "")
            self._rouge = rouge_scorer.RougeScorer([self._key], use_stemmer=True)

    def raw(self, sample: dict, item: Any) -> float:
        hyp, ref = self.input.render(sample, item), self.reference.render(sample, item)
        if self.metric == "fuzzy_match":
            from rapidfuzz import fuzz

            return fuzz.ratio(hyp, ref) / 100.0
        if self.metric == "bleu":
            from sacrebleu.metrics import BLEU

            return BLEU(effective_order=True).sentence_score(hyp, [ref]).score / 100.0
        if self.metric == "gleu":
            from nltk.translate.gleu_score import sentence_gleu

            return float(sentence_gleu([ref.split()], hyp.split())) if hyp.split() and ref.split() else 0.0
        return float(self._rouge.score(ref, hyp)[self._key].fmeasure)


class PythonGrader(Grader):
    """``source`` defines ``grade(sample, item)``; it runs in agentrl's sandbox (compiled under its policy now)."""

    type = "python"

    def __init__(self, spec: dict, where: str) -> None:
        super().__init__(spec, where)
        source = spec.get("source")
        if not isinstance(source, str) or "def grade" not in source:
            raise RewardConfigError(f"{where}: a python grader needs \"source\" defining grade(sample, item)")
        filename = f"<grader {self.name}>"
        check_settings(where, timeout=spec.get("timeout"), memory_mb=spec.get("memory_mb"), network=spec.get("network"))
        check_source(source, filename, bool(spec.get("network", False)), where)
        self.env = resolve_env(self.name, list(spec.get("env", [])))
        self._grade = SandboxedGrade(source, filename, self.env, (), bool(spec.get("network", False)),
                                     float(spec.get("timeout", 10.0)), int(spec.get("memory_mb", 512)))

    def raw(self, sample: dict, item: Any) -> float:
        value = self._grade(sample, item)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Unscorable(f"{self.name}: grade() returned {value!r}; a python grader returns a number")
        return float(value)


class Multi(Grader):
    """Sub-graders by name, combined by ``calculate_output`` (e.g. ``"0.7 * judge + 0.3 * fuzzy"``)."""

    type = "multi"
    FUNCTIONS = {"min": min, "max": max, "abs": abs, "sqrt": math.sqrt, "log": math.log, "exp": math.exp,
                 "floor": math.floor, "ceil": math.ceil, "round": round}

    def __init__(self, spec: dict, where: str) -> None:
        super().__init__(spec, where)
        graders = spec.get("graders")
        if not isinstance(graders, dict) or not graders:
            raise RewardConfigError(f"{where}: a multi grader needs \"graders\": {{name: grader, ...}}")
        self.parts = {k: build(v, f"{where}.graders.{k}") for k, v in graders.items()}
        self.formula = spec.get("calculate_output")
        if not isinstance(self.formula, str):
            raise RewardConfigError(f"{where}: calculate_output must be a formula over {sorted(self.parts)}")
        from simpleeval import SimpleEval

        self._eval = SimpleEval(functions=self.FUNCTIONS)
        try:  # every name must be a sub-grader: try it with every part at 1.0
            self._evaluate({k: 1.0 for k in self.parts})
        except Unscorable as exc:
            raise RewardConfigError(f"{where}.calculate_output: {exc.cause}") from None
        self.is_model = any(p.is_model for p in self.parts.values())
        self.temperature = max(p.temperature for p in self.parts.values())

    @property
    def item_fields(self) -> set[str]:
        return set().union(*(p.item_fields for p in self.parts.values()))

    def _evaluate(self, names: dict[str, float]) -> float:
        from simpleeval import InvalidExpression

        self._eval.names = names
        try:
            value = self._eval.eval(self.formula)
        except InvalidExpression as exc:
            raise Unscorable(f"{self.formula!r}: {exc} (names: {', '.join(sorted(names))})") from None
        except (ArithmeticError, ValueError, TypeError) as exc:
            raise Unscorable(f"{self.name}: {self.formula!r} failed: {type(exc).__name__}: {exc}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Unscorable(f"{self.name}: {self.formula!r} gave {value!r}, not a number")
        return float(value)

    def raw(self, sample: dict, item: Any) -> float:
        return self._evaluate({k: p.score(sample, item) for k, p in self.parts.items()})


def _types() -> dict[str, type]:
    from agentrl.rewards.modelgraders import Endpoint, LabelModel, ScoreModel

    return {c.type: c for c in (StringCheck, TextSimilarity, PythonGrader, Multi, ScoreModel, LabelModel, Endpoint)}


def build(spec: Any, where: str) -> Grader:
    if not isinstance(spec, dict):
        raise RewardConfigError(f"{where}: a grader is an object with a \"type\", got {type(spec).__name__}")
    types = _types()
    kind = spec.get("type")
    if kind not in types:
        raise RewardConfigError(f"{where}: unknown grader type {kind!r}; use one of {', '.join(types)}")
    return types[kind](spec, where)


def is_grader(spec: Any) -> bool:
    """Is this a grader dict (or a grader JSON file) rather than an agentrl reward name?"""
    if isinstance(spec, dict):
        return "type" in spec
    return isinstance(spec, (str, Path)) and str(spec).endswith(".json")


def load_grader(spec: Any, *, where: str = "", **options: Any) -> Reward:
    """A Reward from a grader dict or a JSON file holding one; ``pass_threshold`` and the grader ride along."""
    origin = "grader dict"
    if not isinstance(spec, dict):
        path = Path(spec).expanduser()
        try:
            spec = json.loads(path.read_text())
        except OSError as exc:
            raise RewardConfigError(f"grader file {str(path)!r}: {exc.strerror}; check the path") from None
        except ValueError as exc:
            raise RewardConfigError(f"grader file {str(path)!r} is not valid JSON: {exc}") from None
        origin = str(path.resolve())
    extra = set(options) - {"timeout"}
    if extra:
        raise RewardConfigError(f"{where or 'grader'}: options {sorted(extra)} do not apply to a grader; put them in the grader itself")
    grader = build(spec, where or f"grader {spec.get('name') or spec.get('type')!r}")
    version = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    reward = Reward(grader.name, grader.score, env=grader.env, timeout=float(options.get("timeout", 300.0)),
                    origin=f"{origin} ({grader.type})", version=version, sandboxed=grader.type == "python")
    reward.grader = grader
    reward.pass_threshold = grader.pass_threshold
    return reward
