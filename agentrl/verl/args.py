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
from agentrl.families import resolve_parser
from agentrl.rundir import RunDir
from agentrl.verl.cpuplan import PlanError, cpu_micro_batch, cpu_ranks, ray_address
from agentrl.verl.router import CONFIG as ROUTER_CONFIG

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
    # verl's request router, the same policy, in a process that imports neither verl nor torch (agentrl/verl/router.py)
    "actor_rollout_ref.rollout.router_config_path": str(ROUTER_CONFIG),
}

# With agentrl's own CPU rollout (not verl's vLLM one): that rollout samples in float32 with the very weights the
# actor holds, synced before every step, and returns each token's log-probability under the whole temperature-scaled
# distribution, which is what verl's old-log-prob pass computes again, a forward pass over the batch (about a
# seventh of a synchronous step here, a quarter of an off-policy one, where it competes with generation for the
# cores). verl's bypass mode takes the rollout's log-probs as PPO's anchor instead (pi_old = pi_rollout). Off-policy
# they are the behaviour policy token by token, a partial rollout's tokens under the weights that sampled each.
# `algorithm.rollout_correction.bypass_mode=false` brings the pass back.
CPU_ROLLOUT_DEFAULTS: dict[str, Any] = {
    "algorithm.rollout_correction.bypass_mode": True,
    # the skipped pass is where verl measures the policy's entropy; the update's forward pass measures it instead
    # (actor/entropy_loss, read as metrics.jsonl's entropy)
    "actor_rollout_ref.actor.calculate_entropy": True,
}

# Only for a Ray cluster that the run starts itself: ray.init() refuses to size a cluster it attaches to
# (RAY_ADDRESS), whose nodes declare their CPUs and logical GPUs at `ray start`.
LOCAL_RAY_KEYS = ("+ray_kwargs.ray_init.num_gpus", "ray_kwargs.ray_init.num_cpus", "+ray_kwargs.ray_init.include_dashboard")

# The GPU defaults (GPU count, attention, batching, vLLM, LoRA, Ray) are planned in agentrl/verl/gpu_plan.py.
# The CPU path's ranks and micro-batches are planned in agentrl/verl/cpuplan.py.

RUNTIME_ENV = "+ray_kwargs.ray_init.runtime_env.env_vars."  # Ray hands these to every worker on every node


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


def run_norm_by_std(run_dir: Path | str) -> bool:
    """Whether a run's GRPO divided by the group's std (verl's ``algorithm.norm_adv_by_std_in_grpo``, true unless
    the run's config.yaml set it false)."""
    import yaml

    from agentrl.rundir import RunDir

    try:
        config = yaml.safe_load(RunDir(run_dir).config.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return True
    value = (config.get("verl_overrides") or {}).get("algorithm.norm_adv_by_std_in_grpo", True)
    return str(value).lower() not in ("false", "0")


def launched_rollout(overrides: dict[str, Any]) -> str:
    """The rollout verl will run with these overrides: ``agentrl_cpu`` (agentrl's transformers rollout), ``vllm``,
    or what a config's own verl key names (it wins over agentrl's choice)."""
    return str(overrides.get("actor_rollout_ref.rollout.name"))


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
        "+agentrl.skip_flat_groups": s.skip_flat_groups,
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
        # agentrl's agent loop scores every rollout itself (reward_score is always set: NaN when it could not
        # score), so verl never asks a reward-loop worker: its 8 by default, each a process importing torch and
        # verl, would only idle (~13 s of CPU apiece on a 2-core machine's start-up). With none, verl's reward
        # manager hands the agent loop an empty list, which it never draws from, and the trainer skips its own
        # reward pass (that pass runs only when the list is None).
        "reward.num_workers": 0,
        "actor_rollout_ref.rollout.multi_turn.format": resolve_parser(s.agent.tool_parser, model_path),
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
    chosen.update(off_policy_overrides(s))
    if s.credit.method != "episode":  # agentrl_grpo reads the credit from the spec (agentrl.verl.grpo)
        chosen["+algorithm.agentrl_spec"] = spec_path
    merged = dict(CPU_DEFAULTS) if cpu else {}
    # LoRA with kl_coef > 0 keeps verl's pass: verl then computes the reference log-probs with the actor's own
    # adapters switched off, and without the old-log-prob pass before it the update fails in FSDP2 on the CPU
    # ("attempting to assign a gradient with dtype BFloat16 to a tensor with grad_dtype Float"; LoRA alone and the
    # KL term alone train with bypass mode)
    if cpu and not cpu_vllm and not (s.lora.rank > 0 and s.kl_coef > 0):
        merged.update(CPU_ROLLOUT_DEFAULTS)
    merged.update(chosen)
    if cpu or s.dtype != "auto":  # on GPUs verl's own bf16 stays unless the config names a dtype
        from agentrl.precision import choose

        merged.update(choose(s.dtype).verl_overrides())
    if cpu:
        ranks = cpu_ranks(settings)
        micro = cpu_micro_batch(settings, ranks, model_path)  # a rank's sequences in one micro-batch if they fit
        merged.update({
            "trainer.nnodes": ranks.nodes,
            "trainer.n_gpus_per_node": ranks.per_node,
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": micro,
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": micro,
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro,
            "actor_rollout_ref.rollout.agent.num_workers": ranks.nodes,  # one agent-loop process per node
        })
        if ray_address():
            for key in LOCAL_RAY_KEYS:
                merged.pop(key, None)
        else:
            from agentrl.verl.cluster import needs

            merged["+ray_kwargs.ray_init.num_gpus"] = ranks.world
            merged["ray_kwargs.ray_init.num_cpus"] = max(merged["ray_kwargs.ray_init.num_cpus"], needs(merged).total_cpus)
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
    if s.rollout_workers:  # agentrl.rollout_workers: verl's agent-loop processes (the user's verl key still wins)
        merged["actor_rollout_ref.rollout.agent.num_workers"] = s.rollout_workers
    merged.update(flatten(verl_part))
    for key, value in merged.items():  # Ray refuses a runtime_env variable that is not a string, deep in ray.init
        if key.lstrip("+").startswith(RUNTIME_ENV.lstrip("+")) and value is not None and not isinstance(value, str):
            merged[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    address = ray_address()
    sized = [k.lstrip("+") for k in merged if k.lstrip("+") in ("ray_kwargs.ray_init.num_cpus",
                                                                "ray_kwargs.ray_init.num_gpus") and merged[k] is not None]
    if address and sized:
        raise PlanError(f"{' and '.join(sized)} cannot be set for a run that attaches to the Ray cluster at "
                        f"RAY_ADDRESS={address}: Ray sizes a cluster only when it starts one. Give each node its "
                        f"CPUs and GPUs with `ray start --num-cpus=N --num-gpus=N`, or unset RAY_ADDRESS")
    return merged


def off_policy_overrides(settings: AgentrlSettings) -> dict[str, Any]:
    """``agentrl.max_off_policy_steps: N`` as verl's V1 trainer modes; N = 0 is the synchronous trainer.

    N > 0 selects verl 0.9.1's ``colocate_async`` trainer (``verl.trainer.ppo.v1.trainer_colocate_async``),
    the asynchronous mode that runs where the synchronous one does:

    - generation is always N batches ahead: N extra batches of prompts are handed to the rollout at the
      start (``num_warmup_batches``), and each step adds one more, so while a step trains on the groups
      that finished first, the slow ones (long answers, slow tools) are still running;
    - at each step's end the rollout is paused, not drained: unfinished generations are aborted and
      resumed with the new weights (verl's partial rollouts, ``FullyAsyncLLMServerClient``), and a tool
      call in flight keeps running meanwhile, so a slow tool does not hold up the update;
    - every rollout carries the policy versions that generated it; the sampler trains on nothing older than
      N + 1 versions (``max_off_policy_threshold``) and waits rather than dropping (``wait``), so no prompt
      of the epoch is lost;
    - its checkpoints hold the TransferQueue (pending and running groups): a resumed run re-issues the
      groups that were in flight at the save under their own ids instead of drawing new prompts.

    ``separate_async`` (verl's fully asynchronous mode, the successor of ``experimental/fully_async_policy``,
    where generation never pauses) needs a separate rollout resource pool and a network checkpoint
    engine (``nccl``, ``nixl``, ``mooncake``), none of which exists on a CPU machine; and
    ``experimental/one_step_off_policy`` is verl's older trainer, outside the V1 trainer agentrl runs.
    """
    n = settings.max_off_policy_steps
    if n <= 0:
        return {}
    return {
        "trainer.v1.trainer_mode": "colocate_async",
        "trainer.v1.colocate_async.num_warmup_batches": n,
        # staleness = (trained step - 1) - policy version; a rollout started just before the newest N
        # updates and finished after them is N + 1 versions behind at worst
        "trainer.v1.sampler.max_off_policy_threshold": n + 1,
        "trainer.v1.sampler.max_off_policy_strategy": "wait",
    }


def to_cli(overrides: dict[str, Any]) -> list[str]:
    from agentrl.config import hydra_value

    return [f"{key}={hydra_value(value)}" for key, value in overrides.items()]


VERL_AGENT_WORKERS = 8  # verl's default actor_rollout_ref.rollout.agent.num_workers


def sandbox_workers(overrides: dict[str, Any], cpus: int | None = None) -> int:
    """Workers per sandbox pool in each of verl's agent-loop processes: the machine's cores shared among
    them. Each process starts its own sandbox, and a pool of the full core count in every one of them
    would hold that many zygotes (sympy and math_verify in each heavy one) per process. verl spreads the
    processes over the nodes, so a node holds its share of them."""
    processes = int(overrides.get("actor_rollout_ref.rollout.agent.num_workers", VERL_AGENT_WORKERS))
    per_node = math.ceil(processes / max(1, int(overrides.get("trainer.nnodes", 1))))
    return max(2, (cpus or os.cpu_count() or 2) // max(1, per_node))


def child_env(run_dir: Path, attempt: int, overrides: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    # what the plan (or the user's `+ray_kwargs.ray_init.runtime_env.env_vars.X`) gives every Ray worker
    env.update({k[len(RUNTIME_ENV):]: str(v) for k, v in overrides.items() if k.startswith(RUNTIME_ENV)})
    env.setdefault("AGENTRL_SANDBOX_WORKERS", str(sandbox_workers(overrides)))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("WANDB_MODE", "disabled")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.setdefault("RAY_DEDUP_LOGS", "0")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env["AGENTRL_RUN_DIR"] = str(run_dir)  # agentrl.verl.pacing records which groups each step trained
    env["VERL_FILE_LOGGER_PATH"] = str(RunDir(run_dir).verl_metrics(attempt))
    return env


# Read inside verl's Ray workers (the agent loop, rewards, verl's file logger); besides these, every AGENTRL_*
# variable of the launching shell is agentrl's own setting and travels too.
WORKER_VARIABLES = ("VERL_FILE_LOGGER_PATH", "HF_HUB_OFFLINE", "WANDB_MODE", "TOKENIZERS_PARALLELISM",
                    "LITELLM_LOCAL_MODEL_COST_MAP", "VERL_PLATFORM")


def worker_env(env: dict[str, str]) -> dict[str, str]:
    """The part of ``child_env`` that verl's Ray workers must see. A cluster the run starts itself inherits
    verl's environment, but the workers of a cluster started with `ray start` inherit that command's
    environment instead, on every node: these reach them only through Ray's runtime environment."""
    return {k: v for k, v in sorted(env.items()) if k in WORKER_VARIABLES or k.startswith("AGENTRL_")}


def launch(run_dir: Path, attempt: int, overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The overrides and environment of one attempt's ``python -m verl.trainer.main_ppo``: the environment
    agentrl sets, also handed to every Ray worker on every node (``ray_kwargs.ray_init.runtime_env``)."""
    env = child_env(run_dir, attempt, overrides)
    runtime = {RUNTIME_ENV + key: value for key, value in worker_env(env).items()}
    return {**overrides, **runtime}, env
