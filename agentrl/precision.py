"""Which dtype the model computes in on this CPU: bfloat16 only where the CPU does it natively.

    >>> avx512 = CpuKind(arch="x86_64", model="AMD EPYC", flags=frozenset({"avx2", "avx512f", "avx512_bf16"}))
    >>> zen3 = CpuKind(arch="x86_64", model="AMD EPYC", flags=frozenset({"avx2", "fma"}))
    >>> choose("auto", cpu=avx512, env={}).dtype, choose("auto", cpu=zen3, env={}).dtype
    ('bfloat16', 'float32')
    >>> choose("auto", cpu=avx512, env={"ONEDNN_MAX_CPU_ISA": "AVX2"}).dtype   # oneDNN told to stop at AVX2
    'float32'
    >>> choose("bfloat16", cpu=zen3, env={}).dtype                             # an explicit setting wins
    'bfloat16'

verl's FSDP engine trains with ``mixed_precision.param_dtype`` bf16 unless told otherwise. A CPU computes bfloat16
matmuls natively only with AVX-512 BF16 or AMX (x86) or the BF16 extension (Arm); elsewhere oneDNN emulates them,
measured on an AMD EPYC (Zen 3, AVX2 only): a 512x512 matmul at 1.3 GFLOP/s in bfloat16 against 123 in float32,
and the demo's training step 6x slower. So ``agentrl.dtype: auto`` (the default) trains in bfloat16 where the CPU
has it and in float32 where it would be emulated, and says which and why (:meth:`Precision.line`).

Rollouts and evaluation on the CPU sample in float32 on every CPU kind (:data:`CPU_ROLLOUT_DTYPE`): the CPU
rollout's log-probabilities are PPO's anchor (verl's bypass mode), and float32 keeps them the actor's own. The
setting changes only the trainer's compute dtype (actor and reference model).

Everything here reads ``/proc/cpuinfo`` and the environment; nothing imports torch.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from typing import Literal, Mapping, Optional

DtypeSetting = Literal["auto", "float32", "bfloat16"]

# The CPU rollout (transformers), verl's vLLM rollout on the CPU and the local eval engines sample in this dtype.
CPU_ROLLOUT_DTYPE = "float32"

# x86 flags (as /proc/cpuinfo spells them) under which oneDNN runs bfloat16 matmuls in hardware
X86_NATIVE_BF16 = ("avx512_bf16", "amx_bf16")
# ONEDNN_MAX_CPU_ISA values that stop oneDNN below its bfloat16 instructions (how an AVX-512 machine emulates an
# AVX2-only one: ONEDNN_MAX_CPU_ISA=AVX2 alone drops a 1024x1024 bfloat16 matmul from ~370 to ~0.7 GFLOP/s here)
ONEDNN_BELOW_BF16 = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE",
                               "AVX512_CORE_VNNI", "AVX512_MIC", "AVX512_MIC_4OPS"})


@dataclass(frozen=True)
class CpuKind:
    """What the CPU says of itself: its architecture, model name and feature flags."""

    arch: str
    model: str
    flags: frozenset[str] = field(default_factory=frozenset)

    @property
    def vector(self) -> str:
        """The widest vector extension, as the README's figures name the CPU kinds."""
        if self.arch in ("x86_64", "AMD64", "i686", "i386"):
            if "avx512f" in self.flags:
                return "AVX-512"
            if "avx2" in self.flags:
                return "AVX2"
            return "no AVX2"
        return self.arch

    @property
    def hardware_bf16(self) -> bool:
        if self.arch in ("aarch64", "arm64"):
            return "bf16" in self.flags
        return any(f in self.flags for f in X86_NATIVE_BF16)

    def describe(self) -> str:
        """``AMD EPYC, AVX-512 with native bf16`` / ``AMD EPYC, AVX2, bf16 emulated``."""
        name = self.model or "unknown CPU"
        return f"{name}, {self.vector} with native bf16" if self.hardware_bf16 else f"{name}, {self.vector}, bf16 emulated"


def read_cpu(cpuinfo: str = "/proc/cpuinfo") -> CpuKind:
    """This machine's CPU, from ``/proc/cpuinfo`` (x86 ``flags``, Arm ``Features``)."""
    model, flags = "", frozenset()
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu model") and not model:
                    model = value.strip()
                elif key in ("flags", "features") and not flags:
                    flags = frozenset(value.split())
                if model and flags:
                    break
    except OSError:
        pass
    return CpuKind(arch=platform.machine(), model=model, flags=flags)


@dataclass(frozen=True)
class Precision:
    """The trainer's compute dtype on this machine, and why."""

    dtype: Literal["float32", "bfloat16"]
    setting: str  # what agentrl.dtype said: auto, float32 or bfloat16
    native_bf16: bool  # bfloat16 runs in hardware here (flags, and not capped by ONEDNN_MAX_CPU_ISA)
    reason: str
    cpu: CpuKind

    @property
    def verl_short(self) -> str:
        return "fp32" if self.dtype == "float32" else "bf16"

    def verl_overrides(self) -> dict[str, dict[str, str]]:
        """verl's keys for it: the actor's and the reference model's FSDP mixed precision. verl's engine keeps
        float32 master weights either way (``model_dtype: fp32``); ``param_dtype`` is what forward and backward
        compute in, and with fp32 verl skips autocast altogether."""
        policy = {"param_dtype": self.verl_short, "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
        return {f"++actor_rollout_ref.{role}.fsdp_config.mixed_precision": dict(policy) for role in ("actor", "ref")}

    def line(self) -> str:
        """One console line: which dtype, why, and how to change it."""
        other = "bfloat16" if self.dtype == "float32" else "float32"
        return (f"precision: training in {self.dtype} ({self.reason}); rollouts and eval sample in "
                f"{CPU_ROLLOUT_DTYPE}. Set agentrl.dtype: {other} to override")


def choose(setting: str = "auto", *, cpu: Optional[CpuKind] = None,
           env: Optional[Mapping[str, str]] = None) -> Precision:
    """The dtype for ``agentrl.dtype`` = ``setting`` on this CPU (or the one given)."""
    cpu = cpu or read_cpu()
    env = os.environ if env is None else env
    cap = (env.get("ONEDNN_MAX_CPU_ISA") or "").strip().upper()
    capped = cap in ONEDNN_BELOW_BF16
    native = cpu.hardware_bf16 and not capped
    if setting not in ("auto", "float32", "bfloat16"):
        from agentrl.config import ConfigError

        raise ConfigError(f"agentrl.dtype: {setting!r} is not one of auto, float32, bfloat16")
    if setting != "auto":
        why = "set by agentrl.dtype"
        if setting == "bfloat16" and not native:
            why += ", though this CPU emulates bfloat16 (expect several times slower steps)"
        return Precision(setting, setting, native, why, cpu)  # type: ignore[arg-type]
    if native:
        return Precision("bfloat16", setting, True, cpu.describe(), cpu)
    if cpu.hardware_bf16 and capped:
        why = f"ONEDNN_MAX_CPU_ISA={cap} keeps oneDNN below this CPU's bfloat16 instructions, so bfloat16 is emulated"
    else:
        which = "the BF16 extension" if cpu.arch in ("aarch64", "arm64") else "AVX-512 BF16 or AMX"
        why = f"{cpu.describe()}: no {which}, so bfloat16 would be emulated, many times slower than float32"
    return Precision("float32", setting, False, why, cpu)


def vllm_cpu_problem(cpu: Optional[CpuKind] = None) -> Optional[str]:
    """What this CPU lacks for vLLM's CPU build (x86: AVX2 at least), or None."""
    cpu = cpu or read_cpu()
    if cpu.arch in ("x86_64", "AMD64") and cpu.flags and "avx2" not in cpu.flags:
        return (f"this CPU ({cpu.model or 'unknown'}) has no AVX2, which vLLM's CPU build needs on x86; use "
                f"agentrl.rollout=transformers")
    return None
