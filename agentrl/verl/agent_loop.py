"""verl's side of the agent loop: the episode (:mod:`agentrl.episode`) on verl's token stream.

verl instantiates ``AgentrlAgentLoop`` per rollout and calls ``run`` with the dataset row's columns:
1. the row comes back from ``extra_info.agentrl_row`` (what ``agentrl train`` writes), or is read from verl's
   own columns (``prompt``, ``data_source``, ``reward_model.ground_truth``, ``extra_info``: ``agentrl.verl.rows``);
   the settings are the spec ``agentrl train`` wrote (``agentrl.spec``) or ``+agentrl.*`` keys (``worker_state``);
2. :class:`agentrl.episode.Episode` plays it (turns, MCP tools, simulated user, rewards, rollouts.jsonl)
   against a :class:`TokenPolicy`: each assistant turn is generated token-in/token-out by the rollout
   server, and verl's Continuous Token builder appends the tokens, so generated ids are never re-encoded
   from text and every template, tool or user token gets ``response_mask`` 0; tool calls are parsed with
   verl's parser registry;
3. the record and the token stream go back to verl as an ``AgentLoopOutput`` with the score.

With ``max_off_policy_steps`` > 0 a training rollout is not yet known to belong to a step when it ends
(verl trains each step on the groups that finish first): it goes to ``logs/generated.jsonl`` with its
group id, and ``agentrl train`` moves it into ``rollouts.jsonl`` under the step that trained it.

A rollout that could not be scored (tool server down, reward crashed) reaches verl with a NaN score and
``agentrl_unscorable`` set; ``agentrl_grpo`` gives it advantage 0 and keeps it out of its group.

With per-turn credit (``agentrl.credit: turn`` or ``step_group``) the output also carries each turn's
reward at that turn's last generated token (:class:`TurnCreditOutput`), so ``agentrl_grpo`` can give the
tokens of turn k turn k's advantage; a turn a reward could not score goes as NaN.
"""

from __future__ import annotations

import logging
import math
import uuid
from pathlib import Path
from typing import Any, Optional

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, DictConfigWrap, register
from verl.experimental.agent_loop.tool_parser import ToolParser

from agentrl.errors import AgentrlError
from agentrl import families
from agentrl.episode import Episode, GenerationAborted, Turn  # noqa: F401  (re-exported)
from agentrl.record import RolloutRecord
from agentrl.verl import parsers
from agentrl.verl.builders import fit_builder
from agentrl.verl.rows import loop_row, plain
from agentrl.verl.sampling import sample
from agentrl.worker import WorkerState

class _OncePerProcess(logging.Filter):
    """verl warns that a model_type has no Continuous Token builder each time it builds a loop, i.e. once per
    rollout (Llama models: SmolLM2, Llama 3.x); its generic builder is the right one for them. Said once here."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "Continuous Token builder" not in text:
            return True
        if text in self.seen:
            return False
        self.seen.add(text)
        return True


logging.getLogger("verl.utils.tokenizer.continuous_token_wiring").addFilter(_OncePerProcess())


class TemplateRefused(AgentrlError):
    """The chat template would not render what the agent appends; the message has the template's own words."""

    def __init__(self, tokenizer: Any, appended: list[dict], messages: list[dict], tools: Optional[list],
                 exc: Exception) -> None:
        try:
            tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
            said = "it renders the conversation itself; the Continuous Token builder's render of the appended part failed"
        except Exception as real:
            said = f"{type(real).__name__}: {real}"
        roles = ", ".join(str(m.get("role")) for m in appended)
        super().__init__(f"the model's chat template refused to append {roles} message(s): {said} (verl: {exc}). "
                         "If the template needs a form agentrl does not write, set agent.tool_parser to the model's "
                         "format or fix the template; `agentrl data check --config` shows what it found")


class TurnCreditOutput(AgentLoopOutput):
    """verl's output with per-turn rewards added to ``rm_scores``: ``(response position, reward)`` pairs."""

    turn_rewards_at: list[tuple[int, float]] = []

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        out.pop("turn_rewards_at", None)
        scores = out.get("rm_scores")
        if scores is not None:
            for position, value in self.turn_rewards_at:
                scores[position] += value
        return out


def turn_rewards_at(record: RolloutRecord, turn_ends: list[int], length: int) -> list[tuple[int, float]]:
    """Where each scored turn's reward goes: its last generated token (turns cut off by the response budget
    are dropped with their tokens); a turn that could not be scored is NaN."""
    out = []
    for k, end in enumerate(turn_ends[: len(record.turn_rewards)]):
        value = math.nan if str(k) in record.turn_unscorable else record.turn_rewards[k]
        if value is not None and 0 <= end < length:
            out.append((end, float(value)))
    return out


class LoopConfigError(AgentrlError):
    """``default_agent_loop=agentrl`` without the agentrl settings it needs; the message names the key."""


HYDRA_KEYS = ("rewards", "tools", "tool_allow", "agent", "run_dir")
_EXAMPLE = "+agentrl.rewards='[{name:math}]'"


def worker_state(config: Any) -> WorkerState:
    """This worker's state for verl's config: the spec ``agentrl train`` wrote (``agentrl.spec``), else the
    settings given as Hydra keys on verl's command line (``+agentrl.rewards=...``, ``+agentrl.tools=...``,
    ``+agentrl.agent.max_turns=...``, ``+agentrl.run_dir=...``), read into the same typed ``RunSpec``."""
    block = config.get("agentrl")
    cached = _states.get(id(block))
    if cached is not None and cached[0] is block:  # verl builds a loop per rollout from the same config
        return cached[1]
    state = _worker_state(block, config)
    _states[id(block)] = (block, state)
    return state


_states: dict[int, tuple[Any, WorkerState]] = {}


def _worker_state(block: Any, config: Any) -> WorkerState:
    from pydantic import ValidationError

    from agentrl.spec import RunSpec

    if block is None:
        raise LoopConfigError(
            "actor_rollout_ref.rollout.agent.default_agent_loop=agentrl needs agentrl's settings: add "
            f"{_EXAMPLE} (rewards, required), +agentrl.tools='[calculator]' (MCP servers, optional) and "
            "+agentrl.agent.max_turns=N etc. (optional), or start the run with `agentrl train`")
    block = plain(block)
    if block.get("spec"):
        return WorkerState.for_file(str(block["spec"]))
    unknown = sorted(set(block) - set(HYDRA_KEYS))
    if unknown:
        raise LoopConfigError(f"agentrl.{unknown[0]}: not an agentrl key for verl's command line; "
                              f"use {', '.join('agentrl.' + k for k in HYDRA_KEYS)}")
    if not block.get("rewards"):
        raise LoopConfigError(f"default_agent_loop=agentrl: no rewards; add {_EXAMPLE} (a list in the shape "
                              f"of agentrl's rewards: presets, .py files, OpenAI grader dicts, weights)")
    trainer = config.get("trainer") or {}
    run_dir = block.get("run_dir") or trainer.get("default_local_dir") or "agentrl_run"
    try:
        spec = RunSpec(run_dir=str(Path(run_dir).absolute()), tools=block.get("tools"),
                       tool_allow=block.get("tool_allow"), rewards=block["rewards"], agent=block.get("agent") or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        key = "agentrl." + ".".join(str(p) for p in first["loc"])
        raise LoopConfigError(f"{key}: {first['msg']} (from verl's command line: +{key}=...)") from None
    Path(spec.run_dir).mkdir(parents=True, exist_ok=True)
    return WorkerState.for_spec(spec)


@register("agentrl")
class AgentrlAgentLoop(AgentLoopBase):
    """agentrl's agent loop: MCP tools, budgets, structured trajectories, agentrl rewards."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state = worker_state(self.config)
        self.agent = self.state.spec.agent
        self.response_length = int(self.rollout_config.response_length)
        # the model's own format: from its chat template and config.json's model_type, unless the config names a parser
        self.family = families.choose_family(self.agent.tool_parser, self.tokenizer.chat_template, kwargs.get("hf_model_type"))
        self.parser = ToolParser.get_tool_parser(self.family.parser, self.tokenizer)
        fit_builder(self.continuous_token_builder, self.family)
        self.special_tokens = special_tokens(self.tokenizer)
        v1 = (self.config.get("trainer") or {}).get("v1") or {}  # the local engine's config has no trainer
        self.off_policy = (v1.get("trainer_mode") or "sync") != "sync"

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        # agentrl's rows carry themselves in extra_info.agentrl_row; verl's (prompt, data_source,
        # reward_model.ground_truth, extra_info) are read as agentrl.verl.rows says
        row = loop_row(kwargs.get("raw_prompt"), kwargs.get("data_source"),
                       (kwargs.get("reward_model") or {}).get("ground_truth"), kwargs.get("extra_info"))
        record, policy = await self.episode(row, sampling_params, trainer_step=kwargs.get("global_steps"),
                                            group=kwargs.get("uid"))
        if self.agent.program:  # an agent written with another framework: one or several sequences
            return policy.built
        return policy.output(record, len(row["messages"]))

    async def episode(self, row: dict, sampling_params: dict[str, Any], *, trainer_step: Any = None,
                      group: Optional[str] = None) -> tuple[RolloutRecord, "TokenPolicy"]:
        """One rollout of ``row`` (``agentrl.dataset.loop_record``'s shape): its record and token stream.
        ``group`` is verl's id of the prompt's GRPO group. With ``agent.program`` the user's agent plays it
        through its own endpoint (``agentrl.verl.program_loop``) and the second value is that rollout."""
        if self.agent.program:
            from agentrl import program
            from agentrl.verl.program_loop import ProgramRollout

            rollout = ProgramRollout(self, sampling_params)
            run = program.load_program(self.agent.program)
            record = await program.play(self.state, rollout, run, row, trainer_step=trainer_step, group=group,
                                        step_known=not self.off_policy)
            rollout.built = await rollout.outputs(record, row["messages"])  # what verl gets (audited)
            return record, rollout
        policy = TokenPolicy(self, uuid.uuid4().hex)
        record = await Episode(self.state, policy).run(row, sampling_params, trainer_step=trainer_step, group=group,
                                                       step_known=not self.off_policy)
        return record, policy


async def parse_turn(parser: Any, tokenizer: Any, token_ids: list[int], tools: Optional[list] = None) -> Turn:
    """A generated turn as the episode takes it: text, the calls verl's parser registry reads, the raw text; a
    parser that raises gives a parse error (a malformed call told to the model), never a dead rollout."""
    text = tokenizer.decode(token_ids, skip_special_tokens=True)
    raw = tokenizer.decode(token_ids, skip_special_tokens=False)
    try:
        _, calls = await parser.extract_tool_calls(token_ids, tools)
    except Exception as exc:  # noqa: BLE001 - a parser's failure on model text is a malformed call, not a dead rollout
        return Turn(text, [], raw, (f"the call could not be read ({type(exc).__name__}: {exc})",))
    return Turn(text, calls, raw)


def special_tokens(tokenizer: Any) -> tuple[str, ...]:
    """Tokens removed from the visible answer: ``all_special_tokens`` and every added token the vocabulary flags
    special (GLM's ``<|user|>``, which ``all_special_tokens`` leaves out), longest first."""
    found = set(tokenizer.all_special_tokens)
    found |= {t.content for t in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values()
              if getattr(t, "special", False) and t.content}
    return tuple(sorted(found, key=len, reverse=True))


class TokenPolicy:
    """The episode's policy on verl's token stream (see :class:`agentrl.episode.Policy`)."""

    def __init__(self, loop: AgentrlAgentLoop, request_id: str) -> None:
        self.loop = loop
        self.request_id = request_id
        self.runtime_ids: list[int] = []  # prompt + everything appended so far
        self.prompt_len = 0
        self.mask: list[int] = []  # 1 = generated by the model
        self.logprobs: list[float] = []
        self.versions: dict[str, Any] = {}
        self.model_seconds = 0.0
        self.family, self.special_tokens = loop.family, loop.special_tokens
        self.parser_tools: Optional[list] = None
        self.turn_ends: list[int] = []  # the response position of each assistant turn's last generated token

    async def start(self, messages: list[dict], tools: Optional[list]) -> None:
        self.parser_tools = parsers.tool_schemas(tools)  # qwen3_coder types arguments from them
        self.runtime_ids = await self.loop.ct_build_initial_tokens(messages, tools=tools)
        self.prompt_len = len(self.runtime_ids)

    def room(self) -> int:
        return self.loop.response_length - len(self.mask)

    async def generate(self, sampling_params: dict[str, Any], room: int) -> Turn:
        loop = self.loop
        out, seconds = await sample(loop, self.request_id, self.runtime_ids, sampling_params, room, self.versions)
        self.model_seconds += seconds
        aborted = out.stop_reason in ("aborted", "abort")  # verl's vLLM server, with what it had generated
        if aborted and not out.token_ids:
            raise GenerationAborted("generation aborted by the rollout server before any token")
        merged, self.mask, logprobs = await loop.ct_merge_assistant_token(
            self.runtime_ids, out.token_ids, self.mask, self.logprobs if (self.logprobs or out.log_probs) else None,
            assistant_logprobs=out.log_probs or None)
        self.runtime_ids, self.logprobs = merged.token_ids, logprobs or []
        # this turn's last generated token (-1: it generated none, so its reward has no token to sit on)
        self.turn_ends.append(next((i for i in range(len(self.mask) - 1, -1, -1) if self.mask[i]), -1)
                              if out.token_ids else -1)
        if aborted:
            raise GenerationAborted(f"generation aborted by the rollout server after {len(out.token_ids)} tokens",
                                    loop.tokenizer.decode(out.token_ids, skip_special_tokens=True))
        return await parse_turn(loop.parser, loop.tokenizer, list(out.token_ids), self.parser_tools)

    async def extend(self, previous: list[dict], messages: list[dict], tools: Optional[list]) -> bool:
        try:
            merged, mask, logprobs = await self.loop.ct_merge_context_msg(
                previous, messages, self.runtime_ids, self.mask, self.logprobs or None, tools=tools)
        except Exception as exc:  # verl's wrapper re-renders after a template error and hides the real message
            raise TemplateRefused(self.loop.tokenizer, messages[len(previous):], messages, tools, exc) from exc
        if len(mask) >= self.loop.response_length:
            return False
        self.runtime_ids, self.mask, self.logprobs = merged.token_ids, mask, logprobs or []
        return True

    async def finish(self, prompt: list[dict]) -> int:
        loop = self.loop
        if not self.runtime_ids:  # failed before the prompt was built (e.g. listing tools): build it bare
            self.runtime_ids = await loop.ct_build_initial_tokens(prompt, tools=None)
            self.prompt_len = len(self.runtime_ids)
        if len(self.runtime_ids) == self.prompt_len:
            # Failed before the model said anything. verl needs one response token, and a step whose
            # mask is all zeros divides 0 by 0 in the token-mean loss, so the filler end-of-turn token is
            # left in the mask; its NaN score gives it advantage 0, hence no policy gradient.
            self.runtime_ids.append(loop.tokenizer.eos_token_id if loop.tokenizer.eos_token_id is not None else 0)
            self.mask = [1]
            self.logprobs = [0.0] if loop.rollout_config.calculate_log_probs else []
        return len(self.runtime_ids[self.prompt_len:][: loop.response_length])

    def output(self, record: RolloutRecord, prompt_messages: int) -> AgentLoopOutput:
        """What verl trains on: the token stream, the score (NaN: could not score) and agentrl's fields."""
        response_ids = self.runtime_ids[self.prompt_len:][: self.loop.response_length]
        last = self.loop.state.last_versions
        per_turn = self.loop.state.spec.credit.method != "episode"
        cls = TurnCreditOutput if per_turn else AgentLoopOutput
        extra = {"turn_rewards_at": turn_rewards_at(record, self.turn_ends, len(response_ids))} if per_turn else {}
        return cls(
            **extra,
            prompt_ids=self.runtime_ids[: self.prompt_len],
            response_ids=response_ids,
            response_mask=self.mask[: self.loop.response_length],
            response_logprobs=self.logprobs[: len(response_ids)] if self.logprobs else None,
            # NaN marks "could not score" for agentrl_grpo, which gives it advantage 0 and leaves it out of
            # its group; the tokens stay in the mask so a step of only unscorable rollouts still has a
            # well-defined (zero) loss instead of 0/0.
            reward_score=float(record.reward) if record.reward is not None else float("nan"),
            num_turns=len(record.messages) - prompt_messages + 1,
            metrics={"tool_calls": record.tool_seconds, "compute_score": record.reward_seconds},
            extra_fields={**last, **self.versions, "agentrl_unscorable": 1 if record.unscorable else 0,
                          "agentrl_tool_calls": record.tool_calls, "agentrl_rollout_id": record.rollout_id},
        )


def local_config(spec_path: str, *, prompt_length: int, response_length: int) -> Any:
    """The part of verl's config the agent loop reads, for :func:`local_loop`."""
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "agentrl": {"spec": str(spec_path)},
        "actor_rollout_ref": {"rollout": {"response_length": response_length, "prompt_length": prompt_length,
                                          "calculate_log_probs": True}},
        "data": {"apply_chat_template_kwargs": {}},
    })


def local_loop(config: Any, server_manager: Any, tokenizer: Any, model_type: Optional[str]) -> AgentrlAgentLoop:
    """The agent loop outside Ray, built by its constructor as verl's agent-loop worker builds it, with a
    local engine (:mod:`agentrl.verl.engine`) as its ``server_manager``."""
    return AgentrlAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server_manager,
                            tokenizer=tokenizer, processor=None, dataset_cls=None,
                            data_config=DictConfigWrap(config.data), hf_model_type=model_type)


def quiet_logs() -> None:
    """verl logs every prompt it cuts to prompt_length and every tool call it cannot decode."""
    import logging

    from verl.experimental.agent_loop import agent_loop, tool_parser

    agent_loop.logger.setLevel(logging.ERROR)
    tool_parser.logger.setLevel(logging.CRITICAL)
