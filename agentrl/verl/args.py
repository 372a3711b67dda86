"""From agentrl settings to verl's Hydra overrides for ``verl.trainer.main_ppo``.

Three layers, later ones winning: the device defaults (CPU: the ``cpu`` platform and ``agentrl_cpu``
rollout; GPU: vLLM), what the ``agentrl:`` block chooses, then the user's own verl keys.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.config import AgentrlSettings, flatten

# What verl needs to run on a machine with no GPU (each line is an obstacle met and passed):
CPU_DEFAULTS: dict[str, Any] = {
    "actor_rollout_ref.rollout.name": "agentrl_cpu",  # verl's rollouts are GPU engines
    "actor_rollout_ref.actor.strategy": "fsdp2",  # FSDP1 needs an accelerator
    "actor_rollout_ref.ref.strategy": "fsdp2",
    "actor_rollout_ref.model.use_remove_padding": False,  # needs flash-attention
    "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
    "trainer.n_gpus_per_node": 1,  # resource pools count GPUs: one logical Ray GPU
    "+ray_kwargs.ray_init.num_gpus": 1,
    "ray_kwargs.ray_init.num_cpus": 16,  # logical: TransferQueue and workers each ask for whole CPUs
    # Ray's dashboard is some ten Python processes starting beside verl's on 2 cores (ray.init 1.5 s
    # slower)
    "+ray_kwargs.ray_init.include_dashboard": False,
    "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
    "data.dataloader_num_workers": 0,
    "actor_rollout_ref.rollout.agent.num_workers": 1,
}

# The GPU defaults (GPU count, attention, batching, vLLM, LoRA, Ray) are planned in agentrl/verl/gpu_plan.py.


@dataclass(frozen=True)
class StepPlan:
    steps_per_epoch: int
    epochs: int  # enough epochs for max_steps: verl stops at whichever of the two ends first
    total_steps: int


def step_plan(settings: AgentrlSettings, train_rows: int) -> StepPlan:
    """How many steps the run makes (verl drops the last partial batch of an epoch).

    >>> from agentrl.config import AgentrlSettings
    >>> step_plan(AgentrlSettings(model="m", train_data="t", rewards=["math"], batch_size=2, max_steps=8), 10)
    StepPlan(steps_per_epoch=5, epochs=2, total_steps=8)
    """
    per_epoch = train_rows // settings.batch_size
    if per_epoch < 1:
        return StepPlan(0, settings.epochs, 0)
    epochs = settings.epochs
    if settings.max_steps:
        epochs = max(epochs, math.ceil(settings.max_steps / per_epoch))
    total = settings.max_steps or per_epoch * epochs
    return StepPlan(per_epoch, epochs, total)


def on_cpu(settings: AgentrlSettings) -> bool:
    if settings.device != "auto":
        return settings.device == "cpu"
    from agentrl.verl.cpu.detect import has_accelerator

    return not has_accelerator()


def rollout_kind(settings: AgentrlSettings, cpu: bool) -> str:
    """``vllm`` or ``transformers``: which rollout ``agentrl.rollout`` picks on this device.

    >>> from agentrl.config import AgentrlSettings
    >>> s = AgentrlSettings(model="m", train_data="t", rewards=["math"])
    >>> rollout_kind(s, cpu=True), rollout_kind(s, cpu=False)
    ('transformers', 'vllm')
    >>> rollout_kind(s.model_copy(update={"rollout": "vllm"}), cpu=True)
    'vllm'
    """
    if settings.rollout == "auto":
        return "transformers" if cpu else "vllm"
    if settings.rollout == "transformers" and not cpu:
        from agentrl.config import ConfigError

        raise ConfigError("agentrl.rollout=transformers is agentrl's CPU rollout, and this run is on GPUs: use "
                          "agentrl.rollout=vllm (or auto), or agentrl.device=cpu")
    return settings.rollout


def build_overrides(settings: AgentrlSettings, verl_part: dict, *, model_path: str, train_file: str,
                    val_file: str | None, spec_path: str, run_dir: Path, cpu: bool,
                    train_rows: int | None = None, gpu_plan: Any = None) -> dict[str, Any]:
    s = settings
    cpu_vllm = cpu and rollout_kind(s, cpu) == "vllm"
    # the launch path always knows the rows; without them (a GPU plan shown on its own) a save each epoch
    # cannot be worked out, and save_every alone decides
    steps = step_plan(s, train_rows) if train_rows is not None else None
    mini = s.batch_size  # one optimizer step per training step
    chosen: dict[str, Any] = {
        "algorithm.adv_estimator": "agentrl_grpo",
        "+agentrl.spec": spec_path,
        "data.train_files": train_file,
        "data.val_files": val_file or train_file,
        "data.train_batch_size": s.batch_size,
        "data.max_prompt_length": s.max_prompt_length,
        "data.max_response_length": s.max_response_length,
        "data.return_raw_chat": True,
        "data.seed": s.seed,
        "actor_rollout_ref.model.path": model_path,
        "actor_rollout_ref.actor.ppo_mini_batch_size": mini,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": max(1, s.batch_size * s.samples_per_prompt),
        "actor_rollout_ref.actor.optim.lr": s.learning_rate,
        "actor_rollout_ref.actor.entropy_coeff": s.entropy_coef,
        "actor_rollout_ref.actor.use_kl_loss": s.kl_coef > 0,
        "actor_rollout_ref.actor.kl_loss_coef": s.kl_coef,
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
        "actor_rollout_ref.rollout.n": s.samples_per_prompt,
        "actor_rollout_ref.rollout.temperature": s.temperature,
        "actor_rollout_ref.rollout.prompt_length": s.max_prompt_length,
        "actor_rollout_ref.rollout.response_length": s.max_response_length,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": max(1, s.batch_size * s.samples_per_prompt),
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "actor_rollout_ref.rollout.agent.default_agent_loop": "agentrl",
        # agentrl's agent loop scores every rollout itself; verl's reward-loop workers (8 by default,
        # each a process importing torch and verl) would only idle, and starting them cost ~30 s of
        # a 2-core machine's start-up.
        "reward.num_workers": 1,
        "actor_rollout_ref.rollout.multi_turn.format": s.agent.tool_parser,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": max(1, s.batch_size * s.samples_per_prompt),
        "trainer.total_epochs": steps.epochs if steps else s.epochs,
        "trainer.total_training_steps": s.max_steps,
        # verl saves when step % save_freq == 0 and at the last step: 0 means once an epoch and at the end
        "trainer.save_freq": s.save_every or (steps.steps_per_epoch if steps else -1),
        "trainer.test_freq": -1 if not s.val_data else (s.save_every or min(steps.steps_per_epoch if steps else 10, 10)),
        "trainer.val_before_train": bool(s.val_data),
        "trainer.logger": ["console", "file"],
        "trainer.project_name": "agentrl",
        "trainer.experiment_name": s.name,
        "trainer.default_local_dir": str(run_dir / "checkpoints"),
        "trainer.resume_mode": "auto",
        "trainer.nnodes": 1,
        "actor_rollout_ref.actor.checkpoint.save_contents": ["model", "optimizer", "extra", "hf_model"],
    }
    if s.lora.rank > 0:
        chosen.update({
            "actor_rollout_ref.model.lora_rank": s.lora.rank,
            "actor_rollout_ref.model.lora_alpha": s.lora.alpha,
            "actor_rollout_ref.model.target_modules": s.lora.target_modules,
        })
        if cpu and not cpu_vllm:  # the CPU rollout takes whole weights: verl merges the adapters before each sync
            chosen["actor_rollout_ref.model.lora.merge"] = True
    merged = dict(CPU_DEFAULTS) if cpu else {}
    merged.update(chosen)
    if cpu_vllm:  # verl's vLLM rollout on the CPU: the GPU plan, changed only where the device forces it
        from agentrl.verl import gpu_plan as gp

        merged.update(gp.cpu_vllm_overrides(s))
    if not cpu:
        from agentrl.verl import gpu_plan as gp

        rollout_kind(s, cpu)  # a transformers rollout on GPUs is an error
        plan = gpu_plan or gp.plan_gpus(s)
        gp.check_batch(s, plan)
        merged.update(gp.gpu_overrides(s, plan))
        user = flatten(verl_part)
        merged.update(gp.runtime_env_overrides(gp.worker_env({**merged, **user}, plan)))
    merged.update(flatten(verl_part))
    return merged


def to_cli(overrides: dict[str, Any]) -> list[str]:
    from agentrl.config import hydra_value

    return [f"{key}={hydra_value(value)}" for key, value in overrides.items()]


VERL_AGENT_WORKERS = 8  # verl's default actor_rollout_ref.rollout.agent.num_workers


def sandbox_workers(overrides: dict[str, Any], cpus: int | None = None) -> int:
    """Workers per sandbox pool in each of verl's agent-loop processes: the machine's cores shared among
    them. Each process starts its own sandbox, and a pool of the full core count in every one of them
    would hold that many zygotes (sympy and math_verify in each heavy one) per process."""
    processes = int(overrides.get("actor_rollout_ref.rollout.agent.num_workers", VERL_AGENT_WORKERS))
    return max(2, (cpus or os.cpu_count() or 2) // max(1, processes))


def child_env(run_dir: Path, attempt: int, overrides: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    prefix = "+ray_kwargs.ray_init.runtime_env.env_vars."  # a GPU plan's environment for every Ray worker
    env.update({k[len(prefix):]: str(v) for k, v in overrides.items() if k.startswith(prefix)})
    env.setdefault("AGENTRL_SANDBOX_WORKERS", str(sandbox_workers(overrides)))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("WANDB_MODE", "disabled")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.setdefault("RAY_DEDUP_LOGS", "0")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env["VERL_FILE_LOGGER_PATH"] = str(run_dir / "logs" / f"verl_metrics.{attempt}.jsonl")
    return env
