"""End to end: a verl user's own `python -m verl.trainer.main_ppo` selects agentrl by config keys alone.

No `agentrl train` here: the rows are verl's GSM8K-shaped parquet (prompt, data_source,
reward_model.ground_truth, extra_info), the command line is verl's, with the CPU keys agentrl documents for a
machine without a GPU (`python -m agentrl.verl.cpu`). One run scores with agentrl's rewards through
`reward.custom_reward_function.path=pkg://agentrl.verl` (the math preset and a reward file run in the
sandbox); the other runs agentrl's agent loop with the real calculator MCP server, configured by `+agentrl.*`
keys. The demo model (built once and cached, as `model: demo` does) stands in for a real model: the only fake.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MY_REWARD = """
def grade(sample, item):
    # a reward file: run in agentrl's sandbox; says whether the answer names the reference answer's digits
    expected = item["metadata"].get("expected_answer")
    if expected is None:
        return None
    return 1.0 if str(expected) in (sample["final_answer"] or "") else 0.0
"""


@pytest.fixture(scope="module")
def verl_rows(tmp_path_factory):
    """The demo's questions as verl's rows (what verl's GSM8K preprocessing writes), in parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from agentrl.runner import resolve_model

    model, paths = resolve_model("demo")
    root = tmp_path_factory.mktemp("verl_rows")
    rows = [json.loads(line) for line in Path(paths["train_path"]).read_text().splitlines()[:4]]

    def verl_row(n: int, row: dict, split: str) -> dict:
        # extra_info carries what agentrl's rows keep in metadata: the tools a question may use (the demo
        # model learnt the calculator's add/subtract/multiply only) and the one it should use (tool_use reads it)
        meta = row["metadata"]
        return {"prompt": row["messages"], "data_source": "demo/calc", "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": meta["expected_answer"]},
                "extra_info": {"split": split, "index": n, "allowed_tools": meta["allowed_tools"],
                               "expected_tools": meta["expected_tools"]}}

    pq.write_table(pa.Table.from_pylist([verl_row(n, r, "train") for n, r in enumerate(rows[:2])]),
                   root / "train.parquet")
    pq.write_table(pa.Table.from_pylist([verl_row(n, r, "test") for n, r in enumerate(rows[2:4])]),
                   root / "test.parquet")
    return {"model": model, "train": root / "train.parquet", "test": root / "test.parquet"}


def main_ppo(rows: dict, out: Path, *keys: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """verl's trainer, one GRPO step of 2 prompts x 4 samples and a validation pass before it."""
    cpu = subprocess.run([sys.executable, "-m", "agentrl.verl.cpu"], capture_output=True, text=True, check=True)
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *cpu.stdout.split(),
           f"data.train_files={rows['train']}", f"data.val_files={rows['test']}",
           "data.train_batch_size=2", "data.max_prompt_length=448", "data.max_response_length=64",
           f"actor_rollout_ref.model.path={rows['model']}",
           "actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
           "actor_rollout_ref.actor.optim.lr=5e-4", "actor_rollout_ref.rollout.n=4",
           "actor_rollout_ref.rollout.prompt_length=448", "actor_rollout_ref.rollout.response_length=64",
           "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
           "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
           "actor_rollout_ref.rollout.calculate_log_probs=true",
           "algorithm.adv_estimator=agentrl_grpo", "reward.num_workers=1",
           "trainer.total_epochs=1", "trainer.total_training_steps=1", "trainer.save_freq=-1",
           "trainer.test_freq=-1", "trainer.val_before_train=true", "trainer.logger=[console,file]",
           "trainer.project_name=e2e", "trainer.experiment_name=verl-config",
           f"trainer.default_local_dir={out / 'checkpoints'}", *keys]
    metrics = out / "verl_metrics.jsonl"
    env = {**os.environ, "VERL_FILE_LOGGER_PATH": str(metrics), "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled",
           "TOKENIZERS_PARALLELISM": "false", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True, timeout=900)
    lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()] if metrics.exists() else []
    return result, lines


def _tail(result: subprocess.CompletedProcess) -> str:
    return (result.stdout[-4000:] + "\n----\n" + result.stderr[-4000:])


def test_verl_scores_with_agentrl_rewards_through_pkg_agentrl_verl(verl_rows, tmp_path):
    (tmp_path / "my_reward.py").write_text(MY_REWARD)
    rewards = f"[{{name:math,weight:1.0}},{{name:{tmp_path / 'my_reward.py'},weight:0.5}}]"
    result, metrics = main_ppo(verl_rows, tmp_path,
                               "reward.custom_reward_function.path=pkg://agentrl.verl",
                               "reward.custom_reward_function.name=compute_score",
                               f"+reward.custom_reward_function.reward_kwargs.rewards={rewards}")
    assert result.returncode == 0, _tail(result)
    validation = next(m["data"] for m in metrics if any(k.startswith("val-") for k in m["data"]))
    # both rewards scored every validation response in verl's reward workers, under their agentrl labels
    for label in ("math", "my_reward", "agentrl_unscorable"):
        key = next((k for k in validation if f"/{'reward/' if label != 'agentrl_unscorable' else ''}{label}/mean" in k),
                   None)
        assert key is not None, sorted(validation)
    unscorable = next(v for k, v in validation.items() if "/agentrl_unscorable/mean" in k)
    assert unscorable == 0.0
    train = next(m["data"] for m in metrics if "critic/score/mean" in m["data"])
    assert 0.0 <= train["critic/score/mean"] <= 1.0


def test_verl_runs_agentrl_loop_and_calculator_from_hydra_keys_alone(verl_rows, tmp_path):
    run = tmp_path / "agentrl_run"
    result, metrics = main_ppo(verl_rows, tmp_path,
                               "actor_rollout_ref.rollout.agent.default_agent_loop=agentrl",
                               "+agentrl.tools=[calculator]",
                               "+agentrl.rewards=[{name:math,weight:1.0},{name:tool_use,weight:0}]",
                               "+agentrl.agent.max_turns=2", "+agentrl.agent.max_tool_calls=2",
                               f"+agentrl.run_dir={run}")
    assert result.returncode == 0, _tail(result)
    rollouts = [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines()]
    train = [r for r in rollouts if not r["validation"]]
    val = [r for r in rollouts if r["validation"]]
    assert len(train) == 8 and len(val) == 2, [(r["step"], r["validation"]) for r in rollouts]
    assert all(r["unscorable"] is None and set(r["components"]) == {"math", "tool_use"} for r in rollouts)
    assert all(r["components"]["tool_use"] is not None for r in rollouts)  # extra_info reached item.metadata
    # verl's row became agentrl's: its ground truth is the reference answer the math preset read
    assert {r["prompt_id"] for r in train} == {"demo/calc:0", "demo/calc:1"}
    calls = [(c, res) for r in rollouts for s in r["trajectories"]
             for c, res in zip(s["tool_calls"], s["tool_results"])]
    assert calls, "the demo model made no tool call"
    assert any(not res["is_error"] and res["content"].strip().lstrip("-").isdigit() for _, res in calls), calls
    assert any(m["data"].get("critic/score/mean") is not None for m in metrics)
