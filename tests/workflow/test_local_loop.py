"""The training agent loop, run outside training on local engines, with the real calculator MCP server."""

from __future__ import annotations

import json

import pytest

from agentrl.workflow.local import LocalRunner, load_rows
from agentrl.workflow.models import load_settings


@pytest.fixture(scope="module")
def settings(demo_config):
    return load_settings(str(demo_config))


def test_tiny_model_through_the_loop_batched(settings):
    rows = load_rows(settings.val_data)
    runner = LocalRunner(settings, settings.model, engine="transformers")
    try:
        records = runner.run(rows, samples=2, temperature=1.0)
        stats = runner.engine.stats()
    finally:
        runner.close()
    assert [(r.id, r.sample) for r in records] == [(row["id"], s) for row in rows for s in range(2)]
    for r in records:
        assert r.rollout.reward is not None and 0.0 <= r.rollout.reward <= 1.0
        assert set(r.rollout.components) == {"math", "tool_use"}
        assert r.rollout.messages[: len(r.prompt)] == r.prompt and r.rollout.response_tokens >= 1
    # 16 concurrent rollouts went to the model in far fewer batches than requests
    assert stats["sequences"] >= 16 and stats["batches"] < stats["sequences"] / 2
    # the records are the agent loop's own rollouts.jsonl lines (no second copy of the loop)
    logged = [json.loads(line) for line in (runner.work_dir / "rollouts.jsonl").read_text().splitlines()]
    assert {r["rollout_id"] for r in logged} == {r.rollout.rollout_id for r in records}


def test_scripted_replies_reach_the_real_calculator_and_rewards(settings, scripted):
    rows = load_rows(settings.val_data)[:4]
    runner = LocalRunner(settings, settings.model, engine="transformers")
    runner.close()
    runner.engine = scripted(runner.tokenizer)
    records = runner.run(rows)
    for r, row in zip(records, rows):
        expected = row["metadata"]["expected_answer"]
        assert r.rollout.tool_calls == 1 and r.rollout.reward == 1.0, r
        result = r.rollout.trajectories[0].tool_results[0]
        assert result.content.strip() == expected and not result.is_error
        assert r.rollout.messages[-1] == {"role": "assistant", "content": f"The answer is {expected}."}


def test_wrong_answers_score_zero_not_unscorable(settings, scripted):
    rows = load_rows(settings.val_data)[:2]
    runner = LocalRunner(settings, settings.model, engine="transformers")
    runner.close()
    runner.engine = scripted(runner.tokenizer, wrong=True)
    records = runner.run(rows)
    assert [r.rollout.reward for r in records] == [0.0, 0.0]
    assert all(r.rollout.unscorable is None and r.rollout.tool_calls == 0 for r in records)


def test_bad_model_folder_is_a_clear_error(settings, tmp_path):
    from agentrl.verl.engine import EngineError

    with pytest.raises(EngineError, match="not a HuggingFace model folder"):
        LocalRunner(settings, str(tmp_path))


def test_vllm_engine_without_vllm_says_how_to_get_it(settings):
    from agentrl.verl.engine import EngineError, open_engine, vllm_platform

    if vllm_platform():
        pytest.skip("vLLM is installed; this test covers its absence")
    with pytest.raises(EngineError, match=r"needs vLLM: .*scripts/install.sh --vllm.*--engine transformers"):
        open_engine(settings.model, prompt_length=64, response_length=16, kind="vllm")
    with pytest.raises(EngineError, match="unknown engine 'tgi'"):
        open_engine(settings.model, prompt_length=64, response_length=16, kind="tgi")
