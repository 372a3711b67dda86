"""Merge a LoRA checkpoint into its base model: one plain HuggingFace folder any engine loads.

    merge(Path("runs/x/checkpoints/global_step_40/actor/huggingface"), Path("merged/"),
          base="./Qwen2.5-0.5B", meta={"r": 16, "lora_alpha": 32})

verl saves a LoRA actor's full state dict (``...q_proj.base_layer.weight``, ``...q_proj.lora_A.default.weight``)
into ``actor/huggingface``; a plain ``from_pretrained`` would not recognise those names. peft rebuilds the
adapter on the base model with the rank and alpha verl recorded, loads the saved tensors, and
``merge_and_unload`` folds ``B @ A * alpha / r`` into each base weight.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentrl.errors import AgentrlError

_PREFIX = re.compile(r"^(base_model\.model\.)+")


class LoraMergeError(AgentrlError):
    """The LoRA checkpoint does not fit its base model."""


def _canonical(key: str) -> str:
    return _PREFIX.sub("", key).replace(".default.", ".")


def _saved_tensors(hf: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    state: dict[str, Any] = {}
    for f in sorted(hf.glob("*.safetensors")):
        state.update(load_file(str(f)))
    if not state:
        raise LoraMergeError(f"{hf}: no *.safetensors weights to merge")
    return state


def merge(hf: Path, out: Path, *, base: str, meta: dict | None = None, run_config: dict | None = None) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    saved = {_canonical(k): v for k, v in _saved_tensors(hf).items()}
    lora_keys = [k for k in saved if ".lora_A." in k]
    if not lora_keys:
        raise LoraMergeError(f"{hf}: no lora_A weights; this checkpoint is not a LoRA checkpoint")
    targets = sorted({k.split(".lora_A.")[0].rsplit(".", 1)[-1] for k in lora_keys})
    lora_cfg = ((run_config or {}).get("agentrl") or {}).get("lora") or {}
    meta = meta or {}
    rank = int(meta.get("r") or lora_cfg.get("rank") or saved[lora_keys[0]].shape[0])
    alpha = int(meta.get("lora_alpha") or lora_cfg.get("alpha") or rank)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets))
    state = peft_model.state_dict()
    present = {state[k].data_ptr() for k in state if _canonical(k) in saved}
    # tied weights (lm_head = embeddings) are saved once; the copy shares storage with a present tensor
    missing = [k for k in state if _canonical(k) not in saved and state[k].data_ptr() not in present]
    if missing:
        raise LoraMergeError(f"{hf}: the checkpoint lacks {len(missing)} of the adapted model's tensors "
                             f"(e.g. {missing[0]}); was it trained from {base}?")
    peft_model.load_state_dict({k: saved[_canonical(k)].to(state[k].dtype) for k in state if _canonical(k) in saved},
                               strict=False)
    merged = peft_model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(hf)).save_pretrained(str(out))
    return out
