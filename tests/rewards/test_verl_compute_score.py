"""`pkg://agentrl.verl`'s compute_score, loaded and called the way verl's reward workers do it
(verl's own get_custom_reward_fn), on verl's row fields. The trainer run is in tests/e2e/test_verl_config.py."""

from __future__ import annotations

import asyncio
import math

import pytest

STRING_CHECK = {"type": "string_check", "name": "exact", "input": "{{sample.output_text}}",
                "reference": "{{item.reference_answer}}", "operation": "eq"}


def verl_reward_fn(rewards):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    block = {"path": "pkg://agentrl.verl", "name": "compute_score"}
    if rewards is not None:
        block["reward_kwargs"] = {"rewards": rewards}
    return get_custom_reward_fn(OmegaConf.create({"reward": {"custom_reward_function": block}}))


def call(fn, answer: str, ground_truth="72", extra_info=None):
    return asyncio.run(fn(data_source="openai/gsm8k", solution_str=answer, ground_truth=ground_truth,
                          extra_info=extra_info if extra_info is not None else {"split": "train", "index": 3}))


def test_presets_files_and_grader_dicts_score_verl_rows_with_weights(tmp_path):
    mine = tmp_path / "my_reward.py"
    mine.write_text("def grade(sample, item):\n    return 1.0 if item['metadata']['split'] == 'train' else 0.0\n")
    rewards = [{"name": "math", "weight": 1.0}, {"name": str(mine), "weight": 0.5}, {**STRING_CHECK, "weight": 0.5}]
    fn = verl_reward_fn(rewards)
    right = call(fn, "72")  # ground_truth is the reference answer: math and the string check both read it
    assert right == {"score": 1.0, "agentrl_unscorable": 0.0, "reward/math": 1.0, "reward/my_reward": 1.0,
                     "reward/exact": 1.0}
    wrong = call(fn, "The answer is 71.")
    assert wrong["reward/math"] == 0.0 and wrong["reward/exact"] == 0.0 and wrong["reward/my_reward"] == 1.0
    assert wrong["score"] == pytest.approx(0.5 / 2.0)  # (1.0 * 0 + 0.5 * 1 + 0.5 * 0) / 2.0

    from agentrl.verl.reward import reward_set

    described = {d["label"]: d for d in reward_set(rewards).describe()}
    assert described["my_reward"]["sandboxed"] and not described["math"]["sandboxed"]


def test_a_reward_that_fails_makes_the_response_unscorable_not_zero(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def grade(sample, item):\n    return item['metadata']['no_such_key']\n")
    fn = verl_reward_fn([{"name": "math"}, {"name": str(broken), "weight": 1.0}])
    result = call(fn, "72")
    assert math.isnan(result["score"]) and result["agentrl_unscorable"] == 1.0
    assert result["reward/math"] == 1.0 and math.isnan(result["reward/broken"])
    # the same keys for every response, as verl needs to gather them
    assert set(result) == set(call(fn, "71"))


def test_rows_agentrl_converted_keep_their_metadata(tmp_path):
    import json

    row = {"messages": [{"role": "user", "content": "What is 8 * 9?"}], "metadata": {"expected_answer": "72"},
           "id": "q1", "source": "d.jsonl:1", "split": "train", "fields": {}}
    fn = verl_reward_fn([{"name": "math"}])
    assert call(fn, "72", ground_truth="", extra_info={"index": 0, "agentrl_row": json.dumps(row)})["score"] == 1.0


def test_without_rewards_the_error_names_the_key_to_add():
    from agentrl.verl.reward import RewardKwargsError

    with pytest.raises(RewardKwargsError, match=r"\+reward\.custom_reward_function\.reward_kwargs\.rewards="):
        call(verl_reward_fn(None), "72")
    from agentrl.errors import AgentrlError

    with pytest.raises(AgentrlError, match=r"unknown reward 'mathh' \(in reward\.custom_reward_function\.reward_kwargs\.rewards\[0\]\)"):
        call(verl_reward_fn([{"name": "mathh"}]), "72")
