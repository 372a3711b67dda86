"""``agentrl compare A.jsonl B.jsonl`` and ``agentrl inspect``: what changed, per prompt, and where.

    agentrl compare base.jsonl tuned.jsonl --by metadata.expected_tools -o compare.json
    agentrl inspect compare.json --worst 5        # worst regressions, both traces side by side
    agentrl inspect tuned.jsonl --worst 5         # an eval file alone: its lowest-reward rollouts

Prompts are joined on ``id``; with several samples a prompt's reward is their mean. A prompt improved
(regressed) when its mean reward rose (fell); unchanged prompts are split into already-solved (both
solve it), never-solved (neither scores above 0) and the rest. The change in mean reward comes with its 95%
interval over prompts (a paired bootstrap: 2,000 resamples of the prompts, seed 0), so a difference that a
different draw of prompts could undo says so: on 88 prompts scored 0 or 1, ±0.05 is within it.
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

from agentrl.workflow.evalfile import EvalFileError, EvalRecord, read_eval
from agentrl.workflow.evaluate import SOLVED
from agentrl.workflow.show import Output, num, signed

EPS = 1e-9


CompareError = EvalFileError  # an eval or compare file cannot be read; the message says which and why


def _per_prompt(records: list[EvalRecord]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in records:
        out.setdefault(r.id, {"records": []})["records"].append(r)
    for pid, entry in out.items():
        rs = [r.rollout for r in entry["records"]]
        scored = [r.reward for r in rs if r.reward is not None]
        entry.update(reward=statistics.fmean(scored) if scored else None,
                     tool_calls=statistics.fmean(r.tool_calls for r in rs),
                     tokens=statistics.fmean(r.response_tokens for r in rs), metadata=entry["records"][0].metadata)
    return out


def slice_value(metadata: dict, key: str) -> str:
    node: Any = {"metadata": metadata}
    for part in (key if key.startswith("metadata.") else f"metadata.{key}").split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, list):
        return ",".join(str(v.get("name", v)) if isinstance(v, dict) else str(v) for v in node) or "(none)"
    return "(missing)" if node is None else str(node)


def _status(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "unscorable"
    if b - a > EPS:
        return "improved"
    if a - b > EPS:
        return "regressed"
    if a >= SOLVED:
        return "already solved"
    if a <= EPS:
        return "never solved"
    return "unchanged (partial)"


def _mean(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def interval(deltas: list[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """The 95% paired-bootstrap interval of the mean of per-prompt ``deltas`` (None with fewer than 2).

    >>> interval([1.0, 1.0, 1.0])
    (1.0, 1.0)
    """
    if len(deltas) < 2:
        return None
    draw = random.Random(seed)
    n = len(deltas)
    means = sorted(sum(draw.choices(deltas, k=n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def _summary(pairs: list[dict]) -> dict:
    out: dict[str, Any] = {"prompts": len(pairs)}
    for key in ("reward", "tool_calls", "tokens"):
        a, b = _mean([p[f"a_{key}"] for p in pairs]), _mean([p[f"b_{key}"] for p in pairs])
        out[key] = {"a": a, "b": b, "delta": None if a is None or b is None else b - a}
    out["reward"]["interval"] = interval([p["delta"] for p in pairs if p["delta"] is not None])
    statuses = ("improved", "regressed", "already solved", "never solved", "unchanged (partial)", "unscorable")
    out["counts"] = {s: sum(1 for p in pairs if p["status"] == s) for s in statuses}
    out["counts"]["unchanged"] = sum(out["counts"][s] for s in ("already solved", "never solved", "unchanged (partial)"))
    return out


def compare(a_path: str, b_path: str, *, by: list[str], out: Output, output: str | None = None) -> dict:
    (ha, ra), (hb, rb) = read_eval(a_path), read_eval(b_path)
    pa, pb = _per_prompt(ra), _per_prompt(rb)
    common = [pid for pid in pa if pid in pb]
    if not common:
        raise CompareError(f"{a_path} and {b_path} share no prompt ids; evaluate both on the same data")
    pairs = []
    for pid in common:
        a, b = pa[pid], pb[pid]
        pairs.append({"id": pid, "a_reward": a["reward"], "b_reward": b["reward"],
                      "delta": None if a["reward"] is None or b["reward"] is None else b["reward"] - a["reward"],
                      "a_tool_calls": a["tool_calls"], "b_tool_calls": b["tool_calls"], "a_tokens": a["tokens"],
                      "b_tokens": b["tokens"], "status": _status(a["reward"], b["reward"]), "metadata": a["metadata"]})
    summary = _summary(pairs)
    slices = {}
    for key in by:
        groups: dict[str, list[dict]] = {}
        for p in pairs:
            groups.setdefault(slice_value(p["metadata"], key), []).append(p)
        slices[key] = {value: _summary(ps) for value, ps in sorted(groups.items())}
    result = {"a": a_path, "b": b_path, "a_file": str(Path(a_path).resolve()), "b_file": str(Path(b_path).resolve()),
              "a_model": ha.get("model_arg", ha.get("model")),
              "b_model": hb.get("model_arg", hb.get("model")), "only_in_a": len(pa) - len(common),
              "only_in_b": len(pb) - len(common), "summary": summary, "slices": slices, "prompts": pairs}
    if output:
        Path(output).write_text(json.dumps(result, indent=1, default=str))
    _show(result, out)
    if output:
        out.line(f"written: {output}  (agentrl inspect {output} --worst 5)")
    out.emit({k: v for k, v in result.items() if k != "prompts"} | {"output": output})
    return result


def _show(result: dict, out: Output) -> None:
    s = result["summary"]
    out.table(f"A = {result['a_model'] or result['a']}   B = {result['b_model'] or result['b']}   ({s['prompts']} prompts)",
              ["", "A", "B", "Δ (B − A)"],
              [[label, num(s[k]["a"], d), num(s[k]["b"], d), signed(s[k]["delta"], d)]
               for label, k, d in (("mean reward", "reward", 3), ("tool calls / rollout", "tool_calls", 2),
                                   ("response tokens", "tokens", 1))])
    if s["reward"].get("interval"):
        lo, hi = s["reward"]["interval"]
        paired = s["prompts"] - s["counts"]["unscorable"]
        out.line(f"Δ mean reward, 95% interval over prompts (paired bootstrap, {paired} prompts): "
                 f"{signed(lo, 3)} to {signed(hi, 3)}" + ("  (includes 0)" if lo <= 0 <= hi else ""))
    c = s["counts"]
    out.table(None, ["prompts", "count", "share"],
              [[name, c[name], f"{100 * c[name] / max(1, s['prompts']):.0f}%"]
               for name in ("improved", "regressed", "unchanged", "already solved", "never solved",
                            "unchanged (partial)", "unscorable") if name in ("improved", "regressed", "unchanged") or c[name]])
    for key, groups in result["slices"].items():
        out.table(f"by {key}", [key, "n", "A reward", "B reward", "Δ", "improved", "regressed", "never solved"],
                  [[v, g["prompts"], num(g["reward"]["a"]), num(g["reward"]["b"]), signed(g["reward"]["delta"]),
                    g["counts"]["improved"], g["counts"]["regressed"], g["counts"]["never solved"]]
                   for v, g in groups.items()])
    if result["only_in_a"] or result["only_in_b"]:
        out.line(f"note: {result['only_in_a']} prompt(s) only in A, {result['only_in_b']} only in B (left out)")
