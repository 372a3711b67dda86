"""Reading ``rollouts.jsonl``: the one decoder every reader of the file uses (msgspec, typed).

    for record in read_records(RunDir(run).rollouts):     # RolloutRecord, a line at a time
        record.reward, record.stop_reason is StopReason.ANSWERED
        record.trajectories[0].tool_calls[0].name          # Turn and Call, not dicts
    records, offset = read_new(path, offset)               # complete lines past a byte offset (a file being written)
    key = line_key(raw_line)                               # step, validation, group, drawn_step: nothing else built
    summary = decode_summary(raw_line)                     # what the job page's index files a rollout by

A line decodes into :class:`agentrl.record.RolloutRecord` with typed turns and calls (:class:`Turn`,
:class:`Call`, :class:`CallResult`) and a :class:`StopReason`. Files of every layout agentrl has written read:
a key a line lacks (an older file: no ``group``, ``drawn_step``, ``turn_rewards``, ``reward_version`` ...) takes
its default (a timing it lacks, :data:`UNMEASURED`, is None: not measured, never 0), a key this agentrl does not
know is skipped, and so is a line that is not a JSON object (a line cut
short when a run died); an older line's ``trajectory`` key (:data:`agentrl.record.OLD_TRAJECTORIES`) reads as
``trajectories``. :func:`line_key` decodes the few fields that file rollouts by (the step and validation
flag of ``rewind``, the off-policy ``group``) and skips the rest of the line unbuilt, whatever the key order or
spacing, which is what the byte patterns it replaces depended on.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Iterator, Optional

import msgspec

from agentrl.record import OLD_TRAJECTORIES, Call, CallResult, RolloutRecord, RolloutSummary, StopReason, Turn
from agentrl.runlog import read_lines

__all__ = ["Call", "CallResult", "LineKey", "StopReason", "Turn", "decode", "decode_summary", "from_builtins",
           "line_key", "read_new", "read_records"]

# timings an older line lacks were not measured: they read as None, never as a measured 0
UNMEASURED = ("started_at", "finished_at", "seconds", "model_seconds", "tool_seconds", "reward_seconds")
_TYPED = {"trajectories": Optional[list[Turn]], "stop_reason": Optional[str]}


def _fields_with_defaults() -> list[tuple[str, Any, Any]]:
    """RolloutRecord's fields as msgspec struct fields: its own defaults, the turns typed."""
    spec = []
    for f in fields(RolloutRecord):
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = msgspec.field(default_factory=f.default_factory)
        else:
            default = None  # rollout_id: a line without one still reads (None), as it did as a dict
        if f.name in UNMEASURED:
            default = None
        spec.append((f.name, _TYPED.get(f.name, Any), default))
    return spec + [(OLD_TRAJECTORIES, Optional[list[Turn]], None)]


_Line = msgspec.defstruct("RolloutLine", _fields_with_defaults())
_decoder = msgspec.json.Decoder(_Line)


class LineKey(msgspec.Struct):
    """The fields a line is filed by; ``drawn_step`` is UNSET where the line has no such key (older files)."""

    step: Any = None
    validation: Any = False
    group: Any = None
    drawn_step: Any = msgspec.UNSET
    policy_version: Any = None


_key_decoder = msgspec.json.Decoder(LineKey)


def decode(line: bytes | str) -> RolloutRecord | None:
    """One line as a RolloutRecord; None for a line that is not a JSON object (blank, cut short, a list)."""
    try:
        raw = _decoder.decode(line)
    except msgspec.ValidationError:  # a field of an unexpected shape: read what can be read, as a dict reader did
        raw = _lenient(line)
        if raw is None:
            return None
    except msgspec.DecodeError:  # not JSON (a line cut short)
        return None
    values = msgspec.structs.asdict(raw)
    old = values.pop(OLD_TRAJECTORIES)
    values["trajectories"] = values["trajectories"] or old or []
    reason = values["stop_reason"]
    values["stop_reason"] = StopReason.ANSWERED if reason is None else StopReason(reason)
    return RolloutRecord(**values)


_summary_decoder = msgspec.json.Decoder(RolloutSummary)


def decode_summary(line: bytes | str) -> RolloutSummary | None:
    """The fields the job page's index files a rollout by (:class:`agentrl.record.RolloutSummary`), the rest
    of the line skipped unbuilt; None for a line that is not a record."""
    try:
        return _summary_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def from_builtins(data: dict) -> RolloutRecord | None:
    """A record from a line already parsed (an ``agentrl eval`` file's line holds the record's keys beside the
    row's); read as :func:`decode` reads a line. None if ``data`` is not an object."""
    if not isinstance(data, dict):
        return None
    return decode(msgspec.json.encode(data, enc_hook=str))  # as the writer's json.dumps(default=str) would


def _lenient(line: bytes | str) -> Any:
    """A line whose turns hold something of another shape (a tool result that is a bare string, a turn that is
    not an object): those parts are left out, the rest of the record kept. None if it is not an object."""
    data = msgspec.json.decode(line)
    if not isinstance(data, dict):
        return None
    turns = []
    for turn in data.get("trajectories") or data.get(OLD_TRAJECTORIES) or []:
        if not isinstance(turn, dict):
            continue
        turn = {**turn, **{k: [x for x in turn.get(k) or [] if isinstance(x, dict)] for k in ("tool_calls", "tool_results")}}
        try:
            turns.append(msgspec.convert(turn, Turn))
        except msgspec.ValidationError:
            turns.append(Turn(response=turn.get("response")))
    data["trajectories"] = data[OLD_TRAJECTORIES] = None
    if not isinstance(data.get("stop_reason"), (str, type(None))):
        data["stop_reason"] = str(data["stop_reason"])
    try:
        raw = msgspec.convert(data, _Line)
    except msgspec.ValidationError:
        return None
    raw.trajectories = turns
    return raw


def line_key(line: bytes | str) -> LineKey | None:
    """The step, validation flag, group and drawn step of one JSONL line (rollouts.jsonl, metrics.jsonl,
    logs/trained.jsonl), without building the rest of it; None for a line that is not a JSON object."""
    try:
        return _key_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def read_records(path: str | Path) -> Iterator[RolloutRecord]:
    """Every record of a rollouts file, a line at a time (a gigabyte file costs memory for one line)."""
    path = Path(path)
    if not path.exists():
        return
    with path.open("rb") as fh:
        for line in fh:
            record = decode(line) if line.strip() else None
            if record is not None:
                yield record


def read_new(path: str | Path, start: int = 0) -> tuple[list[RolloutRecord], int]:
    """The records of the complete lines from byte offset ``start``, and the offset after the last one."""
    lines, end = read_lines(path, start)
    return [r for r in map(decode, lines) if r is not None], end
