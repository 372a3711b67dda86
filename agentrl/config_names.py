"""Which ``agentrl:`` key a user meant: typos, keys at the wrong depth, and the names other tools use.

    >>> from agentrl.config import AgentrlSettings
    >>> suggest(("group_size",), AgentrlSettings)
    " agentrl calls this 'agentrl.samples_per_prompt' (GRPO group size)."
    >>> suggest(("max_tool_calls",), AgentrlSettings)
    " It belongs under 'agentrl.agent.max_tool_calls' (tool calls per rollout, all turns together)."
"""

from __future__ import annotations

import difflib
import re

from pydantic import BaseModel

# Names peers use for agentrl's keys: TRL's GRPOConfig, OpenAI's fine-tuning hyperparameters, the managed
# product's form fields ("Samples per Prompt", "Save Checkpoint Every"), verl's own names.
PEER_NAMES: dict[str, str] = {
    "num_generations": "samples_per_prompt",  # TRL
    "group_size": "samples_per_prompt",
    "samples_per_prompt": "samples_per_prompt",
    "n_samples": "samples_per_prompt",
    "rollout_n": "samples_per_prompt",  # verl actor_rollout_ref.rollout.n
    "num_samples": "samples_per_prompt",
    "beta": "kl_coef",  # TRL
    "kl_loss_coef": "kl_coef",  # verl
    "kl_coeff": "kl_coef",
    "n_epochs": "epochs",  # OpenAI
    "num_train_epochs": "epochs",  # TRL / transformers
    "total_epochs": "epochs",  # verl
    "per_device_train_batch_size": "batch_size",  # TRL
    "train_batch_size": "batch_size",  # verl
    "max_completion_length": "max_response_length",  # TRL
    "max_new_tokens": "max_response_length",
    "max_steps": "max_steps",
    "total_training_steps": "max_steps",  # verl
    "lr": "learning_rate",
    "save_steps": "save_every",  # transformers
    "save_freq": "save_every",  # verl
    "save_checkpoint_every": "save_every",  # the managed product's form
    "checkpoint_every": "save_every",
    "entropy_coeff": "entropy_coef",  # verl
    "lora_rank": "lora.rank",
    "lora_r": "lora.rank",
    "lora_alpha": "lora.alpha",
    "target_modules": "lora.target_modules",
    "max_tool_result_length": "agent.max_tool_result_chars",
    "output_dir": "run_dir",
    "model_name_or_path": "model",
    "base_model": "model",
    "dataset": "train_data",
    "train_file": "train_data",
    "training_file": "train_data",  # OpenAI
    "validation_file": "val_data",  # OpenAI
    "reward_funcs": "rewards",  # TRL
    "graders": "rewards",
    "grader": "rewards",
}


def normalise(name: str) -> str:
    """'Samples per Prompt' and 'samples-per-prompt' both become 'samples_per_prompt'."""
    return re.sub(r"[\s\-]+", "_", name.strip()).lower()


def field_paths(model: type[BaseModel], prefix: str = "") -> dict[str, str]:
    """Every key of ``model``, nested ones dotted, with its description."""
    out: dict[str, str] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.update(field_paths(annotation, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = info.description or ""
    return out


def suggest(loc: tuple[str, ...], model: type[BaseModel]) -> str:
    """A sentence pointing an unknown key (its location under ``agentrl:``) to the key the user meant."""
    paths = field_paths(model)
    here = ".".join(loc)
    leaf = normalise(loc[-1])

    def say(target: str, how: str) -> str:
        about = f" ({paths[target]})" if paths.get(target) else ""
        return f" {how} 'agentrl.{target}'{about}."

    if leaf in PEER_NAMES and PEER_NAMES[leaf] != here:
        return say(PEER_NAMES[leaf], "agentrl calls this")
    if leaf in paths and leaf != here:  # a top-level key written under a nested block
        return say(leaf, "It belongs at")
    same_leaf = [p for p in paths if p.rsplit(".", 1)[-1] == leaf and p != here]
    if same_leaf:
        return say(same_leaf[0], "It belongs under")
    parent = ".".join(loc[:-1])
    siblings = [p.rsplit(".", 1)[-1] for p in paths if (p.rsplit(".", 1)[0] if "." in p else "") == parent]
    close = difflib.get_close_matches(leaf, siblings, n=1, cutoff=0.6)
    if close:
        return f" Did you mean {close[0]!r}?"
    close = difflib.get_close_matches(leaf, list(PEER_NAMES) + list(paths), n=1, cutoff=0.75)
    if close:
        target = PEER_NAMES.get(close[0], close[0])
        return say(target, "Did you mean")
    return f" Valid keys here: {', '.join(sorted(siblings))}."
