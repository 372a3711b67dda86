"""``agentrl eval`` and ``agentrl prior``: the training agent loop over a dataset, outside training.

    agentrl eval configs/demo.yaml --model base -o base.jsonl              # the demo's validation set
    agentrl eval configs/demo.yaml --model runs/demo -o tuned.jsonl        # its last checkpoint
    agentrl prior configs/demo.yaml --samples 5 --limit 50

``eval`` writes one JSON line per rollout: id, sample, reward and its components, tool calls, response
tokens, latency, the full trace (messages and per-turn tool calls/results) and the row's metadata.
With one sample it decodes greedily (as verl's validation does); with more it samples at the config's
temperature. ``prior`` samples the base model K times per prompt at the training temperature and sorts
prompts into always / sometimes / never solved: GRPO learns only from groups whose rewards differ.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from agentrl.workflow.evalfile import EvalRecord
from agentrl.workflow.local import LocalRunner, load_rows, preflight
from agentrl.workflow.models import eval_data, load_settings, resolve_model
from agentrl.workflow.show import Output

SOLVED = 0.999  # a reward at or above this counts as solved (rewards are in [0, 1])


def run_records(settings: Any, model_path: str, data: str, *, samples: int, temperature: float,
                limit: int | None, engine: str, out: Output, label: str) -> tuple[list[EvalRecord], dict]:
    rows = load_rows(data, limit)
    started = time.perf_counter()
    runner = LocalRunner(settings, model_path, engine=engine)
    loaded = time.perf_counter()
    try:
        with out.progress(label, total=len(rows) * samples) as tick:
            records = runner.run(rows, samples=samples, temperature=temperature, progress=tick)
        stats = runner.engine.stats() if hasattr(runner.engine, "stats") else {}
    finally:
        runner.close()
    info = {"model": model_path, "data": data, "rows": len(rows), "samples": samples, "temperature": temperature,
            "engine": getattr(runner.engine, "name", type(runner.engine).__name__),
            "seconds": round(time.perf_counter() - started, 2), "load_seconds": round(loaded - started, 2),
            "rollout_seconds": round(time.perf_counter() - loaded, 2), **stats}
    return records, info


def evaluate(config: str, model: str, *, data: str | None, samples: int, temperature: float | None,
             limit: int | None, output: str, engine: str, out: Output, overrides: list[str] = ()) -> dict:
    settings = load_settings(config, overrides)
    data = eval_data(settings, data, config)
    model_path = resolve_model(model, settings)
    load_rows(data)  # a malformed row stops here, before the model loads
    preflight(settings, config)
    temp = temperature if temperature is not None else (0.0 if samples == 1 else settings.temperature)
    records, info = run_records(settings, model_path, data, samples=samples, temperature=temp, limit=limit,
                                engine=engine, out=out, label=f"eval {model}")
    info["model_arg"] = model
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"agentrl_eval": info}) + "\n")
        for r in records:
            fh.write(json.dumps(r.to_dict(), default=str) + "\n")
    summary = summarize(records)
    result = {**info, **summary, "output": output}
    out.table(f"agentrl eval  {model}  on {data}", ["", "value"], [
        ["rollouts", summary["rollouts"]], ["mean reward", f"{summary['reward_mean']:.3f}"],
        ["solved", f"{summary['solved']} ({100 * summary['solved_share']:.0f}%)"],
        ["unscorable", summary["unscorable"]], ["tool calls / rollout", f"{summary['tool_calls_mean']:.2f}"],
        ["response tokens / rollout", f"{summary['tokens_mean']:.1f}"],
        *[[f"reward/{k}", f"{v:.3f}"] for k, v in summary["components"].items()],
        ["time", f"{info['rollout_seconds']}s for the rollouts ({info['engine']}"
                 + (f", {info['batches']} batches)" if "batches" in info else ")")
                 + f" + {info['load_seconds']}s to load"]])
    out.line(f"per-sample records: {output}")
    out.emit(result)
    return result


def summarize(records: list[EvalRecord]) -> dict:
    rollouts = [r.rollout for r in records]
    scored = [r.reward for r in rollouts if r.reward is not None]
    comps: dict[str, list[float]] = {}
    for r in rollouts:
        for k, v in (r.components or {}).items():
            if v is not None:
                comps.setdefault(k, []).append(v)
    return {"rollouts": len(records), "reward_mean": statistics.fmean(scored) if scored else float("nan"),
            "solved": sum(1 for x in scored if x >= SOLVED), "solved_share": (sum(1 for x in scored if x >= SOLVED)
                                                                            / len(records)) if records else 0.0,
            "unscorable": sum(1 for r in rollouts if r.reward is None),
            "tool_calls_mean": statistics.fmean(r.tool_calls for r in rollouts) if rollouts else 0.0,
            "tokens_mean": statistics.fmean(r.response_tokens for r in rollouts) if rollouts else 0.0,
            "components": {k: statistics.fmean(v) for k, v in comps.items()}}


def buckets(records: list[EvalRecord]) -> list[dict]:
    """Per prompt: samples, successes, rate and bucket (always / sometimes / never)."""
    per: dict[str, list[EvalRecord]] = {}
    for r in records:
        per.setdefault(r.id, []).append(r)
    rows = []
    for pid, rs in per.items():
        scored = [r.rollout.reward for r in rs if r.rollout.reward is not None]
        wins = sum(1 for reward in scored if reward >= SOLVED)
        rate = wins / len(scored) if scored else None
        bucket = ("unscorable" if rate is None else "always" if rate == 1 else "never" if rate == 0 else "sometimes")
        rows.append({"id": pid, "samples": len(rs), "solved": wins, "rate": rate, "bucket": bucket,
                     "mean_reward": statistics.fmean(scored) if scored else None,
                     "prompt": rs[0].prompt[-1]["content"], "metadata": rs[0].metadata})
    return rows


def verdict(share_sometimes: float, share_never: float) -> tuple[str, str]:
    """The tutorial's reading of the success-rate distribution."""
    if share_never == 1.0:
        return "fix the prior", ("the base model never succeeds: GRPO has no signal. Improve the prompt, tools, "
                                 "or start from a stronger model, or warm this one up on a few dozen "
                                 "demonstrations (rows with metadata.demonstration): `agentrl models warmup MODEL "
                                 "--data ROWS.jsonl --config CONFIG -o FOLDER`, then `model: FOLDER`")
    if share_sometimes >= 0.30:
        return "go", "a healthy share of prompts is in the signal band (sometimes solved)"
    if share_sometimes >= 0.15:
        return "go (thin)", "enough prompts in the signal band to learn from; more would learn faster"
    return "rework the data", ("too few prompts are sometimes solved: drop always-solved ones, add easier "
                               "variants of never-solved ones")


def prior(config: str, *, samples: int, limit: int | None, data: str | None, engine: str, out: Output,
          temperature: float | None = None, overrides: list[str] = ()) -> dict:
    settings = load_settings(config, overrides)
    data = data or settings.train_data
    load_rows(data)
    preflight(settings, config)
    temp = settings.temperature if temperature is None else temperature
    records, info = run_records(settings, settings.model, data, samples=samples, temperature=temp, limit=limit,
                                engine=engine, out=out, label="prior check")
    per = buckets(records)
    n = len(per)
    counts = {b: sum(1 for p in per if p["bucket"] == b) for b in ("always", "sometimes", "never", "unscorable")}
    share = {b: counts[b] / n if n else 0.0 for b in counts}
    word, why = verdict(share["sometimes"], share["never"])
    hist: dict[str, int] = {}
    for p in per:
        if p["rate"] is not None:
            hist[f"{p['solved']}/{p['samples']}"] = hist.get(f"{p['solved']}/{p['samples']}", 0) + 1
    result = {**info, "prompts": n, "counts": counts, "shares": share, "signal_band": share["sometimes"],
              "verdict": word, "why": why, "histogram": dict(sorted(hist.items(), key=lambda kv: int(kv[0].split("/")[0]))),
              "mean_reward": summarize(records)["reward_mean"], "per_prompt": per}
    out.table(f"prior check: base model, {n} prompts × {samples} samples at temperature {temp}",
              ["bucket", "prompts", "share"],
              [[b, counts[b], f"{100 * share[b]:.0f}%"] for b in ("always", "sometimes", "never")]
              + ([["unscorable", counts["unscorable"], f"{100 * share['unscorable']:.0f}%"]] if counts["unscorable"] else []))
    out.table("successes per prompt", ["solved", "prompts"], [[k, v] for k, v in result["histogram"].items()])
    out.line(f"signal band (sometimes solved): {100 * share['sometimes']:.0f}% of prompts  →  verdict: {word}")
    out.line(f"  {why}")
    out.line(f"  ({info['seconds']}s, {info['engine']} engine)")
    out.emit(result)
    return result
