"""One rollout, as ``rollouts.jsonl`` keeps it: the record the episode returns and every reader shares.

    record = await Episode(state, policy).run(row, sampling_params)     # agentrl.episode
    record.reward, record.components, record.unscorable, record.trajectories[0].tool_calls[0].name
    record.to_dict()                          # one line of rollouts.jsonl (the JSON keys below)
    agentrl.rolloutfile.decode(line)          # back again, typed; keys a file lacks take their defaults

The agent loop in training, the local engine (``agentrl eval``/``prior``), the job page's index
(:class:`RolloutSummary`, the few fields it files rollouts by) and the synthetic run writer all use these
two classes, so the file's keys are declared here and nowhere else.

``reward`` is ``None`` when the rollout could not be scored; ``unscorable`` then says why (``"tools: ..."``,
``"model: ..."``, or a reward's own reason), and GRPO leaves the rollout out of its group. "Could not
score" is never 0. ``turn_rewards`` has one entry per assistant turn (None: no turn score);
``turn_advantages`` is what :func:`agentrl.credit.advantages` gives each turn once its group is complete
(:func:`agentrl.credit.fill`, as ``agentrl inspect`` and the job page do).

Every record holds typed turns, whoever builds it: ``trajectories`` is a list of :class:`Turn` (``response``,
``tool_calls`` as :class:`Call`, ``tool_results`` as :class:`CallResult`) and ``stop_reason`` a
:class:`StopReason`; a writer may hand over the step dicts a reward saw (``sample.trajectories``, the same
name and keys) and the record types them. Read back, a line is decoded once, by :mod:`agentrl.rolloutfile`
(msgspec), into the same record. Files written before the list was named ``trajectories`` (their key was
``trajectory``) read the same.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any, Optional

import msgspec


class StopReason(enum.StrEnum):
    """Why the episode ended; a str, so it compares and is written as its value ("answered", ...). A value
    this agentrl does not know (a newer file's) reads as a member of its own, never an error."""

    ANSWERED = "answered"  # the model answered without a tool call
    TURN_BUDGET = "turn_budget"  # agent.max_turns or max_tool_calls ran out
    RESPONSE_BUDGET = "response_budget"  # max_response_length ran out
    ABORTED = "aborted"  # the rollout server stopped the generation (verl's vLLM abort)
    TOOL_INFRA_ERROR = "tool_infra_error"  # a tool server failed: the rollout is unscorable
    DECLARED_CALL = "declared_call"  # the model called a declared tool that nothing executes (graded as is)

    @classmethod
    def _missing_(cls, value: object) -> "StopReason | None":
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_, member._value_ = value.upper(), value
        return member


class Call(msgspec.Struct):
    """A tool call the model made, as a turn records it."""

    id: Any = None
    name: Any = None
    arguments: Any = None


class CallResult(msgspec.Struct):
    """What a tool call got back (``is_error``: the tool answered with an error, shown to the model)."""

    id: Any = None
    name: Any = None
    content: Any = None
    is_error: Any = False


class Turn(msgspec.Struct):
    """One assistant turn of ``trajectory``: its text, its tool calls and their results, and the simulated
    user's reply where there is one."""

    response: Any = ""
    tool_calls: Optional[list[Call]] = None
    tool_results: Optional[list[CallResult]] = None
    reasoning: Optional[str] = None
    user_reply: Any = None

    def __post_init__(self) -> None:  # a file that wrote null reads as none
        self.tool_calls = self.tool_calls or []
        self.tool_results = self.tool_results or []


@dataclass
class RolloutRecord:
    rollout_id: str
    prompt_id: Any = None  # the row's id (its own "id", else file:line:hash)
    source: Optional[str] = None  # file:line of the row
    step: Any = None  # the trainer step this prompt was drawn for
    validation: bool = False
    policy_version: Any = None  # the weights version (verl's global_steps) the answer was generated with
    group: Optional[str] = None  # verl's id of the prompt's GRPO group (its uid)
    drawn_step: Any = None  # off-policy runs: the step the prompt was drawn for (step: the one that trained it)
    staleness: Optional[int] = None  # off-policy runs: step - 1 - policy_version, updates between generating and training
    messages: list = field(default_factory=list)  # the whole conversation, prompt included
    trajectories: list[Turn] = field(default_factory=list)  # one Turn per assistant turn, as sample.trajectories
    tool_calls: int = 0
    user_turns: int = 0
    reward: Optional[float] = None
    components: dict = field(default_factory=dict)  # per reward, by label
    passed: dict = field(default_factory=dict)  # per grader with a pass_threshold
    unscorable: Optional[str] = None
    turn_rewards: list = field(default_factory=list)  # one per assistant turn: the reward set's turn score or None
    turn_unscorable: dict = field(default_factory=dict)  # turn index (from 0, as a string) -> why it could not be scored
    turn_advantages: Optional[list] = None  # one per assistant turn, filled where the whole group is known (agentrl.credit)
    reward_version: Optional[str] = None  # the reward set's version that gave reward/components (agentrl.rewards.versions)
    stop_reason: StopReason = StopReason.ANSWERED  # a writer may give its value ("answered", ...)
    response_tokens: int = 0
    started_at: float = 0.0  # wall clock, seconds since the epoch
    finished_at: float = 0.0
    seconds: float = 0.0
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    reward_seconds: float = 0.0

    def __post_init__(self) -> None:
        self.trajectories = as_turns(self.trajectories)
        if not isinstance(self.stop_reason, StopReason):
            self.stop_reason = StopReason(self.stop_reason)

    def to_dict(self) -> dict[str, Any]:
        """The line's JSON object (shallow: messages are the record's own; each turn as the dict a reward saw,
        its keys that hold nothing left out)."""
        out = {name: getattr(self, name) for name in KEYS}
        out["trajectories"] = [{k: v for k, v in msgspec.to_builtins(t, enc_hook=str).items() if v is not None}
                               for t in self.trajectories]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RolloutRecord":
        """A line of rollouts.jsonl (keys it lacks take their defaults; keys this agentrl does not know are
        dropped; an older line's ``trajectory`` is its ``trajectories``)."""
        values = {k: v for k, v in data.items() if k in _KEY_SET}
        if "trajectories" not in values and data.get(OLD_TRAJECTORIES) is not None:
            values["trajectories"] = data[OLD_TRAJECTORIES]
        return cls(**values)


OLD_TRAJECTORIES = "trajectory"  # the key rollouts.jsonl and eval files gave the turns until November 2026


def as_turns(steps: Any) -> list[Turn]:
    """Turns from what a writer holds: :class:`Turn` as they are, step dicts (``sample.trajectories``'s, an
    older file's) typed; None is no turns."""
    return [t if isinstance(t, Turn) else msgspec.convert(t, Turn) for t in steps or []]


KEYS: tuple[str, ...] = tuple(f.name for f in fields(RolloutRecord))
_KEY_SET = frozenset(KEYS)


class _Call(msgspec.Struct):
    name: Any = None


class _Step(msgspec.Struct):
    tool_calls: Optional[list[_Call]] = None


class RolloutSummary(msgspec.Struct):
    """The fields of a :class:`RolloutRecord` the job page's index files rollouts by; msgspec skips the rest
    of the line while decoding, so a gigabyte of rollouts indexes without building the messages."""

    step: Any = None
    validation: Any = False
    reward: Any = None
    unscorable: Any = None
    tool_calls: Any = 0
    prompt_id: Any = None
    rollout_id: Any = None
    stop_reason: Any = None
    trajectories: Optional[list[_Step]] = None
    trajectory: Optional[list[_Step]] = None  # an older file's name for trajectories (OLD_TRAJECTORIES)
    seconds: Any = None
    model_seconds: Any = None
    tool_seconds: Any = None
    reward_seconds: Any = None

    @property
    def turns(self) -> list[_Step]:
        """The turns, under either name a file gave them."""
        return self.trajectories or self.trajectory or []
