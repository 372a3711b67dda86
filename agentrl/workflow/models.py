"""Which model and which data a workflow command means.

    settings = load_settings("configs/demo.yaml")        # the demo's model and data resolved to paths
    resolve_model("base", settings)                      # the config's model
    resolve_model("runs/demo", settings)                 # the run's last complete checkpoint
    resolve_model("runs/demo:20", settings)              # its step-20 checkpoint
    resolve_model("./exported", settings)                # any HuggingFace folder

A LoRA checkpoint is merged into its base model once (cached next to the checkpoint) so every
engine and ``agentrl export`` get a plain model folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentrl.errors import AgentrlError
from agentrl.rundir import RunDir
from agentrl.verl import checkpoints as layout


class ModelSpecError(AgentrlError):
    """``--model`` names nothing loadable; the message says what was looked for."""


def load_settings(config: str, overrides: list[str] = ()) -> Any:
    """The config's agentrl block with ``model: demo`` and ``train_data/val_data: demo`` made into paths."""
    from agentrl.config import load_config
    from agentrl.runner import resolve_model as resolve_base

    settings, _, _ = load_config(config, list(overrides))
    model_path, demo = resolve_base(settings.model)
    settings.model = model_path
    for attr, key in (("train_data", "train_path"), ("val_data", "val_path")):
        if getattr(settings, attr) == "demo":
            setattr(settings, attr, demo.get(key))
    return settings


def eval_data(settings: Any, data: str | None, config: str) -> str:
    if data:
        return data
    if not settings.val_data:
        raise AgentrlError(f"{config}: agentrl.val_data is not set; name a validation set there or pass --data FILE")
    return settings.val_data


def checkpoint_dir(run_dir: Path, step: int | None = None) -> Path:
    """``checkpoints/global_step_N`` of a run: step N, or the last complete one."""
    if step is None:
        status = RunDir(run_dir).checkpoint_status
        if status.is_file():
            info = json.loads(status.read_text())
            if info.get("complete"):
                step = int(info["step"])
        if step is None:
            found = layout.steps(RunDir(run_dir).checkpoints)
            if not found:
                raise ModelSpecError(f"{run_dir} has no checkpoints; train with agentrl.save_every set, "
                                     f"or let the run finish (it saves at the end)")
            step = found[-1][0]
    path = layout.step_dir(RunDir(run_dir).checkpoints, step)
    if not layout.hf_of(path).is_dir():
        have = [p.name for _, p in layout.steps(RunDir(run_dir).checkpoints)]
        raise ModelSpecError(f"{run_dir}: no HuggingFace model for step {step} ({layout.hf_of(path)}); "
                             f"checkpoints there: {', '.join(have) or 'none'}")
    return path


def split_run_spec(text: str) -> tuple[Path, int | None]:
    """``RUN_DIR`` or ``RUN_DIR:STEP``."""
    head, sep, tail = text.rpartition(":")
    if sep and tail.isdigit() and head:
        return Path(head), int(tail)
    return Path(text), None


def is_run_dir(path: Path) -> bool:
    return (path / "checkpoints").is_dir() or RunDir(path).spec.is_file()


def resolve_model(spec: str, settings: Any | None = None) -> str:
    """A loadable HuggingFace folder for ``base``, ``RUN_DIR[:STEP]`` or a model folder."""
    if spec == "base":
        if settings is None:
            raise ModelSpecError("--model base needs a config (its agentrl.model)")
        return settings.model
    run_dir, step = split_run_spec(spec)
    if is_run_dir(run_dir):
        return str(hf_model(checkpoint_dir(run_dir, step), run_dir))
    if (Path(spec) / "config.json").is_file():
        return spec
    raise ModelSpecError(f"--model {spec!r} is neither 'base', a run directory (with checkpoints/), "
                         f"RUN_DIR:STEP, nor a HuggingFace model folder (with config.json)")


def lora_meta(ckpt: Path) -> dict | None:
    """Rank and alpha of a LoRA run (verl writes ``lora_train_meta.json`` beside the actor state); None for
    a full fine-tune."""
    for path in layout.lora_meta_files(ckpt):
        if path.is_file():
            return json.loads(path.read_text())
    return {} if has_adapters(layout.hf_of(ckpt)) else None


def has_adapters(hf: Path) -> bool:
    """True while the folder still holds PEFT-named adapter tensors (not yet merged into the weights)."""
    from safetensors import safe_open

    for f in sorted(hf.glob("*.safetensors")):
        with safe_open(str(f), "pt") as fh:
            if any(".lora_A." in k for k in fh.keys()):
                return True
    return False


def hf_model(ckpt: Path, run_dir: Path) -> Path:
    """The checkpoint's HF folder, or (unmerged LoRA) the merged model cached in ``merged/`` beside it."""
    hf = layout.hf_of(ckpt)
    meta = lora_meta(ckpt)
    if meta is None or not has_adapters(hf):
        return hf
    merged = ckpt / "merged"
    if not (merged / "config.json").is_file():
        from agentrl.workflow.lora import merge

        merge(hf, merged, base=_run_base_model(run_dir), meta=meta, run_config=_run_config(run_dir))
    return merged


def _run_config(run_dir: Path) -> dict:
    import yaml

    path = RunDir(run_dir).config
    if not path.is_file():
        raise ModelSpecError(f"{run_dir}: no config.yaml; is this a directory `agentrl train` made?")
    return yaml.safe_load(path.read_text()) or {}


def _run_base_model(run_dir: Path) -> str:
    model = (_run_config(run_dir).get("agentrl") or {}).get("model")
    if not model or not os.path.isdir(model):
        raise ModelSpecError(f"{run_dir}/config.yaml: agentrl.model {model!r} is not a folder; the LoRA "
                             f"checkpoint needs its base model to merge into")
    return model
