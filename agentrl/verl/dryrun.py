"""``agentrl train CONFIG --dry-run``: everything ``train`` checks, then verl's own composition and validation.

    $ agentrl train configs/demo.yaml --dry-run agentrl.device=gpu agentrl.gpus_per_node=1
    # agentrl dry run of configs/demo.yaml: nothing was started
    # GPU plan: 1 node(s) × 1 GPU(s) = 1; rollout vllm (tensor parallel 1, gpu_memory_utilization 0.4)
    # ...
    # verl: validate_config passed
    # environment for python -m verl.trainer.main_ppo:
    #   AGENTRL_DEVICE=gpu
    algorithm:
      adv_estimator: agentrl_grpo
    ...

The printed YAML is a plain verl config: what belongs to this one run alone, the run directory handed to every
Ray worker (``AGENTRL_RUN_DIR``, ``VERL_FILE_LOGGER_PATH`` in ``ray_kwargs.ray_init.runtime_env.env_vars``), is
validated with the rest but printed apart, as ``#`` lines of overrides that ``agentrl train`` adds
(:data:`RUN_SPECIFIC`), so the YAML can start a verl config of one's own without naming a run directory that
may not exist.

The dataset, rewards, tools and model are checked exactly as ``agentrl train`` checks them (the run directory's
data/ and config files are written as ``train`` writes them). The overrides are then composed with verl's
``ppo_trainer`` Hydra config, as ``verl.trainer.main_ppo`` composes them, and passed to verl's
``validate_config`` and its RolloutConfig. The printed document is that config as YAML (every non-config line is a
``#`` comment, so the output still parses as YAML). Ray is never started; this works on a machine with no GPU.
With ``RAY_ADDRESS`` set, the cluster's nodes are read (not changed) and checked against the plan, as ``train``
checks them before it starts verl.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import os
import sys
from typing import Any, TextIO

from agentrl.errors import AgentrlError


CLUSTER_TIMEOUT_S = 60.0  # as `train` waits: a loaded head node can take tens of seconds to answer
# Ray worker variables that name this run's own directory: `agentrl train` sets them per run and attempt
RUN_SPECIFIC = ("AGENTRL_RUN_DIR", "VERL_FILE_LOGGER_PATH")


class DryRunError(AgentrlError):
    """verl rejected the composed config; the message has verl's reason and the keys to look at."""


def compose(overrides: dict[str, Any]):
    """verl's ppo_trainer config with ``overrides`` applied, as main_ppo's @hydra.main builds it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from agentrl.verl.args import to_cli

    GlobalHydra.instance().clear()
    try:
        with initialize_config_module(config_module="verl.trainer.config", version_base=None):
            return hydra_compose(config_name="ppo_trainer", overrides=to_cli(overrides))
    except Exception as exc:  # hydra's own errors name the override it could not apply
        raise DryRunError(f"verl's Hydra config rejected the overrides: {exc}") from None
    finally:
        GlobalHydra.instance().clear()


def validate(cfg) -> list[str]:
    """Run verl's own checks on ``cfg``; returns notes on what could not be checked on this machine."""
    from omegaconf import OmegaConf, open_dict
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    notes = []
    checked = cfg
    model = cfg.actor_rollout_ref.model
    lora_rank = model.get("lora", {}).get("rank", 0) or model.get("lora_rank", 0)
    if (lora_rank > 0 and cfg.actor_rollout_ref.rollout.name == "vllm"
            and importlib.util.find_spec("vllm") is None):
        # verl checks the LoRA rank against vLLM's own list, importing vLLM to read it. Without vLLM here,
        # that one check uses verl's fallback list; everything else is validated unchanged.
        from typing import Literal, get_args

        allowed = get_args(Literal[1, 8, 16, 32, 64, 128, 256, 320, 512])  # verl's fallback MaxLoRARanks
        if lora_rank > max(allowed):
            raise DryRunError(f"agentrl.lora.rank={lora_rank}: vLLM serves LoRA ranks up to {max(allowed)}")
        checked = copy.deepcopy(cfg)
        with open_dict(checked):
            checked.actor_rollout_ref.model.lora.merge = True
        notes.append(f"LoRA rank {lora_rank} checked against verl's list of vLLM ranks (vLLM is not installed here)")
    try:
        with contextlib.redirect_stdout(sys.stderr):
            validate_config(config=checked, use_reference_policy=need_reference_policy(checked),
                            use_critic=need_critic(checked))
            omega_conf_to_dataclass(checked.actor_rollout_ref.rollout)
    except (AssertionError, ValueError, TypeError, KeyError) as exc:
        raise DryRunError(f"verl's validate_config rejected the composed config: {exc}") from None
    OmegaConf.resolve(copy.deepcopy(cfg))  # every ${...} interpolation must resolve, as main_ppo's TaskRunner does
    return notes


def split_run_specific(cfg) -> tuple[Any, dict[str, str]]:
    """``(plain, run_specific)``: a copy of the composed ``cfg`` without the :data:`RUN_SPECIFIC` worker
    variables, and those as the verl overrides ``agentrl train`` adds for this run."""
    from omegaconf import open_dict

    from agentrl.verl.args import RUNTIME_ENV

    plain = copy.deepcopy(cfg)
    env_vars = plain.get("ray_kwargs", {}).get("ray_init", {}).get("runtime_env", {}).get("env_vars") or {}
    run_specific = {}
    with open_dict(plain):
        for name in RUN_SPECIFIC:
            if name in env_vars:
                run_specific[RUNTIME_ENV + name] = str(env_vars[name])
                del env_vars[name]
    return plain, run_specific


def dry_run(config_path: str, overrides: list[str], out: TextIO | None = None) -> int:
    from omegaconf import OmegaConf

    out = out or sys.stdout
    from agentrl.verl import gpu_plan as gp
    from agentrl.runner import prepare
    from agentrl.verl.args import launch, ray_address
    from agentrl.verl.cluster import ClusterError, check_cluster

    plan = prepare(config_path, overrides)
    plan["lock"].close()
    verl_overrides, env = launch(plan["run_dir"], 1, plan["overrides"])
    lines = [f"agentrl dry run of {config_path}: nothing was started",
             f"run directory {plan['run_dir']}; {plan['rows']} training rows; {plan['total_steps']} steps"]
    if plan["cpu"] and verl_overrides.get("actor_rollout_ref.rollout.name") == "vllm":
        lines.append("device: CPU (agentrl's cpu platform) with verl's vLLM rollout (vLLM's CPU build); it differs "
                     "from a 1-GPU plan only in " + ", ".join(gp.CPU_VLLM_KEYS) + " and the vLLM CPU environment")
        problem = gp.cpu_vllm_problem()
        if problem:
            lines.append(f"vLLM: `agentrl train` would stop here, before Ray: {problem}")
    elif plan["cpu"]:
        lines.append("device: CPU (agentrl's cpu platform and agentrl_cpu rollout)")
    else:
        gpus = gp.plan_gpus(plan["settings"])
        lines += gp.describe_run(plan["settings"], verl_overrides)
        problem = gp.vllm_problem()
        if problem:
            lines.append(f"vLLM: `agentrl train` would stop here, before Ray: {problem}")
        elif gp.vllm_warning():
            lines.append(f"vLLM: {gp.vllm_warning()}")
        if not gpus.ray_address and not gp.visible_gpus():
            lines.append("no GPU is visible here: `agentrl train` would stop before Ray "
                         "(this plan is for a GPU machine)")
    address = ray_address()
    if address:
        try:
            lines += check_cluster(address, verl_overrides, timeout=CLUSTER_TIMEOUT_S)
        except ClusterError as exc:
            lines += f"`agentrl train` would stop here, before verl: {exc}".splitlines()
    cfg = compose(verl_overrides)
    lines += [f"verl: {note}" for note in validate(cfg)]
    lines.append("verl: validate_config passed")
    changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
    lines.append("environment for python -m verl.trainer.main_ppo (what agentrl sets; the rest is inherited; "
                 "every Ray worker gets ray_kwargs.ray_init.runtime_env.env_vars below):")
    lines += [f"  {k}={v}" for k, v in sorted(changed.items())]
    plain, run_specific = split_run_specific(cfg)
    lines.append("this run only (`agentrl train` adds these overrides for this run directory; the config below "
                 "leaves them out, so it can start a verl config of your own):")
    lines += [f"  {k}={v}" for k, v in run_specific.items()]
    try:
        text = OmegaConf.to_yaml(plain, resolve=True)
    except Exception:
        text = OmegaConf.to_yaml(plain)
    out.write("".join(f"# {line}\n" for line in lines))
    out.write(text)
    out.flush()
    return 0
