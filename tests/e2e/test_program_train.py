"""End to end: `agentrl train` with `agent.program` in verl's real GRPO trainer on the CPU, one run shared by six
agents of five frameworks: the OpenAI-SDK calculator agent (configs/agents/openai_calculator.py) and the openai-agents
(its chat-completions model class, and its default Responses one), LangGraph, pydantic-ai and smolagents agents of
tests/workflow/frameworks, each unchanged, taking turns over the rollouts.

The agent here asks once more after the framework's loop, in a fresh conversation, so every rollout reaches verl as at
least two sequences (the case a framework that rewrites its history produces). The token audit
(AGENTRL_TOKEN_AUDIT) holds, per rollout, the ids each generate() returned and each sequence handed to verl."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from runs import AGENTRL, read_jsonl  # tests/e2e/runs.py

ROOT = Path(__file__).resolve().parents[2]
STEPS = 2
AGENT = '''
import itertools, json, os, sys
sys.path.insert(0, %(agents)r)
sys.path.insert(0, %(frameworks)r)
import openai_calculator, openai_agents_calc, agents_sdk_calculator, langgraph_calc, pydantic_ai_calc
import smolagents_calc
from openai import AsyncOpenAI

FRAMEWORKS = itertools.cycle([openai_calculator, openai_agents_calc, agents_sdk_calculator, langgraph_calc,
                              pydantic_ai_calc, smolagents_calc])


async def run(row, base_url, api_key):
    framework = next(FRAMEWORKS)  # the five frameworks take turns over the rollouts of one run
    with open(os.environ["FRAMEWORK_LOG"], "a") as fh:
        fh.write(json.dumps({"framework": framework.__name__, "key": api_key}) + "\\n")
    answer = await framework.run(row, base_url, api_key)
    # a second, fresh conversation: a new sequence of the same rollout, sharing its reward
    client = AsyncOpenAI(base_url=base_url, api_key=api_key)
    again = await client.chat.completions.create(model="policy", messages=row["messages"], max_tokens=16)
    return answer if answer is not None else again.choices[0].message.content
'''


# a reward that differs between rollouts whatever the model does, so the check that verl got each rollout's own
# reward for each of its sequences cannot pass on all-zero rewards
SPREAD = """
def grade(sample, item):
    return (len(sample["final_answer"] or "") % 5) / 4
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory, demo):
    root = tmp_path_factory.mktemp("program")
    (root / "spread.py").write_text(SPREAD)
    (root / "agent.py").write_text(AGENT % {"agents": str(ROOT / "configs" / "agents"),
                                            "frameworks": str(ROOT / "tests" / "workflow" / "frameworks")})
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump({"agentrl": {
        "name": "program", "model": demo["model_path"], "train_data": demo["train_path"],
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5},
                    {"name": "./spread.py", "weight": 1.0}],
        "batch_size": 2, "samples_per_prompt": 4, "max_steps": STEPS, "max_prompt_length": 320,
        "max_response_length": 64, "learning_rate": 5e-4, "run_dir": str(root / "run"),
        # smolagents asks tool_choice "required" on every turn, which the demo model does not meet in its format:
        # served as written, so its rollouts are scored (refused, they would be unscorable)
        "agent": {"program": "agent.py", "max_turns": 3, "tool_choice_missed": "serve"}}}))
    audit = root / "audit.jsonl"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "AGENTRL_TOKEN_AUDIT": str(audit),
           "FRAMEWORK_LOG": str(root / "frameworks.jsonl")}
    # --no-review: the spread reward would fail the review's gold check on purpose (it pays for answer length)
    out = subprocess.run(AGENTRL + ["train", str(config), "--no-review"], capture_output=True, text=True, env=env, cwd=root,
                         timeout=1500)
    return {"rc": out.returncode, "out": out.stdout + out.stderr, "run": root / "run", "audit": audit,
            "frameworks": root / "frameworks.jsonl"}


def test_program_run_trains_and_every_trained_id_was_sampled(trained):
    assert trained["rc"] == 0, trained["out"][-4000:]
    audit = read_jsonl(trained["audit"])
    rollouts = read_jsonl(trained["run"] / "rollouts.jsonl")
    train = [r for r in rollouts if not r["validation"]]
    assert len(train) == STEPS * 2 * 4 and {r["rollout_id"] for r in train} <= {a["rollout_id"] for a in audit}
    trained_ids = 0
    for line in audit:
        generated = [t for ids in line["generated"] for t in ids]
        seqs = line["sequences"]
        assert [t for s in seqs for t, m in zip(s["response_ids"], s["mask"]) if m] == generated
        assert len(seqs) >= 2  # the fresh conversation is a sequence of its own
        trained_ids += len(generated)
    assert trained_ids > 0
    assert all(r["unscorable"] is None and r["reward"] is not None for r in train), \
        [r["unscorable"] for r in train if r["unscorable"]][:3]
    used = {line["framework"] for line in read_jsonl(trained["frameworks"])}
    assert used == {"openai_calculator", "openai_agents_calc", "agents_sdk_calculator", "langgraph_calc",
                    "pydantic_ai_calc", "smolagents_calc"}


def test_the_reward_reached_verl_for_every_sequence(trained):
    assert trained["rc"] == 0, trained["out"][-4000:]
    by_id = {a["rollout_id"]: a for a in read_jsonl(trained["audit"])}
    rollouts = [r for r in read_jsonl(trained["run"] / "rollouts.jsonl") if not r["validation"]]
    metrics = [m for m in read_jsonl(trained["run"] / "metrics.jsonl") if not m["validation"]]
    assert [m["step"] for m in metrics] == list(range(1, STEPS + 1))
    for m in metrics:
        step = [r for r in rollouts if r["step"] == m["step"]]
        seqs = [(r["reward"], len(by_id[r["rollout_id"]]["sequences"])) for r in step]
        # verl's critic/score/mean is over the rows it trained: each rollout's reward once per sequence
        expected = sum(reward * n for reward, n in seqs) / sum(n for _, n in seqs)
        assert math.isclose(m["verl_score_mean"], expected, abs_tol=1e-5), (m["verl_score_mean"], expected)
        assert m["reward_mean"] == pytest.approx(sum(r for r, _ in seqs) / len(seqs))
    assert len({r["reward"] for r in rollouts}) > 1, "all rewards equal: the check above proves little"
    for line in by_id.values():
        assert all(s["reward_score"] == line["reward"] for s in line["sequences"])
    print(json.dumps({"steps": [{k: m.get(k) for k in ("step", "reward_mean", "verl_score_mean", "step_time")}
                                for m in metrics]}))
