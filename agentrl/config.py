"""The training config: verl's Hydra keys plus an ``agentrl:`` block for what the user chooses.

    agentrl:
      model: ./my-model            # or "demo": the tiny model the project builds offline
      train_data: data/train.jsonl
      val_data: data/val.jsonl     # optional
      tools: [calculator]          # plugin names, or an mcpServers dict, or a path to an mcpServers JSON file
      rewards: [{name: math, weight: 1.0}]
      batch_size: 8                # prompts per step
      samples_per_prompt: 4        # GRPO group size
      credit: episode              # or turn, step_group: per-turn credit (agentrl.credit)
      ...
    trainer:                       # any verl key, as in verl's ppo_trainer.yaml
      total_epochs: 2

``agentrl train CONFIG key=value ...`` overrides either part (``agentrl.batch_size=4``,
``actor_rollout_ref.actor.optim.lr=1e-5``). Unknown keys, in either part, are errors that name the key
and the nearest valid one.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agentrl.config_names import suggest
from agentrl.errors import AgentrlError


class ConfigError(AgentrlError):
    """The config is wrong; the message names the key, the file and the fix."""


class LoraSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rank: int = Field(0, ge=0, description="LoRA rank; 0 trains all weights")
    alpha: int = 16
    target_modules: Union[str, list[str]] = "all-linear"


class AgentSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_turns: int = Field(4, ge=1, description="assistant turns per rollout")
    max_tool_calls: int = Field(8, ge=0, description="tool calls per rollout, all turns together")
    max_parallel_calls: int = Field(4, ge=1, description="tool calls run concurrently in one turn")
    max_tool_result_chars: int = Field(4000, ge=16, description="longer tool results are truncated with a marker")
    tool_parser: str = Field("auto", description="tool-call format: auto (from the model's chat template), or a verl "
                             "parser: hermes, qwen3_coder, glm, gpt-oss, llama3_json, llama3_pythonic, mistral, ...")
    program: Optional[str] = Field(
        None, description="an agent written with any framework: a .py file defining `async def run(row, base_url, "
        "api_key)`, module:function, or a name from register_agents; it talks to the policy through an "
        "OpenAI-compatible endpoint (agentrl.program)")
    tool_choice_missed: Literal["refuse", "serve"] = Field(
        "refuse", description="agent.program: a turn whose tool_choice (\"required\" or a named function) the policy "
        "missed in every try: refuse it with a 422 (the OpenAI API's meaning), or serve the last sample as written")
    simulated_user: Optional[dict[str, Any]] = Field(
        None, description="an LLM plays the user: {model, max_turns, api_base, api_key_env}; goal from metadata.user_goal")


class CreditSettings(BaseModel):
    """``agentrl.credit``: a method name (``credit: turn``) or ``{method: turn, gamma: 0.95}``; see agentrl.credit."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    method: Literal["episode", "turn", "step_group"] = Field(
        "episode", description="episode: GRPO (every turn the rollout's advantage); turn: discounted per-turn returns "
                               "with a per-turn baseline; step_group: GiGPO-style episode plus step advantage")
    gamma: float = Field(1.0, ge=0, le=1, description="per-turn discount (turn, step_group)")
    step_weight: float = Field(1.0, ge=0, description="weight of the step advantage (step_group)")

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"method": value} if isinstance(value, str) else value

    def options(self) -> dict[str, float]:
        """The keyword options :func:`agentrl.credit.advantages` takes for this method."""
        return {"episode": {}, "turn": {"gamma": self.gamma},
                "step_group": {"gamma": self.gamma, "step_weight": self.step_weight}}[self.method]


# plugin names, Agent RFT endpoint entries (a list of dicts), an mcpServers dict, or a JSON file's path
ToolsSetting = Union[list[Union[str, dict[str, Any]]], dict[str, Any], str, None]


class AgentrlSettings(BaseModel):
    """Everything under ``agentrl:``."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(..., description="HF model directory, or 'demo'")
    train_data: str
    val_data: Optional[str] = None
    tools: ToolsSetting = None
    tool_allow: Optional[dict[str, list[str]]] = Field(None, description="per-server allow-list of tool names")
    rewards: list[Union[str, dict[str, Any]]]
    batch_size: int = Field(8, ge=1, description="prompts per training step")
    samples_per_prompt: int = Field(4, ge=2, description="GRPO group size")
    credit: CreditSettings = Field(CreditSettings(), description="episode (GRPO), turn or step_group: agentrl.credit")
    epochs: int = Field(1, ge=1)
    max_steps: Optional[int] = Field(None, ge=1, description="stop after this many steps (default: epochs)")
    temperature: float = Field(1.0, gt=0)
    max_prompt_length: int = Field(512, ge=8)
    max_response_length: int = Field(512, ge=8)
    save_every: int = Field(0, ge=0, description="checkpoint every N steps; 0 = only at the end")
    kl_coef: float = Field(0.0, ge=0)
    learning_rate: float = Field(1e-6, gt=0)
    entropy_coef: float = Field(0.0, ge=0)
    skip_flat_groups: bool = Field(
        True, description="leave zero-advantage sequences out of the policy update where that gives the same "
        "gradient (agentrl.verl.flatgroups); false: update on every sequence")
    max_off_policy_steps: int = Field(
        0, ge=0, le=8, description="0: synchronous GRPO. N > 0: rollouts for the next steps are generated while "
        "a step trains, and a rollout may be up to N policy versions old when it is trained on")
    lora: LoraSettings = LoraSettings()
    agent: AgentSettings = AgentSettings()
    device: Literal["auto", "cpu", "gpu"] = "auto"
    rollout: Literal["auto", "vllm", "transformers"] = Field(
        "auto", description="verl's vLLM rollout, or agentrl's transformers rollout (CPU only); auto: vLLM where it "
                            "is installed and a GPU is present, transformers otherwise")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto", description="the trainer's compute dtype on the CPU; auto: bfloat16 where the CPU has it natively "
                            "(AVX-512 BF16, AMX), float32 where it would be emulated (agentrl.precision)")
    gpus_per_node: Optional[int] = Field(None, ge=1, description="GPUs per node (default: the GPUs visible here)")
    nodes: int = Field(1, ge=1, description="nodes of the Ray cluster (more than 1 needs RAY_ADDRESS)")
    rollout_workers: Optional[int] = Field(
        None, ge=1, description="agent-loop processes in all (verl's actor_rollout_ref.rollout.agent.num_workers); "
        "default one a node on the CPU, 8 a node on GPUs. Tool limits hold across all of them (agentrl.tools.limits)")
    run_dir: str = Field("runs/${name}", description="where the run's files go")
    name: str = "run"
    seed: int = 0

    @field_validator("rewards")
    @classmethod
    def _nonempty(cls, value: list) -> list:
        if not value:
            raise ValueError("name at least one reward, e.g. [{name: math, weight: 1.0}]")
        return value


def _nearest(key: str, options: list[str]) -> str:
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


def parse_agentrl(block: Any, source: str) -> AgentrlSettings:
    if not isinstance(block, dict):
        raise ConfigError(f"{source}: the config needs an 'agentrl:' mapping (model, train_data, rewards, ...)")
    try:
        return AgentrlSettings.model_validate(block)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(str(p) for p in err["loc"])
            key = "agentrl." + ".".join(loc)
            if err["type"] == "extra_forbidden":
                lines.append(f"unknown key {key!r}.{suggest(loc, AgentrlSettings)}")
            elif err["type"] == "missing":
                lines.append(f"missing key {key!r}: {AgentrlSettings.model_fields.get(loc[0]).description or 'required'}"
                             if loc[0] in AgentrlSettings.model_fields else f"missing key {key!r}")
            else:
                lines.append(f"{key}: {err['msg']} (got {err.get('input')!r})")
        raise ConfigError(f"{source}: " + "; ".join(lines)) from None


def parse_value(text: str) -> Any:
    """A command-line value as YAML (numbers, booleans, lists, null) or a plain string."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def set_dotted(tree: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def load_config(path: str | os.PathLike, overrides: list[str] = ()) -> tuple[AgentrlSettings, dict, dict]:
    """Read CONFIG.yaml and apply ``key=value`` overrides.

    Returns the agentrl settings, the verl part (a nested dict of verl keys), and the raw merged
    document (for ``config.yaml`` in the run directory).
    """
    path = Path(path)
    doc = _read(path)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value (e.g. agentrl.batch_size=4)")
        key, value = item.split("=", 1)
        key = key.strip()
        if key.lstrip("+").split(".")[0] == "agentrl":
            key = key.lstrip("+")  # agentrl's keys are checked by its own schema
        set_dotted(doc, key, parse_value(value))  # a verl key keeps its '+' (Hydra: add a new key)
    settings = parse_agentrl(doc.get("agentrl"), str(path))
    resolve_paths(settings, path.parent.resolve())
    verl_part = {k: v for k, v in doc.items() if k != "agentrl"}
    return settings, verl_part, doc


def _read(path: Path) -> dict:
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist (run from the project folder, or give its path)")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return doc


class ToolsOnly(BaseModel):
    """What ``agentrl tools list|check|call`` reads of the ``agentrl:`` block: a file may hold only this."""

    tools: ToolsSetting = None


def load_tools(path: str | os.PathLike) -> ToolsSetting:
    """``agentrl.tools`` of CONFIG.yaml, a JSON file's path resolved as :func:`load_config` resolves it. The
    rest of the config (model, train_data, rewards) is neither needed nor checked, so a file with only
    ``agentrl: {tools: [...]}`` is enough to check the tools before anything else is written."""
    path = Path(path)
    block = _read(path).get("agentrl")
    if not isinstance(block, dict):
        raise ConfigError(f"{path}: the config needs an 'agentrl:' mapping with the tool servers under it, "
                          "e.g. agentrl: {tools: [calculator]}")
    try:
        tools = ToolsOnly.model_validate({"tools": block.get("tools")}).tools
    except ValidationError:
        raise ConfigError(f"{path}: agentrl.tools must be a list of plugin names or endpoint entries, an "
                          f"mcpServers mapping, or a JSON file's path (got {block.get('tools')!r})") from None
    from agentrl.tools.config import start_in

    base = path.parent.resolve()
    return _under(base, tools) if isinstance(tools, str) else start_in(base, tools)


def _under(base: Path, value: str) -> str:
    return value if os.path.isabs(value) else str(base / Path(value).expanduser())


def resolve_paths(settings: AgentrlSettings, base: Path) -> None:
    """Every relative path in the ``agentrl:`` block is relative to the config file's folder, wherever
    ``agentrl train`` runs from (verl's workers run in the run directory), and a stdio tool server declared here
    starts in that folder unless its ``cwd`` says otherwise. ``run_dir`` is an output and stays relative to the
    working directory."""
    from agentrl.workflow.model_import import known

    for attr in ("train_data", "val_data", "model"):
        value = getattr(settings, attr)
        if value and value != "demo" and not (attr == "model" and known(value) and not (base / value).exists()):
            setattr(settings, attr, _under(base, value))  # a packaged model's name is a name, unless a folder
    if isinstance(settings.tools, str):
        settings.tools = _under(base, settings.tools)
    else:
        from agentrl.tools.config import start_in

        settings.tools = start_in(base, settings.tools)  # stdio servers start in this folder unless cwd says
    if settings.agent.program and settings.agent.program.endswith(".py"):
        settings.agent.program = _under(base, settings.agent.program)
    from agentrl.rewards.resolve import looks_like_path

    rewards = []
    for entry in settings.rewards:
        if isinstance(entry, str) and looks_like_path(entry):
            entry = _under(base, entry)
        elif isinstance(entry, dict):
            entry = dict(entry)
            if isinstance(entry.get("name"), str) and looks_like_path(entry["name"]):
                entry["name"] = _under(base, entry["name"])
            if isinstance(entry.get("read_paths"), list):
                entry["read_paths"] = [_under(base, p) if isinstance(p, str) else p for p in entry["read_paths"]]
        rewards.append(entry)
    settings.rewards = rewards


def flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def hydra_value(value: Any) -> str:
    """Format a value for a Hydra command-line override."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if any(c in text for c in " ,[]{}()=:'\"\\$") or text == "" or not isinstance(parse_value(text), str):
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return text


def verl_defaults() -> dict:
    """verl's own ppo_trainer defaults, composed the way main_ppo composes them.

    Read from verl's config folder, found without importing verl (whose package imports torch: ~4 s of
    `agentrl train`'s pre-flight, against ~0.3 s for the folder)."""
    import importlib.util

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    found = importlib.util.find_spec("verl")
    if found is None or not found.submodule_search_locations:
        raise ConfigError("verl is not installed in this environment; run scripts/install.sh")
    config_dir = Path(next(iter(found.submodule_search_locations))) / "trainer" / "config"
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(config_name="ppo_trainer")
    return OmegaConf.to_container(cfg, resolve=False)


def check_verl_keys(verl_keys: dict[str, Any], defaults: dict, source: str) -> None:
    """Every verl key must exist in verl's config (a ``+`` prefix adds a new one deliberately)."""
    problems = []
    for dotted in verl_keys:
        if dotted.startswith("+"):
            continue
        node: Any = defaults
        walked = []
        for part in dotted.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
                walked.append(part)
                continue
            options = list(node) if isinstance(node, dict) else []
            where = ".".join(walked) or "the top level"
            hint = _nearest(part, options)
            if not walked:  # an agentrl setting written outside the agentrl: block
                ours = suggest(tuple(dotted.split(".")), AgentrlSettings)
                if "'agentrl." in ours or dotted in AgentrlSettings.model_fields:
                    hint = ours if "'agentrl." in ours else f" It belongs under 'agentrl.{dotted}'."
            problems.append(f"unknown verl key {dotted!r}: {where} has no {part!r}.{hint}")
            break
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems) + " (prefix a key with '+' to add a new one on purpose)")
