"""verl's checkpoint layout under a run's ``checkpoints/`` folder (verl 0.9.1), in one place: a verl release that
moves a file is fixed here. Imports nothing of verl: the job page, `agentrl export` and the watcher read it.

    root = RunDir(run).checkpoints
    latest_step(root)          # 5: verl's tracker file, written after the step's checkpoint is complete
    hf_dir(root, 5)            # checkpoints/global_step_5/actor/huggingface (the HF model, or LoRA adapters)
    steps(root)                # [(1, .../global_step_1), (5, .../global_step_5)]

Layout::

    latest_checkpointed_iteration.txt        the newest complete step (written last)
    global_step_N/actor/                      the actor's FSDP shards, optimizer, lora_train_meta.json (LoRA)
    global_step_N/actor/huggingface/          config.json, tokenizer, model.safetensors
"""

from __future__ import annotations

from pathlib import Path

TRACKER = "latest_checkpointed_iteration.txt"
_PREFIX = "global_step_"


def step_dir(root: Path, step: int) -> Path:
    return root / f"{_PREFIX}{step}"


def actor_dir(root: Path, step: int) -> Path:
    return step_dir(root, step) / "actor"


def hf_dir(root: Path, step: int) -> Path:
    return actor_dir(root, step) / "huggingface"


def hf_of(step_folder: Path) -> Path:
    """The HF folder inside one ``global_step_N`` folder."""
    return step_folder / "actor" / "huggingface"


def step_of(folder: Path) -> int | None:
    """N of a ``global_step_N`` folder; None for anything else."""
    name = folder.name
    if not name.startswith(_PREFIX) or not name[len(_PREFIX):].isdigit():
        return None
    return int(name[len(_PREFIX):])


def steps(root: Path) -> list[tuple[int, Path]]:
    """Every ``global_step_N`` folder under ``root``, by step (complete or not)."""
    found = [(step_of(p), p) for p in root.glob(f"{_PREFIX}*")] if root.is_dir() else []
    return sorted((s, p) for s, p in found if s is not None)


def latest_step(root: Path) -> int | None:
    """The step verl's tracker names (it writes the tracker once that step's checkpoint is complete)."""
    try:
        return int((root / TRACKER).read_text().strip())
    except (OSError, ValueError):
        return None


def mark_latest(root: Path, step: int) -> None:
    """Write the tracker as verl does (for runs made without verl: the job page's synthetic runs)."""
    (root / TRACKER).write_text(str(step))


def has_model(hf: Path) -> bool:
    """An HF folder with its config and weights."""
    return (hf / "config.json").exists() and (any(hf.glob("*.safetensors")) or any(hf.glob("*.bin")))


def lora_meta_files(step_folder: Path) -> tuple[Path, Path]:
    """Where verl writes a LoRA run's rank and alpha (beside the actor's state; older releases one level up)."""
    return step_folder / "actor" / "lora_train_meta.json", step_folder / "lora_train_meta.json"
