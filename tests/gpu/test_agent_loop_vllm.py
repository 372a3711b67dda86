"""The agent loop against a stand-in for verl's vLLM server client (no GPU, no vLLM here).

The stand-in answers ``generate(request_id, prompt_ids=..., sampling_params=...)`` with verl's ``TokenOutput`` the
way ``verl/workers/rollout/vllm_rollout/vllm_async_server.py`` builds it: ``stop_reason`` "completed" for vLLM's
stop and length finishes, "aborted" with whatever was generated (possibly nothing) when the request was aborted,
log-probs per token, and the weight version in ``extra_fields``. Everything else is real: verl's agent-loop base
class and token builder, the hermes tool parser, the calculator MCP server over stdio and the math reward.
"""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.workers.rollout.replica import TokenOutput

from agentrl.verl.agent_loop import AgentrlAgentLoop
from agentrl.demo.tokenizer import train_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["What is 2 + 3? The answer is 5.", '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>',
             "Let me think about it step by step and use the calculator tool."] * 20
    return train_tokenizer(texts)


class VllmStandIn:
    """Scripted replies: ("completed", text) / ("aborted", text-or-"") / ("length", text)."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script, self.calls = tokenizer, list(script), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        kind, text = self.script.pop(0)
        self.calls.append({"prompt_len": len(prompt_ids), "max_tokens": sampling_params.get("max_tokens")})
        ids = self.tokenizer.encode(text, add_special_tokens=False) if text else []
        if kind == "completed":
            ids = ids + [self.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        ids = ids[: sampling_params["max_tokens"]]
        stop = "aborted" if kind == "aborted" else "completed"  # vLLM's "length" maps to "completed" in verl
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids) if ids else None, stop_reason=stop,
                           extra_fields={"global_steps": 3})


def make_loop(tmp_path, tokenizer, script, tools=None, response_length=64):
    spec = {"run_dir": str(tmp_path), "tools": tools, "tool_allow": None, "rewards": [{"name": "math", "weight": 1.0}],
            "agent": {"max_turns": 3, "max_tool_calls": 4, "max_parallel_calls": 2, "max_tool_result_chars": 400,
                      "tool_parser": "hermes", "simulated_user": None}}
    spec_path = tmp_path / "agentrl_spec.json"
    spec_path.write_text(json.dumps(spec))
    config = OmegaConf.create({"agentrl": {"spec": str(spec_path)},
                               "actor_rollout_ref": {"rollout": {"response_length": response_length,
                                                                 "prompt_length": 256,
                                                                 "calculate_log_probs": True}}})
    server = VllmStandIn(tokenizer, script)

    def build():  # inside the running event loop, as verl's agent-loop worker builds it
        return AgentrlAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                                processor=None, dataset_cls=None, data_config=DictConfigWrap(OmegaConf.create({})))
    return build, server


def run_once(build, expected="5"):
    row = {"id": "p1", "messages": [{"role": "user", "content": "What is 2 + 3?"}],
           "metadata": {"expected_answer": expected}}

    async def main():
        loop = build()
        return loop, await loop.run({"temperature": 1.0, "logprobs": True}, extra_info={"agentrl_row": json.dumps(row)})

    loop, out = asyncio.run(main())
    with open(loop.state.spec.run_dir + "/rollouts.jsonl") as fh:
        record = json.loads(fh.read().splitlines()[-1])
    return out, record


def test_aborted_before_any_token_is_unscorable_not_zero(tmp_path, tokenizer):
    loop, _ = make_loop(tmp_path, tokenizer, [("aborted", "")])
    out, record = run_once(loop)
    assert math.isnan(out.reward_score)  # a wrong answer would be 0.0; this one could not be scored
    assert out.extra_fields["agentrl_unscorable"] == 1
    assert record["stop_reason"] == "aborted" and "before any token" in record["unscorable"]
    assert record["reward"] is None
    # verl needs one response token; the filler is in the mask so the loss is 0, not 0/0
    assert len(out.response_ids) == 1 and out.response_mask == [1]


def test_partial_output_then_abort_keeps_tokens_but_is_unscorable(tmp_path, tokenizer):
    loop, _ = make_loop(tmp_path, tokenizer, [("aborted", "The answer is 5")])
    out, record = run_once(loop)
    partial = tokenizer.encode("The answer is 5", add_special_tokens=False)
    assert out.response_ids == partial and out.response_mask == [1] * len(partial)
    assert out.response_logprobs == [-0.5] * len(partial)
    assert math.isnan(out.reward_score)  # "The answer is 5" would score 1.0, but the model had not finished
    assert record["stop_reason"] == "aborted" and f"after {len(partial)} tokens" in record["unscorable"]
    assert record["trajectories"][-1]["response"] == "The answer is 5"


def test_completed_answer_is_scored(tmp_path, tokenizer):
    loop, server = make_loop(tmp_path, tokenizer, [("completed", "The answer is 5.")])
    out, record = run_once(loop)
    assert out.reward_score == 1.0 and out.extra_fields["agentrl_unscorable"] == 0
    assert record["stop_reason"] == "answered" and record["unscorable"] is None
    assert out.extra_fields["global_steps"] == 3
    assert server.calls[0]["max_tokens"] == 64


def test_length_stop_is_the_models_budget_and_still_scored(tmp_path, tokenizer):
    long = "Let me think about it step by step and use the calculator tool. " * 10
    loop, _ = make_loop(tmp_path, tokenizer, [("length", long)], response_length=16)
    out, record = run_once(loop)
    assert len(out.response_ids) == 16
    assert record["unscorable"] is None and out.reward_score == 0.0  # a real wrong answer: 0, scored


def test_abort_after_a_real_tool_call_is_unscorable(tmp_path, tokenizer):
    call = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    loop, server = make_loop(tmp_path, tokenizer, [("completed", call), ("aborted", "The ans")], tools=["calculator"],
                             response_length=256)
    out, record = run_once(loop)
    assert record["tool_calls"] == 1
    assert record["trajectories"][0]["tool_results"][0]["content"].strip() == "5"
    assert math.isnan(out.reward_score) and record["stop_reason"] == "aborted"
    assert 0 in out.response_mask  # the tool result's tokens are not the model's
    assert server.calls[1]["prompt_len"] > server.calls[0]["prompt_len"]
