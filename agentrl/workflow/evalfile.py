"""One rollout of ``agentrl eval``/``agentrl prior`` (:class:`EvalRecord`), and the eval file that holds them.

    records = LocalRunner(settings, model).run(rows)      # EvalRecord: the row, the latency, the rollout
    records[0].id, records[0].metadata, records[0].rollout.reward, records[0].rollout.trajectories
    header, records = read_eval("base.jsonl")             # an `agentrl eval -o` file, read back typed
    fh.write(json.dumps(records[0].to_dict()) + "\\n")     # its line: flat, as eval files have always been

An eval file's first line is ``{"agentrl_eval": {model, data, samples, ...}}``; each other line is one rollout:
the row's ``id``, ``sample``, ``latency``, ``metadata``, ``source`` and ``prompt`` beside the rollout record's
own fields (``reward``, ``components``, ``unscorable``, ``tool_calls``, ``tokens`` for its ``response_tokens``,
``messages``, ``trajectories``, ...; an older file's ``trajectory`` reads as ``trajectories``). Reading one back, the record's fields go through the rollouts' own decoder
(:func:`agentrl.rolloutfile.from_builtins`): typed turns and calls, a :class:`agentrl.record.StopReason`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from agentrl.errors import AgentrlError
from agentrl.record import RolloutRecord
from agentrl.rolloutfile import from_builtins


class EvalFileError(AgentrlError):
    """An eval file cannot be read; the message says which line and why."""


@dataclass
class EvalRecord:
    """One rollout outside training: the row it ran on, its wall time, and the rollout record."""

    id: Any  # the row's id: rollouts of one prompt share it (compare joins on it)
    sample: int
    rollout: RolloutRecord
    latency: Optional[float] = None  # seconds from the episode's start to its record
    metadata: dict = field(default_factory=dict)  # the row's metadata (expected_answer, ...)
    source: Optional[str] = None  # file:line of the row
    prompt: list = field(default_factory=list)  # the row's messages

    def to_dict(self) -> dict[str, Any]:
        """The eval file's line (the keys ``agentrl eval`` has always written; ``group`` and
        ``turn_advantages`` too where they were filled in)."""
        r = self.rollout.to_dict()
        line = {"id": self.id, "sample": self.sample, "reward": r["reward"], "components": r["components"],
                "unscorable": r["unscorable"], "tool_calls": r["tool_calls"], "tokens": r["response_tokens"],
                "latency": self.latency, "model_seconds": r["model_seconds"], "tool_seconds": r["tool_seconds"],
                "stop_reason": r["stop_reason"], "metadata": self.metadata, "source": self.source,
                "prompt": self.prompt, "messages": r["messages"], "trajectories": r["trajectories"],
                "rollout_id": r["rollout_id"], "turn_rewards": r["turn_rewards"], "turn_unscorable": r["turn_unscorable"]}
        for key in ("group", "turn_advantages"):
            if r[key] is not None:
                line[key] = r[key]
        return line

    @classmethod
    def from_line(cls, data: dict) -> "EvalRecord":
        """An eval file's line, parsed (``id`` and ``reward`` at least; what it lacks takes its default)."""
        rollout = from_builtins({**data, "response_tokens": data.get("tokens", 0)})
        if rollout is None:
            raise EvalFileError("not an object")
        return cls(id=data.get("id"), sample=data.get("sample", 0), rollout=rollout, latency=data.get("latency"),
                   metadata=data.get("metadata") or {}, source=data.get("source"), prompt=data.get("prompt") or [])


def read_eval(path: str) -> tuple[dict, list[EvalRecord]]:
    """The header and the records of an ``agentrl eval -o`` file."""
    p = Path(path)
    if not p.is_file():
        raise EvalFileError(f"{path}: no such file; write one with `agentrl eval CONFIG --model ... -o {path}`")
    header, records = {}, []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvalFileError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if isinstance(row, dict) and "agentrl_eval" in row:
                header = row["agentrl_eval"]
            elif isinstance(row, dict) and "id" in row and "reward" in row:
                records.append(EvalRecord.from_line(row))
            else:
                raise EvalFileError(f"{path}:{lineno}: not an `agentrl eval` record (needs id and reward)")
    if not records:
        raise EvalFileError(f"{path}: no records; is it an `agentrl eval -o` file?")
    return header, records
