"""Make a LoRA checkpoint's ``huggingface/`` folder a plain HuggingFace model.

    merge_lora_checkpoint(Path("runs/x/checkpoints/global_step_5/actor"))   # True when it merged

verl 0.9.1 writes the PEFT-wrapped state dict (``base_model.model.…q_proj.base_layer.weight``,
``lora_A``/``lora_B``) into ``actor/huggingface/model.safetensors`` beside a plain model config, so
``AutoModelForCausalLM.from_pretrained`` would silently load the base weights without the adapters (and warn
about every key). This folds each adapter into its base weight, ``W + (alpha / r) · B @ A``, under the
plain names, and keeps verl's original file as ``peft_model.safetensors.orig`` next to it.
"""

from __future__ import annotations

import json
from pathlib import Path

PREFIX = "base_model.model."


def merged_state(state: dict, scale: float) -> dict:
    """The plain state dict of a PEFT LoRA state dict (adapters folded in)."""
    out = {}
    for key, value in state.items():
        if ".lora_A." in key or ".lora_B." in key:
            continue
        name = key[len(PREFIX):] if key.startswith(PREFIX) else key
        if ".base_layer." in name:
            module = key.split(".base_layer.")[0]
            name = name.replace(".base_layer.", ".")
            a, b = state.get(f"{module}.lora_A.default.weight"), state.get(f"{module}.lora_B.default.weight")
            if name.endswith(".weight") and a is not None and b is not None:
                value = (value.float() + scale * (b.float() @ a.float())).to(value.dtype)
        out[name] = value.contiguous()
    return out


def merge_lora_checkpoint(actor_dir: Path) -> bool:
    """Fold the adapters of ``actor_dir/huggingface/model.safetensors`` in, if it still holds PEFT names.

    Decided by the file's own keys, not by an earlier merge's leftovers: verl writes a step's folder again when a
    resumed run trains that step again, over a file merged before. The original goes to
    ``peft_model.safetensors.orig`` (replacing an older one), and ``model.safetensors`` exists at every moment, so a
    kill in the middle leaves either the PEFT file (merged next time) or the merged one."""
    import os

    from agentrl.verl import checkpoints as layout

    meta_path = layout.lora_meta_files(actor_dir.parent)[0]
    weights = layout.hf_of(actor_dir.parent) / "model.safetensors"
    if not meta_path.exists() or not weights.exists():
        return False
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(weights), "pt") as fh:
        keys = list(fh.keys())
        if not any(".lora_A." in k for k in keys):
            return False
        state = {k: fh.get_tensor(k) for k in keys}
        metadata = fh.metadata() or {}
    meta = json.loads(meta_path.read_text())
    scale = float(meta.get("lora_alpha", meta["r"])) / float(meta["r"])
    merged = merged_state(state, scale)
    tmp, orig = weights.with_name("model.safetensors.tmp"), weights.with_name("peft_model.safetensors.orig")
    save_file(merged, str(tmp), metadata={**metadata, "format": "pt"})
    kept = weights.with_name("peft_model.safetensors.orig.tmp")
    kept.unlink(missing_ok=True)
    os.link(weights, kept)  # a second name for verl's file, then moved over any older original
    os.replace(kept, orig)
    os.replace(tmp, weights)
    return True
