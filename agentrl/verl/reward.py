"""agentrl's rewards as verl's reward function: ``reward.custom_reward_function.path=pkg://agentrl.verl``.

    python -m verl.trainer.main_ppo ... algorithm.adv_estimator=agentrl_grpo \\
        reward.custom_reward_function.path=pkg://agentrl.verl \\
        reward.custom_reward_function.name=compute_score \\
        '+reward.custom_reward_function.reward_kwargs.rewards=[{name:math},{name:/abs/my_reward.py,weight:0.5}]'

verl's reward workers call ``compute_score(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)``
for every response; ``rewards`` is a list in the shape of agentrl's ``rewards:`` (presets, files run in the
sandbox, OpenAI grader dicts, weights, labels). A verl row becomes the ``item`` agentrl's rewards read as :mod:`agentrl.verl.rows` says (``ground_truth`` →
``item.metadata.expected_answer`` and ``item.reference_answer``, ``extra_info`` → ``item.metadata``);
``solution_str`` is the sample's one turn and its ``final_answer``.

The result is verl's dict: ``score`` (the weighted mean), ``agentrl_unscorable`` (1 when it could not be
scored) and one ``reward/<label>`` per reward (the same keys for every sample, as verl needs). A response that
could not be scored (a reward crashed or timed out) gets score NaN, never 0; ``algorithm.adv_estimator=
agentrl_grpo`` then gives it advantage 0 and leaves it out of its group's statistics, as in ``agentrl train``.
"""

from __future__ import annotations

import json
import math
import threading
import uuid
from typing import Any

from agentrl.errors import AgentrlError
from agentrl.trajectory import make_sample, make_step
from agentrl.verl.rows import item_of, loop_row, plain

WHERE = "reward.custom_reward_function.reward_kwargs.rewards"
EXAMPLE = "'+reward.custom_reward_function.reward_kwargs.rewards=[{name:math,weight:1.0}]'"

_sets: dict[str, Any] = {}
_sets_lock = threading.Lock()


class RewardKwargsError(AgentrlError):
    """``reward_kwargs.rewards`` is missing or not a list of agentrl rewards."""


def _rewards_value(value: Any) -> Any:
    """The ``rewards`` kwarg as plain lists and dicts (a JSON string is read as JSON)."""
    value = plain(value)
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise RewardKwargsError(f"{WHERE}: not valid JSON ({exc.msg}): {value!r}") from None
    return value


def reward_set(rewards: Any):
    """The RewardSet for this ``rewards`` list, built once per process (names and options checked then)."""
    from agentrl.rewards import RewardSet

    rewards = _rewards_value(rewards)
    if rewards is None:
        raise RewardKwargsError(f"pkg://agentrl.verl compute_score needs agentrl's rewards: add {EXAMPLE} "
                                f"(presets, .py files, OpenAI grader dicts, with weights, as under agentrl.rewards)")
    key = json.dumps(rewards, sort_keys=True, default=str)
    with _sets_lock:
        if key not in _sets:
            _sets[key] = RewardSet.from_config(rewards, where=WHERE)
        return _sets[key]


def _components(result: Any, labels: list[str]) -> dict[str, float]:
    out = {}
    for label in labels:
        value = result.components.get(label)
        out[f"reward/{label}"] = float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan
    return out


async def compute_score(data_source: Any = None, solution_str: str = "", ground_truth: Any = None,
                        extra_info: Any = None, rewards: Any = None, **_: Any) -> dict[str, float]:
    """verl's reward function, scoring with agentrl's ``rewards`` (see the module's docstring)."""
    scorer = reward_set(rewards)
    item = item_of(loop_row(None, data_source, ground_truth, extra_info))
    sample = make_sample(f"verl-{uuid.uuid4().hex[:12]}", [make_step(solution_str or "")],
                         messages=[*item.messages, {"role": "assistant", "content": solution_str or ""}])
    result = await scorer.ascore(sample, item)
    labels = [c.label for c in scorer.components]
    score = float(result.score) if result.score is not None else math.nan
    return {"score": score, "agentrl_unscorable": 0.0 if result.score is not None else 1.0,
            **_components(result, labels)}
