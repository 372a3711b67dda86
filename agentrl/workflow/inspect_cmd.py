"""``agentrl inspect COMPARE_OR_EVAL [--worst N]``: read the worst cases, traces side by side.

    agentrl inspect compare.json --worst 5      # the 5 largest regressions (B worse than A)
    agentrl inspect tuned.jsonl --worst 5       # the 5 lowest-reward rollouts of one eval
    agentrl inspect runs/demo/rollouts.jsonl    # a training run's: with the advantage of each turn

For each: the prompt, the reference (``metadata.expected_answer`` / ``reference_answer``, else the
metadata), each side's reward with its components, and its trace: model text, tool calls → results.
Where rollouts have per-turn rewards, each turn's line gives its reward and the advantage
:func:`agentrl.credit.advantages` gives it within its group (``--credit``, default the run's
``agentrl.credit`` read from its spec beside rollouts.jsonl, else episode).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrl.record import RolloutRecord
from agentrl.workflow.compare import CompareError
from agentrl.workflow.evalfile import EvalRecord, read_eval
from agentrl.workflow.show import Output, num


def reference(metadata: dict) -> str:
    for key in ("expected_answer", "reference_answer", "answer"):
        if metadata.get(key) not in (None, ""):
            extra = metadata.get("expected_tools")
            tools = f"   tools: {', '.join(t.get('name', '?') for t in extra)}" if isinstance(extra, list) and extra else ""
            return f"{metadata[key]}{tools}"
    return json.dumps({k: v for k, v in metadata.items() if k != "allowed_tools"}, default=str)[:400]


def turn_line(record: RolloutRecord, k: int) -> str | None:
    """``turn k: reward x, advantage y`` for a rollout with per-turn rewards or advantages."""
    rewards, adv = record.turn_rewards or [], record.turn_advantages
    bad = (record.turn_unscorable or {}).get(str(k))
    reward = rewards[k] if k < len(rewards) else None
    if reward is None and bad is None and not any(r is not None for r in rewards) and adv is None:
        return None
    said = f"UNSCORABLE ({bad})" if bad else "none" if reward is None else num(reward)
    tail = f", advantage {adv[k]:+.3f}" if adv is not None and k < len(adv) else ""
    return f"turn {k + 1}: reward {said}{tail}"


def trace_text(record: RolloutRecord) -> str:
    """The rollout after its prompt (as :mod:`agentrl.rolloutfile` reads it): model text, tool calls and
    results, one line each."""
    lines = []
    for k, step in enumerate(record.trajectories):
        per_turn = turn_line(record, k)
        if per_turn:
            lines.append(per_turn)
        text = str(step.response or "").strip()
        if text:
            lines.append(f"model: {text}")
        results = {r.id: r for r in step.tool_results}
        for call in step.tool_calls:
            res = results.pop(call.id, None)
            args = json.dumps(call.arguments, default=str)
            lines.append(f"→ {call.name}({args})")
            if res is not None:
                lines.append(f"  ← {'ERROR ' if res.is_error else ''}{str(res.content)[:300]}")
        for res in results.values():
            lines.append(f"  ← {'ERROR ' if res.is_error else ''}{str(res.content)[:300]}")
        if step.user_reply:
            lines.append(f"user: {step.user_reply}")
    head = f"reward {num(record.reward)}"
    if record.components:
        head += "  (" + ", ".join(f"{k} {num(v, 2)}" for k, v in record.components.items()) + ")"
    if record.unscorable:
        head += f"  UNSCORABLE: {record.unscorable}"
    return "\n".join([head, f"stop: {record.stop_reason}, {record.response_tokens} tokens", *lines])


def _worst_record(records: list[EvalRecord]) -> EvalRecord:
    return min(records, key=lambda r: (r.rollout.reward is not None, r.rollout.reward or 0))


def _best_record(records: list[EvalRecord]) -> EvalRecord:
    return max(records, key=lambda r: r.rollout.reward if r.rollout.reward is not None else -1)


def _shown(record: EvalRecord) -> dict[str, Any]:
    """What ``--json`` shows of a rollout: every field of its record, and the eval line's (id, prompt, ...)."""
    return {**record.rollout.to_dict(), **record.to_dict()}


def _run_records(path: Path) -> list[EvalRecord] | None:
    """A run's rollouts.jsonl as inspect's records (id: the prompt), or None when it is not one."""
    from agentrl.rolloutfile import decode

    records = []
    with path.open("rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                return None
            if not isinstance(row, dict) or "rollout_id" not in row or "id" in row:
                return None  # an eval file's row (or its header): read as one below
            record = decode(line)
            if record is None:
                return None
            prompt = [m for m in record.messages if m.get("role") in ("system", "user")][:2] or [{"content": ""}]
            records.append(EvalRecord(id=record.prompt_id, sample=0, rollout=record, prompt=prompt))
    return records or None


def with_turn_advantages(records: list[EvalRecord], credit: str | None, run_dir: Path | None) -> None:
    """Fill ``turn_advantages`` per group (a run's: verl's group id and step; an eval's: the prompt) with
    ``credit``, or the run's own ``agentrl.credit``."""
    from agentrl.config import CreditSettings
    from agentrl.credit import fill

    settings = CreditSettings(method=credit) if credit else CreditSettings()
    if credit is None and run_dir is not None:
        from agentrl.ui.explorer import run_credit

        settings = run_credit(run_dir)
    for r in records:
        r.rollout.group = r.rollout.group or r.id
    fill([r.rollout for r in records], settings.method, **settings.options())


def inspect(path: str, *, worst: int, out: Output, credit: str | None = None) -> dict:
    p = Path(path)
    if not p.is_file():
        raise CompareError(f"{path}: no such file; give a file from `agentrl compare -o` or `agentrl eval -o`")
    text = p.read_text(encoding="utf-8")
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError:
        doc = None
    if isinstance(doc, dict) and "prompts" in doc and "a" in doc:
        return _inspect_compare(doc, worst, out)
    run_records = _run_records(p)
    if run_records is not None:
        records = run_records
        with_turn_advantages(records, credit, p.parent)
    else:
        _, records = read_eval(path)
        with_turn_advantages(records, credit, None)
    ranked = sorted(records, key=lambda r: (r.rollout.reward is not None, r.rollout.reward or 0.0))[:worst]
    cases = []
    for n, r in enumerate(ranked, 1):
        out.rule(f"#{n}  {r.id}")
        out.table(None, ["", "value"], [["prompt", r.prompt[-1]["content"]], ["reference", reference(r.metadata)],
                                        ["trace", trace_text(r.rollout)]], wrap=True)
        cases.append({"id": r.id, "reward": r.rollout.reward, "record": _shown(r)})
    out.emit({"file": path, "worst": cases})
    return {"worst": cases}


def _inspect_compare(doc: dict, worst: int, out: Output) -> dict:
    _, ra = read_eval(doc.get("a_file", doc["a"]))  # absolute: inspect may run from another folder
    _, rb = read_eval(doc.get("b_file", doc["b"]))
    by_a: dict[str, list[EvalRecord]] = {}
    by_b: dict[str, list[EvalRecord]] = {}
    for r in ra:
        by_a.setdefault(r.id, []).append(r)
    for r in rb:
        by_b.setdefault(r.id, []).append(r)
    regressions = sorted((p for p in doc["prompts"] if p["status"] == "regressed"), key=lambda p: p["delta"])[:worst]
    if not regressions:
        out.line(f"no regressions: B is at least as good as A on all {len(doc['prompts'])} prompts")
    cases = []
    for n, p in enumerate(regressions, 1):
        a, b = _best_record(by_a[p["id"]]), _worst_record(by_b[p["id"]])
        out.rule(f"#{n}  {p['id']}   Δ reward {p['delta']:+.3f}")
        out.line(f"prompt:    {a.prompt[-1]['content']}")
        out.line(f"reference: {reference(a.metadata)}")
        out.table(None, [f"A  {doc.get('a_model') or doc['a']}", f"B  {doc.get('b_model') or doc['b']}"],
                  [[trace_text(a.rollout), trace_text(b.rollout)]], wrap=True)
        cases.append({"id": p["id"], "delta": p["delta"], "a": _shown(a), "b": _shown(b)})
    out.emit({"compare": doc["a"] + " vs " + doc["b"], "regressions": cases})
    return {"regressions": cases}
