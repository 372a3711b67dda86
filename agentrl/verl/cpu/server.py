"""The CPU rollout's server: a Ray actor serving token-in/token-out generation from a transformers model.

Its module imports neither torch nor verl until the server starts (``launch_server``): every process that is
handed a handle to the server, verl's request router among them (agentrl/verl/router.py), imports the module of
the handle's class to read its methods, and would otherwise import torch and verl only to pass the handle on.
The replica that launches it, and the adapter that pushes weights to it, are in ``rollout.py``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional

from agentrl.precision import CPU_ROLLOUT_DTYPE
from agentrl.verl.cpu import ROLLOUT_NAME as NAME

if TYPE_CHECKING:
    import torch
    from verl.workers.rollout.replica import TokenOutput

    from agentrl.verl.cpu.generation import Batcher


def server_actor_name(replica_rank: int, node_rank: int = 0) -> str:
    return f"{NAME}_server_{replica_rank}_{node_rank}"


class CpuRolloutServer:
    """One rollout server: holds a copy of the policy and samples from it in batches."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int = 0, **_: Any) -> None:
        self.config = config
        self.model_config = model_config
        self.replica_rank = replica_rank
        self.global_steps: int = 0
        self.batcher: Optional[Batcher] = None
        self.weight_syncs = 0

    def launch_server(self, **_: Any) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from verl.workers.rollout.replica import TokenOutput  # noqa: F401  (generate's reply: imported now, not at the first request)

        from agentrl.verl.cpu.generation import Batcher

        path = self.model_config.local_path if hasattr(self.model_config, "local_path") else self.model_config["path"]
        path = path or self.model_config.path
        torch.set_num_threads(max(1, int(os.environ.get("AGENTRL_ROLLOUT_THREADS", os.cpu_count() or 1))))
        from agentrl import malloc

        malloc.tune()  # a growing KV cache reuses freed memory: about half the time of a batch (agentrl.malloc)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, CPU_ROLLOUT_DTYPE),
                                                     attn_implementation="sdpa")
        model.eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        eos = set()
        for source in (tokenizer.eos_token_id, getattr(model.generation_config, "eos_token_id", None)):
            if isinstance(source, int):
                eos.add(source)
            elif isinstance(source, (list, tuple)):
                eos.update(int(x) for x in source)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (min(eos) if eos else 0)
        seed = int(getattr(self.config, "seed", 0) or 0) + self.replica_rank
        self.batcher = Batcher(model, pad_id=pad, eos_ids=eos, seed=seed,
                               max_batch=int(getattr(self.config, "max_num_seqs", 64) or 64))

    def get_server_address(self) -> tuple[str, int]:
        return f"{NAME}-replica-{self.replica_rank}", 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       image_data: Any = None, video_data: Any = None, **_: Any) -> TokenOutput:
        from verl.workers.rollout.replica import TokenOutput

        from agentrl.verl.cpu.generation import Request

        if image_data is not None or video_data is not None:
            raise ValueError("the agentrl CPU rollout serves text models only")
        assert self.batcher is not None, "launch_server() was not called"
        params = dict(sampling_params)
        room = int(self.config.prompt_length) + int(self.config.response_length) - len(prompt_ids)
        max_tokens = params.pop("max_tokens", params.pop("max_new_tokens", None))
        if max_tokens is None:
            max_tokens = min(int(self.config.response_length), room)
        max_tokens = max(1, min(int(max_tokens), max(room, 1)))
        request = Request(
            prompt_ids=[int(t) for t in prompt_ids],
            max_tokens=max_tokens,
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0) or 1.0),
            top_k=int(params.get("top_k", -1) or -1),
            stop_token_ids=tuple(int(t) for t in (params.get("stop_token_ids") or ())),
            ignore_eos=bool(params.get("ignore_eos", False)),
        )
        result = await self.batcher.submit(request)
        return TokenOutput(
            token_ids=result.token_ids,
            log_probs=result.log_probs,
            stop_reason="completed",
            # the version of the weights that generated it, not the newest: a weight update may land
            # between the batch and this reply
            extra_fields={"global_steps": result.version if result.version is not None else self.global_steps},
        )

    def load_weights(self, state: dict[str, torch.Tensor], global_steps: Optional[int] = None) -> int:
        assert self.batcher is not None, "launch_server() was not called"
        loaded = self.batcher.load_weights(state, global_steps)
        self.weight_syncs += 1
        if global_steps is not None:
            self.global_steps = global_steps
        return loaded

    def stats(self) -> dict[str, int]:
        b = self.batcher
        return {"batches": b.batches if b else 0, "sub_batches": b.sub_batches if b else 0,
                "sequences": b.sequences if b else 0, "weight_syncs": self.weight_syncs}

    # The control surface verl calls on every rollout server; the CPU server has no device
    # memory to free or KV cache kept between requests, so these only keep the protocol.
    async def wake_up(self, *a: Any, **k: Any) -> None: ...
    async def sleep(self, *a: Any, **k: Any) -> None: ...
    async def clear_kv_cache(self, *a: Any, **k: Any) -> None: ...
    async def release_kv_cache(self, *a: Any, **k: Any) -> None: ...
    async def resume_kv_cache(self, *a: Any, **k: Any) -> None: ...
    async def abort_all_requests(self, *a: Any, **k: Any) -> None: ...
    async def resume_generation(self, *a: Any, **k: Any) -> None: ...
    async def start_profile(self, *a: Any, **k: Any) -> None: ...
    async def stop_profile(self, *a: Any, **k: Any) -> None: ...

    def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps
        if self.batcher is not None:
            self.batcher.version = global_steps
