"""The rollout explorer's data: one page of a step's rollouts, made readable, with group advantages.

    idx = RolloutIndex("runs/demo"); idx.update()
    page = explorer_page(idx, step=3, page=1, filters=Filters(reward_min=0.5))
    page["rollouts"][0]["advantage"], page["rollouts"][0]["turns"]      # what the template shows
    page = explorer_page(idx, step=3, group="p-17")                      # the samples of one prompt side by side

Advantages are recomputed as ``agentrl_grpo`` computes them (agentrl/verl/grpo.py): per prompt within a step,
(reward - group mean) / (group std + 1e-6) over the scored rollouts only, unscorable ones get 0, and a
group of one scored rollout keeps its reward. Groups are keyed by (step, prompt_id), which matches verl's
per-sample uid unless a step drew the same prompt twice.

Each rollout also shows its per-turn rewards and advantages (``per_turn``): the advantages are the ones
:func:`agentrl.credit.advantages` gives with the run's ``agentrl.credit`` (its spec), over the whole group.
"""

from __future__ import annotations

import json
import re
import math
import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any

from agentrl.config import CreditSettings
from agentrl.record import RolloutRecord, StopReason
from agentrl.ui.index import RolloutIndex

PAGE_SIZE = 20
GROUPS_PER_PAGE = 4


@dataclass
class Filters:
    reward_min: float | None = None
    reward_max: float | None = None
    unscorable: str = "any"        # any | only | none
    tool: str | None = None
    text: str | None = None

    def active(self) -> bool:
        return any(v not in (None, "", "any") for v in asdict(self).values())


def advantages(idx: RolloutIndex, step: int, validation: bool = False) -> dict[str, float]:
    """Each rollout's GRPO advantage at ``step``, as the trainer computed it (the run's norm_by_std included)."""
    from agentrl.credit import group_advantages
    from agentrl.verl.args import run_norm_by_std

    out: dict[str, float] = {}
    if validation:
        return out  # validation rollouts are not trained on: no advantage
    by_std = run_norm_by_std(idx.run_dir)
    for members in idx.group_rewards(step).values():
        for (rid, _), adv in zip(members, group_advantages([r for _, r in members], norm_by_std=by_std)):
            out[rid] = adv
    return out


def run_credit(run_dir: Any) -> CreditSettings:
    """The run's ``agentrl.credit`` from its spec; episode when the run has none (an older run, an eval)."""
    from agentrl.errors import AgentrlError
    from agentrl.rundir import RunDir
    from agentrl.spec import RunSpec

    path = RunDir(run_dir).spec
    try:
        return RunSpec.read(path).credit if path.is_file() else CreditSettings()
    except AgentrlError:
        return CreditSettings()


def turn_advantages(idx: RolloutIndex, step: int, prompt_ids: list[str], validation: bool = False
                    ) -> dict[str, list[float] | None]:
    """Per-turn advantages of these prompts' groups at ``step``, by rollout id (agentrl.credit.fill)."""
    from agentrl.credit import fill

    if validation:
        return {}
    credit = run_credit(idx.run_dir)
    out: dict[str, list[float] | None] = {}
    for pid in dict.fromkeys(prompt_ids):
        rows, _ = idx.query(step, validation, limit=10**6, prompt_id=pid)
        records = [replace(rec, group=None, step=step) for rec in idx.read(rows) if rec is not None]  # by prompt
        fill(records, credit.method, **credit.options())
        out.update({r.rollout_id: r.turn_advantages for r in records})
    return out


def per_turn(record: RolloutRecord, advantages: list[float] | None) -> list[dict[str, Any]]:
    """One entry per assistant turn: its reward (None: not scored), why it could not be scored, its advantage."""
    rewards = record.turn_rewards or []
    bad = record.turn_unscorable or {}
    adv = advantages if advantages is not None else record.turn_advantages
    out = [{"turn": k + 1, "reward": r, "unscorable": bad.get(str(k)),
            "advantage": adv[k] if adv is not None and k < len(adv) else None} for k, r in enumerate(rewards)]
    return out if any(t["reward"] is not None or t["unscorable"] or t["advantage"] is not None for t in out) else []


def _pretty_args(args: Any) -> str:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return args
    return json.dumps(args, indent=1, ensure_ascii=False)


def _unparsed_text(response: str, call_id: str) -> str:
    """The text of malformed call ``call_id`` (``malformedN``: the Nth ``<tool_call>`` block of the response)."""
    blocks = re.findall(r"<tool_call>(.*?)(?:</tool_call>|$)", response, re.S)
    n = int(call_id[len("malformed"):]) if call_id[len("malformed"):].isdigit() else 0
    return (blocks[n] if n < len(blocks) else response).strip()


def readable(record: RolloutRecord | None, turn_advantages: list[float] | None = None) -> dict[str, Any]:
    """A rollout record (as :mod:`agentrl.rolloutfile` decodes it; None: a line that is not one) as the
    explorer shows it: turns with role, text, tool calls and results, and the per-turn rewards and advantages
    (``turn_advantages``: the group's, when the caller computed them)."""
    if record is None:
        return _unreadable()
    errors, unparsed = {}, {}
    for st in record.trajectories:
        for res in st.tool_results:
            if res.id is not None:
                errors[res.id] = bool(res.is_error)
                if res.name == "(unparsed)":  # a call the parser could not decode: show what the model wrote
                    unparsed[res.id] = _unparsed_text(str(st.response or ""), str(res.id))
    turns = []
    for m in record.messages or []:  # the conversation: chat messages, as the model's template took them
        if not isinstance(m, dict):
            continue
        if m.get("tool_call_id") in unparsed:
            owner = next((t for t in reversed(turns) if t["role"] == "assistant"), None)
            if owner is not None:
                owner["calls"].append({"id": m["tool_call_id"], "name": "(malformed call, as the model wrote it)",
                                       "arguments": unparsed[m["tool_call_id"]]})
        turn = {"role": m.get("role", "?"), "content": m.get("content") if isinstance(m.get("content"), str)
                else json.dumps(m.get("content"), ensure_ascii=False), "calls": [], "name": m.get("name"),
                "call_id": m.get("tool_call_id"), "is_error": errors.get(m.get("tool_call_id"), False)}
        for c in m.get("tool_calls") or []:
            fn = c.get("function", c) if isinstance(c, dict) else {}
            turn["calls"].append({"id": c.get("id") if isinstance(c, dict) else None, "name": fn.get("name"),
                                  "arguments": _pretty_args(fn.get("arguments"))})
        turns.append(turn)
    timings = {k: getattr(record, k) for k in TIMINGS if isinstance(getattr(record, k), (int, float))}
    reward = record.reward
    return {
        "rollout_id": record.rollout_id, "prompt_id": record.prompt_id, "step": record.step,
        "reward": reward if isinstance(reward, (int, float)) and math.isfinite(reward) else None,
        "components": record.components or {}, "unscorable": record.unscorable,
        "stop_reason": None if record.stop_reason is None else StopReason(record.stop_reason).value,
        "tool_calls": record.tool_calls, "response_tokens": record.response_tokens, "timings": timings,
        "turns": turns, "validation": bool(record.validation), "error": None,
        "per_turn": per_turn(record, turn_advantages),
        "tools": sorted({c.name for st in record.trajectories for c in st.tool_calls if c.name}),
    }


TIMINGS = ("seconds", "model_seconds", "tool_seconds", "reward_seconds")


def _unreadable() -> dict[str, Any]:
    return {"rollout_id": None, "prompt_id": None, "step": None, "reward": None, "components": {},
            "unscorable": None, "stop_reason": None, "tool_calls": 0, "response_tokens": None, "timings": {},
            "turns": [], "validation": False, "error": "this line of rollouts.jsonl is not valid JSON",
            "per_turn": [], "tools": []}


def explorer_page(idx: RolloutIndex, step: int, page: int = 1, filters: Filters | None = None,
                  validation: bool = False, group: str | None = None, groups: bool = False) -> dict[str, Any]:
    """One page: the step's rollouts (or, with ``groups``, whole prompt groups; with ``group``, one prompt)."""
    filters = filters or Filters()
    page = max(1, page)
    adv = advantages(idx, step, validation)
    credit = {}
    kw = dict(reward_min=filters.reward_min, reward_max=filters.reward_max, unscorable=filters.unscorable,
              tool=filters.tool or None, text=filters.text or None)
    if group is not None or groups:
        if group is not None:
            prompt_ids = [group]
        else:
            matching, _ = idx.query(step, validation, limit=10**9, **kw)
            prompt_ids = list(dict.fromkeys(r["prompt_id"] for r in matching))
        total = len(prompt_ids)
        chosen = prompt_ids[(page - 1) * GROUPS_PER_PAGE: page * GROUPS_PER_PAGE] if group is None else prompt_ids
        out_groups = []
        for pid in chosen:
            rows, _ = idx.query(step, validation, limit=10**6, prompt_id=pid)
            credit = turn_advantages(idx, step, [pid], validation)
            members = [_with_index(readable(rec, credit.get(row["rollout_id"])), row, adv)
                       for rec, row in zip(idx.read(rows), rows)]
            scored = [m["reward"] for m in members if m["reward"] is not None]
            out_groups.append({"prompt_id": pid, "rollouts": members,
                               "reward_mean": statistics.fmean(scored) if scored else None,
                               "prompt": _prompt_text(members[0]) if members else ""})
        pages = max(1, math.ceil(total / GROUPS_PER_PAGE)) if group is None else 1
        return {"step": step, "validation": validation, "page": page, "pages": pages, "total": total,
                "groups": out_groups, "rollouts": [], "tools": idx.tools(step, validation)}
    rows, total = idx.query(step, validation, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE, **kw)
    records = idx.read(rows)
    credit = turn_advantages(idx, step, [r["prompt_id"] for r in rows], validation)
    rollouts = [_with_index(readable(rec, credit.get(row["rollout_id"])), row, adv) for rec, row in zip(records, rows)]
    return {"step": step, "validation": validation, "page": page, "pages": max(1, math.ceil(total / PAGE_SIZE)),
            "total": total, "rollouts": rollouts, "groups": [], "tools": idx.tools(step, validation)}


def _with_index(view: dict[str, Any], row: dict[str, Any], adv: dict[str, float]) -> dict[str, Any]:
    view["advantage"] = adv.get(row["rollout_id"])
    view["line_offset"] = row["offset"]
    return view


def _prompt_text(view: dict[str, Any]) -> str:
    users = [t["content"] for t in view["turns"] if t["role"] == "user"]
    return users[0] if users else ""
