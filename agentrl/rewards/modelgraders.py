"""Graders that ask something outside: ``score_model`` and ``label_model`` (a judge via litellm), ``endpoint`` (a URL).

    {"type": "score_model", "name": "judge", "model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY",
     "input": [{"role": "system", "content": "Grade 0 to 1 ..."},
               {"role": "user", "content": "Reference: {{item.reference_answer}}\\nAnswer: {{sample.output_text}}"}],
     "range": [0, 1], "pass_threshold": 0.5, "sampling_params": {"temperature": 0, "max_tokens": 200}}
    {"type": "label_model", "model": "...", "input": [...], "labels": ["correct", "incorrect"], "passing_labels": ["correct"]}
    {"type": "endpoint", "url": "http://127.0.0.1:9000/grade", "headers": {"Authorization": "Bearer ${GRADER_TOKEN}"}}

A model grader may name ``api_base`` (a local OpenAI-compatible server) and ``api_key_env`` (read when loaded; a
missing variable is an error then). The judge's reply is read as a number in ``range`` by
:mod:`agentrl.rewards.judgereply` (``{"result": x}``, ``{"score": x}``, "Score: x", "x/10", a bare number,
else the last number). An endpoint receives ``{"sample", "item", "rollout_id"}`` and answers
``{"score": x}`` (or ``"reward"``); 5xx and connection errors are retried 3 times, then the rollout is unscorable.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from agentrl.backoff import backoff
from agentrl.rewards.errors import Unscorable
from agentrl.rewards.graderbase import Grader
from agentrl.rewards.gradertemplate import Template
from agentrl.rewards.judge import chat_sync
from agentrl.rewards.judgereply import first_reading
from agentrl.rewards.errors import RewardConfigError

ENDPOINT_BACKOFF_BASE, ENDPOINT_BACKOFF_CAP = 0.4, 5.0  # seconds: retry n waits uniform(0, min(5, 0.4 * 2**(n-1)))
_SAMPLING = ("temperature", "max_tokens", "max_completions_tokens", "top_p", "seed", "reasoning_effort")


def reply_number(text: str) -> float | None:
    """The score in a judge's reply as the judge wrote it (the grader's ``range`` scales it): the most explicit
    reading of :mod:`agentrl.rewards.judgereply` (a JSON ``score``/``result``/``grade``, "Score: N", "N/M",
    a bare number), else the last number in the text; None if it has none."""
    reading = first_reading(text)
    return reading.value if reading else None


class _ModelGrader(Grader):
    is_model = True

    def __init__(self, spec: dict, where: str) -> None:
        super().__init__(spec, where)
        self.model = spec.get("model")
        if not isinstance(self.model, str) or not self.model:
            raise RewardConfigError(f"{where}: a {self.type} grader needs \"model\" (a litellm model such as "
                                    f"\"openai/gpt-4o-mini\", or \"openai/<name>\" with \"api_base\" for a local server)")
        messages = spec.get("input")
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise RewardConfigError(f"{where}: input must be a list of {{role, content}} messages with templates")
        self.messages = [(m.get("role", "user"), Template(m.get("content"), f"{where}.input[{n}].content"))
                         for n, m in enumerate(messages)]
        self.templates += [t for _, t in self.messages]
        self.api_base = spec.get("api_base")
        key_env = spec.get("api_key_env")
        if key_env is not None:
            if key_env not in os.environ:
                raise RewardConfigError(f"{where}: api_key_env {key_env!r} is not set; export {key_env}=... first")
            self.env = {key_env: os.environ[key_env]}
        self.api_key = self.env.get(key_env) if key_env else None
        sampling = dict(spec.get("sampling_params") or {})
        unknown = set(sampling) - set(_SAMPLING)
        if unknown:
            raise RewardConfigError(f"{where}: unknown sampling_params {sorted(unknown)}; known: {', '.join(_SAMPLING)}")
        if "max_completions_tokens" in sampling:
            sampling["max_tokens"] = sampling.pop("max_completions_tokens")
        sampling.pop("reasoning_effort", None)
        self.temperature = float(sampling.pop("temperature", 0.0))
        self.sampling = sampling
        self.retries = int(spec.get("retries", 3))

    def ask(self, sample: dict, item: Any) -> str:
        messages = [{"role": role, "content": t.render(sample, item)} for role, t in self.messages]
        return chat_sync(messages, model=self.model, api_base=self.api_base, api_key=self.api_key,
                         temperature=self.temperature, retries=self.retries, **self.sampling)


class ScoreModel(_ModelGrader):
    type = "score_model"

    def raw(self, sample: dict, item: Any) -> float:
        text = self.ask(sample, item)
        value = reply_number(text)
        if value is None:
            raise Unscorable(f"{self.name}: the judge's reply holds no score: {text[:80]!r}")
        return value


class LabelModel(_ModelGrader):
    type = "label_model"

    def __init__(self, spec: dict, where: str) -> None:
        super().__init__(spec, where)
        self.labels, self.passing = spec.get("labels"), spec.get("passing_labels")
        if not isinstance(self.labels, list) or not self.labels or not all(isinstance(x, str) for x in self.labels):
            raise RewardConfigError(f"{where}: labels must be a non-empty list of strings")
        if not isinstance(self.passing, list) or not set(self.passing) <= set(self.labels) or not self.passing:
            raise RewardConfigError(f"{where}: passing_labels must be a non-empty subset of labels {self.labels}")
        if self.pass_threshold is None:
            self.pass_threshold = 1.0

    def raw(self, sample: dict, item: Any) -> float:
        text = self.ask(sample, item).strip()
        words = re.findall(r"[\w-]+", text.lower())
        found = [label for label in self.labels if label.lower() in words or label.lower() == text.lower()]
        last = max(found, key=lambda label: text.lower().rfind(label.lower()), default=None)
        if last is None:
            raise Unscorable(f"{self.name}: the judge answered {text[:80]!r}, none of the labels {self.labels}")
        return 1.0 if last in self.passing else 0.0


class Endpoint(Grader):
    """POST the sample and item to a grader service; read ``score`` (or ``reward``) from its JSON answer."""

    type = "endpoint"

    def __init__(self, spec: dict, where: str) -> None:
        super().__init__(spec, where)
        from agentrl.tools.config import ToolConfigError, _str_map

        self.url = spec.get("url")
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise RewardConfigError(f"{where}: an endpoint grader needs \"url\": \"http://...\", got {self.url!r}")
        try:
            self.headers = _str_map(spec.get("headers"), self.name, "headers")
        except ToolConfigError as exc:
            raise RewardConfigError(f"{where}: {exc}") from None
        self.timeout = float(spec.get("timeout", 60.0))
        self.retries = int(spec.get("retries", 3))

    def raw(self, sample: dict, item: Any) -> float:
        import httpx

        from agentrl.tools.types import refused
        from agentrl.trajectory import unwrap

        body = {"sample": unwrap(sample), "item": unwrap(item), "rollout_id": sample.get("rollout_id")}
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:  # raw() runs in a worker thread, not on an event loop: a blocking wait is the right one
                time.sleep(backoff(attempt, base=ENDPOINT_BACKOFF_BASE, cap=ENDPOINT_BACKOFF_CAP))
            try:
                response = httpx.post(self.url, json=body, headers=self.headers, timeout=self.timeout)
            except httpx.TransportError as exc:
                last = "connection refused" if refused(exc) else f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code >= 500 or response.status_code == 429:
                last = f"HTTP {response.status_code}"
                continue
            if response.status_code >= 400:
                raise Unscorable(f"{self.name}: {self.url} answered HTTP {response.status_code}: {response.text[:200]}")
            try:
                data = response.json()
            except ValueError:
                raise Unscorable(f"{self.name}: {self.url} answered non-JSON: {response.text[:80]!r}") from None
            value = data.get("score", data.get("reward")) if isinstance(data, dict) else data
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise Unscorable(f"{self.name}: {self.url} answered no numeric \"score\": {str(data)[:80]}")
            return float(value)
        raise Unscorable(f"{self.name}: {self.url}: {last} after {self.retries} retries")
