"""The trainer's dtype follows the CPU: bfloat16 only where the CPU computes it natively.

The CPU is mocked here (flag sets as /proc/cpuinfo spells them on real machines), so these run on any CPU kind.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from agentrl import precision
from agentrl.config import AgentrlSettings
from agentrl.precision import CPU_ROLLOUT_DTYPE, CpuKind, choose, read_cpu, vllm_cpu_problem
from agentrl.verl.args import build_overrides

ZEN3 = CpuKind("x86_64", "AMD EPYC 7B13", frozenset("fpu sse4_2 avx avx2 fma f16c bmi2".split()))
SKYLAKE_SP = CpuKind("x86_64", "Intel Xeon Platinum 8175M",
                     frozenset("avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512cd".split()))
ZEN4 = CpuKind("x86_64", "AMD EPYC 9B14", frozenset("avx2 avx512f avx512bw avx512_vnni avx512_bf16".split()))
SAPPHIRE_RAPIDS = CpuKind("x86_64", "Intel Xeon Platinum 8481C",
                          frozenset("avx2 avx512f avx512_vnni amx_bf16 amx_tile amx_int8".split()))
GRAVITON3 = CpuKind("aarch64", "", frozenset("fp asimd sve bf16 i8mm".split()))
GRAVITON2 = CpuKind("aarch64", "", frozenset("fp asimd asimddp".split()))
OLD_X86 = CpuKind("x86_64", "Intel Xeon E5-2670", frozenset("sse4_2 avx".split()))


@pytest.mark.parametrize("cpu, expected", [
    (ZEN3, "float32"), (SKYLAKE_SP, "float32"), (GRAVITON2, "float32"), (OLD_X86, "float32"),
    (ZEN4, "bfloat16"), (SAPPHIRE_RAPIDS, "bfloat16"), (GRAVITON3, "bfloat16"),
])
def test_auto_trains_in_bfloat16_only_where_the_cpu_has_it(cpu, expected):
    chosen = choose("auto", cpu=cpu, env={})
    assert chosen.dtype == expected
    assert chosen.native_bf16 == (expected == "bfloat16")


@pytest.mark.parametrize("cap", ["AVX2", "avx2", "AVX512_CORE", "AVX512_CORE_VNNI"])
def test_onednn_capped_below_its_bf16_instructions_means_emulated(cap):
    chosen = choose("auto", cpu=ZEN4, env={"ONEDNN_MAX_CPU_ISA": cap})
    assert chosen.dtype == "float32" and "ONEDNN_MAX_CPU_ISA" in chosen.reason
    assert choose("auto", cpu=ZEN4, env={"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}).dtype == "bfloat16"


def test_an_explicit_setting_wins_and_the_line_says_why():
    forced = choose("bfloat16", cpu=ZEN3, env={})
    assert forced.dtype == "bfloat16" and "emulates" in forced.line()
    assert choose("float32", cpu=ZEN4, env={}).dtype == "float32"
    line = choose("auto", cpu=ZEN3, env={}).line()
    assert "float32" in line and "AVX2" in line and "emulated" in line and "agentrl.dtype: bfloat16" in line
    with pytest.raises(Exception, match="auto, float32, bfloat16"):
        choose("fp8", cpu=ZEN3, env={})


def test_cpuinfo_is_read_for_model_and_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
                    "flags\t\t: fpu sse4_2 avx avx2 fma\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
                    "flags\t\t: fpu sse4_2 avx avx2 fma\n")
    cpu = read_cpu(str(info))
    assert cpu.model == "AMD EPYC 7B13" and "avx2" in cpu.flags and not cpu.hardware_bf16
    assert read_cpu(str(tmp_path / "missing")).flags == frozenset()


def _settings(**kw) -> AgentrlSettings:
    return AgentrlSettings(model="m", train_data="t", rewards=["math"], **kw)


def _overrides(monkeypatch, cpu: CpuKind, **kw) -> dict:
    monkeypatch.setattr(precision, "read_cpu", lambda *a: cpu)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    return build_overrides(_settings(**kw), {}, model_path="m", train_file="t.parquet", val_file=None,
                           spec_path="s.json", run_dir=Path("/tmp/run"), cpu=True, train_rows=64)


def _trainer_dtypes(overrides: dict) -> dict:
    """What verl's actor and reference engines are built with, from verl's own config classes."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from agentrl.verl.args import to_cli
    from verl.utils.config import omega_conf_to_dataclass

    keys = {k: v for k, v in overrides.items() if "fsdp_config.mixed_precision" in k}
    config_dir = Path(next(iter(importlib.util.find_spec("verl").submodule_search_locations))) / "trainer" / "config"
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(config_name="ppo_trainer", overrides=to_cli(keys))
    GlobalHydra.instance().clear()
    return {role: omega_conf_to_dataclass(cfg.actor_rollout_ref[role].fsdp_config).mixed_precision["param_dtype"]
            for role in ("actor", "ref")}


def test_an_emulating_cpu_trains_the_actor_and_reference_in_float32(monkeypatch):
    assert _trainer_dtypes(_overrides(monkeypatch, ZEN3)) == {"actor": "fp32", "ref": "fp32"}
    assert _trainer_dtypes(_overrides(monkeypatch, ZEN4)) == {"actor": "bf16", "ref": "bf16"}
    assert _trainer_dtypes(_overrides(monkeypatch, ZEN4, dtype="float32")) == {"actor": "fp32", "ref": "fp32"}


def test_a_users_own_verl_key_still_wins(monkeypatch):
    monkeypatch.setattr(precision, "read_cpu", lambda *a: ZEN3)
    mine = {"actor_rollout_ref": {"actor": {"fsdp_config": {"mixed_precision": {"param_dtype": "bf16"}}}}}
    overrides = build_overrides(_settings(), mine, model_path="m", train_file="t", val_file=None, spec_path="s",
                                run_dir=Path("/tmp/r"), cpu=True, train_rows=64)
    assert _trainer_dtypes(overrides) == {"actor": "bf16", "ref": "fp32"}


def test_the_rollout_and_eval_engines_sample_in_the_cpu_rollout_dtype(monkeypatch):
    from agentrl.verl import gpu_plan

    assert CPU_ROLLOUT_DTYPE == "float32"
    vllm_keys = gpu_plan.cpu_vllm_overrides(_settings(rollout="vllm"))
    assert vllm_keys["actor_rollout_ref.rollout.dtype"] == CPU_ROLLOUT_DTYPE
    for cpu in (ZEN3, ZEN4):  # the same on both kinds
        assert _overrides(monkeypatch, cpu, rollout="vllm")["actor_rollout_ref.rollout.dtype"] == CPU_ROLLOUT_DTYPE


def test_the_transformers_engine_loads_the_model_in_the_rollout_dtype():
    import torch

    from agentrl.runner import resolve_model
    from agentrl.verl.engine import open_engine

    model_path, _ = resolve_model("demo")
    engine = open_engine(model_path, prompt_length=64, response_length=8, kind="transformers")
    try:
        dtypes = {p.dtype for p in engine.server.batcher.model.parameters()}
    finally:
        engine.close()
    assert dtypes == {getattr(torch, CPU_ROLLOUT_DTYPE)}


def test_vllm_says_what_the_cpu_lacks():
    assert "AVX2" in vllm_cpu_problem(OLD_X86)
    assert vllm_cpu_problem(ZEN3) is None and vllm_cpu_problem(ZEN4) is None
