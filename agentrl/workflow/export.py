"""``agentrl export RUN_DIR [--step N] OUT_DIR``: a standalone HuggingFace folder to serve or share.

    agentrl export runs/demo exported/demo
    vllm serve exported/demo --enable-auto-tool-choice --tool-call-parser hermes     # printed by the command

The folder holds the weights (a LoRA checkpoint merged into its base model), the tokenizer and chat
template, ``README.md`` (a model card: base model, step, training config, rewards, sha256 of the training
and validation data, final metrics) and the same facts as ``agentrl_export.json``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from agentrl.errors import AgentrlError
from agentrl.families import resolve_parser, vllm_parser
from agentrl.rundir import RunDir
from agentrl.workflow.models import checkpoint_dir, hf_model, is_run_dir, lora_meta
from agentrl.workflow.show import Output

_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


class ExportError(AgentrlError):
    """The run cannot be exported; the message says what is missing."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _last_metrics(run_dir: Path, step: int) -> dict:
    path = RunDir(run_dir).metrics
    best: dict = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row.get("step"), int) and row["step"] <= step:
                best = row
    keep = ("step", "reward_mean", "reward_std", "tool_calls_per_rollout", "response_length", "unscorable")
    return {k: v for k, v in best.items() if k in keep or k.startswith(("reward/", "val"))}


def export(run_dir: str, out_dir: str, *, step: int | None, out: Output, force: bool = False) -> dict:
    run = Path(run_dir)
    if not is_run_dir(run):
        raise ExportError(f"{run_dir} is not a run directory (no checkpoints/ or agentrl_spec.json); "
                          f"give the folder `agentrl train` wrote, e.g. runs/demo")
    ckpt = checkpoint_dir(run, step)
    step = int(ckpt.name.split("_")[-1])
    lora = lora_meta(ckpt) is not None
    src = hf_model(ckpt, run)
    dst = Path(out_dir)
    if dst.exists() and any(dst.iterdir()):
        if not force:
            raise ExportError(f"{out_dir} exists and is not empty; choose a new folder or pass --force")
        shutil.rmtree(dst)
    # verl's own copy of a LoRA checkpoint's weights (kept beside the merged file) is no part of the model
    shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.orig"))
    _config_dtype_of_weights(dst)
    config = yaml.safe_load(RunDir(run).config.read_text()) if RunDir(run).config.is_file() else {}
    settings = config.get("agentrl") or {}
    base = settings.get("model")
    if not any((dst / f).is_file() for f in _TEMPLATE_FILES) and base:
        for f in _TEMPLATE_FILES:  # the chat template carries the tool-call format the model learned
            if (Path(base) / f).is_file():
                shutil.copy2(Path(base) / f, dst / f)
    if not any((dst / f).is_file() for f in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        raise ExportError(f"{src} has no tokenizer files; the export would not load on its own")
    data = {}
    for name in ("train.jsonl", "val.jsonl"):
        if (run / "data" / name).is_file():
            data[name] = {"sha256": sha256(run / "data" / name),
                          "rows": sum(1 for line in (run / "data" / name).open() if line.strip())}
    parser = vllm_parser(resolve_parser((settings.get("agent") or {}).get("tool_parser", "auto"), base))
    serve = f"vllm serve {dst} --served-model-name {settings.get('name', 'agentrl')} --enable-auto-tool-choice --tool-call-parser {parser}"
    info = {"run_dir": str(run.resolve()), "step": step, "checkpoint": str(ckpt), "lora_merged": lora, "base_model": base,
            "rewards": settings.get("rewards"), "tools": settings.get("tools"), "data": data,
            "final_metrics": _last_metrics(run, step), "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "serve": serve, "training_config": config}
    (dst / "agentrl_export.json").write_text(json.dumps(info, indent=2, default=str))
    (dst / "README.md").write_text(model_card(info))
    out.table(f"exported {run_dir} step {step} → {dst}", ["", "value"], [
        ["weights", "LoRA merged into the base model" if lora else "full fine-tune"], ["base model", base],
        ["final reward (training)", _fmt(info["final_metrics"].get("reward_mean"))],
        *[[f"data {k}", f"{v['rows']} rows, sha256 {v['sha256'][:12]}…"] for k, v in data.items()]])
    out.line("serve it with vLLM:")
    out.line(f"  {serve}")
    out.emit({k: v for k, v in info.items() if k != "training_config"} | {"out_dir": str(dst)})
    return info


def _config_dtype_of_weights(folder: Path) -> None:
    """config.json names the dtype the weights are stored in. verl writes the base model's config (often
    bfloat16) beside float32 weights, and ``from_pretrained`` would then load them cast to bfloat16."""
    from safetensors import safe_open

    dtypes = set()
    for weights in folder.glob("*.safetensors"):
        with safe_open(str(weights), "pt") as fh:
            dtypes |= {fh.get_slice(k).get_dtype() for k in fh.keys()}
    names = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
    floats = {names[d] for d in dtypes if d in names}
    config_path = folder / "config.json"
    if len(floats) != 1 or not config_path.is_file():
        return
    config = json.loads(config_path.read_text())
    (dtype,) = floats
    keys = [k for k in ("torch_dtype", "dtype") if k in config] or ["torch_dtype"]
    if any(config.get(k) != dtype for k in keys):
        config.update({k: dtype for k in keys})
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else "–" if value is None else str(value)


def model_card(info: dict[str, Any]) -> str:
    cfg = info["training_config"].get("agentrl") or {}
    settings = {k: cfg.get(k) for k in ("batch_size", "samples_per_prompt", "max_steps", "epochs", "learning_rate",
                                        "temperature", "kl_coef", "max_prompt_length", "max_response_length", "lora",
                                        "agent", "seed") if k in cfg}
    metrics = "\n".join(f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |"
                        for k, v in info["final_metrics"].items()) or "| (no metrics.jsonl) | |"
    data = "\n".join(f"| {k} | {v['rows']} | `{v['sha256']}` |" for k, v in info["data"].items())
    return f"""---
library_name: transformers
tags: [agentrl, grpo, tool-use]
---
# {cfg.get('name', 'agentrl model')} (step {info['step']})

Trained with agentrl (GRPO on verl) from `{info['base_model']}`{' with LoRA, merged into the base weights' if info['lora_merged'] else ''}.

## Serve

```
{info['serve']}
```

## Rewards

```yaml
{yaml.safe_dump(info['rewards'], sort_keys=False).strip()}
```

Tools: `{json.dumps(info['tools'])}`

## Training settings

```yaml
{yaml.safe_dump(settings, sort_keys=False).strip()}
```

The full resolved config (verl overrides included) is in `agentrl_export.json`.

## Data

| file | rows | sha256 |
|---|---|---|
{data}

## Final metrics (training step {info['final_metrics'].get('step', info['step'])})

| metric | value |
|---|---|
{metrics}
"""
