"""``agentrl rescore RUN --config NEW.yaml --out DIR``: score a run's stored rollouts again with other rewards.

    $ agentrl rescore runs/demo --config configs/demo_strict.yaml --out runs/demo-strict
    rescored 2560 rollouts of runs/demo with rv-61ebd5161c55 (was rv-0c1d...) in 9.1 s (281 rollouts/s)
    changed 412; passed -> failed 380, failed -> passed 32; unscorable before 0, now 0
    by reward: math passed -> failed 380 ...; by slice: split=train 371 ...
    steps that would have trained differently: 38 of 40 (1: 6 of 8 groups, ...)

No model runs: each stored trajectory (``rollouts.jsonl``) and its dataset row (the run's ``data/`` files, or
the row's source file) go through the same ``RewardSet.ascore`` as in training, so reward files run in the
sandbox as they did then. The old scores are never touched; DIR gets:

    scores.jsonl    a line per rollout, in the run's order:
                    {"rollout_id", "step", "validation", "prompt_id",
                     "old": {"reward", "components", "unscorable", "reward_version"}, "new": {...}}
    groups.jsonl    a line per GRPO group whose advantages change: old and new advantage of each rollout
    summary.json    counts, flips by reward and by slice, the steps that would have trained differently

Both runs of the same command write the same bytes (no times, sorted keys). A rollout that could not be scored
because of the infrastructure (a tool server down, the generation aborted) stays unscorable; one whose reward
cannot score it now is unscorable in ``new``, never 0. The file is streamed: memory holds one batch of
rollouts and the rewards of the training groups of the last few steps (a step's groups are summed once
rollouts two steps newer arrive; a rollout that comes after that is counted apart, not silently mixed in). Judge replies are cached by (model, prompt) in
``agentrl.rewards.judge``, so a rollout answer that repeats costs one judge call.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterator

from agentrl.errors import AgentrlError
from agentrl.record import RolloutRecord
from agentrl.rolloutfile import decode
from agentrl.rundir import RunDir
from agentrl.verl.args import run_norm_by_std
from agentrl.trajectory import make_item, make_sample

BATCH = 32  # rollouts scored concurrently
INFRA_STOPS = ("aborted", "tool_infra_error")  # stop reasons whose rollout no reward can score
SLICE_KEYS = ("task_type", "difficulty", "slice")  # row metadata a flip is also counted by
TOP = 20  # the largest group changes kept in summary.json (all are in groups.jsonl)
LAG = 2  # a step's groups are summed once rollouts of a step this much newer arrive


class RescoreError(AgentrlError):
    """The run, the config or the output folder cannot be used; the message says which and the fix."""


def _rows(run: RunDir) -> tuple[dict[str, dict], dict[str, dict]]:
    """The rows the run trained and validated on, as the agent loop read them: by prompt id and by source."""
    by_id: dict[str, dict] = {}
    by_source: dict[str, dict] = {}
    for path in (run.train_data, run.val_data):
        if not path.is_file():
            continue
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                row = json.loads(json.loads(line)["extra_info"]["agentrl_row"])
                by_id.setdefault(str(row["id"]), row)
                by_source.setdefault(str(row.get("source")), row)
    return by_id, by_source


class _Sources:
    """Rows read from a rollout's ``source`` (file:line) when the run directory has no data/ copy of them."""

    def __init__(self) -> None:
        self.files: dict[str, dict[int, dict] | None] = {}

    def row(self, source: Any, split: str) -> dict | None:
        from agentrl.dataset import DatasetError, loop_record, read_rows

        if not isinstance(source, str) or ":" not in source:
            return None
        path, _, line = source.rpartition(":")
        if path not in self.files:
            try:
                self.files[path] = {n: r for n, r in read_rows(path)}
            except DatasetError:
                self.files[path] = None
        rows = self.files[path]
        if rows is None or not line.isdigit() or int(line) not in rows:
            return None
        return loop_record(Path(path), int(line), rows[int(line)], split)


def _side(reward: Any, components: Any, unscorable: Any, version: Any) -> dict[str, Any]:
    return {"reward": reward, "components": dict(components or {}), "unscorable": unscorable, "reward_version": version}


def _passes(value: Any, threshold: float) -> bool | None:
    return None if value is None else value >= threshold


class _Tally:
    """Everything summary.json counts, fed one rollout at a time."""

    def __init__(self, threshold: float, thresholds: dict[str, float], groups: "_Groups") -> None:
        self.threshold, self.thresholds, self.group_writer = threshold, thresholds, groups
        self.counts: Counter = Counter()
        self.by_reward: dict[str, Counter] = defaultdict(Counter)
        self.by_slice: dict[str, Counter] = defaultdict(Counter)
        self.old_versions: Counter = Counter()
        # training groups of the steps not yet summed: step -> group -> [(rollout_id, old reward, new reward)]
        self.groups: dict[Any, dict[Any, list]] = defaultdict(lambda: defaultdict(list))
        self.newest_step: int | None = None

    @staticmethod
    def _flip(counter: Counter, old: bool | None, new: bool | None) -> None:
        if old is None and new is not None:
            counter["became scorable"] += 1
        elif old is not None and new is None:
            counter["became unscorable"] += 1
        elif old and not new:
            counter["passed -> failed"] += 1
        elif new and not old:
            counter["failed -> passed"] += 1

    def add(self, rec: RolloutRecord, row: dict | None, old: dict, new: dict) -> None:
        c = self.counts
        c["rollouts"] += 1
        c["unscorable before"] += old["unscorable"] is not None
        c["unscorable now"] += new["unscorable"] is not None
        c["changed"] += old["reward"] != new["reward"]
        self.old_versions[str(old["reward_version"])] += 1
        before, after = _passes(old["reward"], self.threshold), _passes(new["reward"], self.threshold)
        total = Counter()
        self._flip(total, before, after)
        c.update(total)
        for label in sorted(set(old["components"]) | set(new["components"])):
            if (label in old["components"]) != (label in new["components"]):  # a reward added or dropped
                side = "not in the new rewards" if label in old["components"] else "not in the old rewards"
                self.by_reward[label][side] += 1
                continue
            limit = self.thresholds.get(label, 0.5)
            self._flip(self.by_reward[label], _passes(old["components"].get(label), limit),
                       _passes(new["components"].get(label), limit))
        slices = [f"split={'val' if rec.validation else 'train'}"]
        metadata = (row or {}).get("metadata") or {}
        slices += [f"{k}={metadata[k]}" for k in SLICE_KEYS if isinstance(metadata.get(k), (str, int, float))]
        for name in slices:
            self.by_slice[name]["rollouts"] += 1
            self.by_slice[name].update(total)
        if not rec.validation:
            if rec.step in self.group_writer.done:  # its step was summed already (rollouts.jsonl out of order)
                c["rollouts after their step was summed (not in the advantage figures)"] += 1
                return
            self.groups[rec.step][rec.group or rec.prompt_id].append((rec.rollout_id, old["reward"], new["reward"]))
            if isinstance(rec.step, int) and not isinstance(rec.step, bool):
                self.newest_step = max(self.newest_step or rec.step, rec.step)

    def settle(self, final: bool = False) -> None:
        """Sum the groups of every step at least LAG steps behind the newest seen (all of them when ``final``), and
        forget their rewards: rollouts.jsonl comes in step order, so memory holds a few steps, not the run."""
        ready = [st for st in self.groups if final or (isinstance(st, int) and self.newest_step is not None
                                                       and st <= self.newest_step - LAG)]
        for st in sorted(ready, key=lambda v: str(v).zfill(12)):
            self.group_writer.step(st, self.groups.pop(st))


def _advantages(rewards: list[float | None], by_std: bool) -> list[float]:
    from agentrl.credit import group_advantages

    return group_advantages(rewards, norm_by_std=by_std)


class _Groups:
    """Each training group's advantages before and after, a step at a time, into groups.jsonl; which steps would
    have trained differently."""

    def __init__(self, path: Path, by_std: bool) -> None:
        self.fh = path.open("w", encoding="utf-8")
        self.by_std = by_std
        self.done: set = set()
        self.steps: dict[Any, Counter] = {}
        self.largest: list[tuple[float, str, str, Any, Any]] = []  # a min-heap of the TOP largest changes

    def step(self, step: Any, groups: dict[Any, list]) -> None:
        self.done.add(step)
        at = self.steps.setdefault(step, Counter())
        for group, members in sorted(groups.items(), key=lambda kv: str(kv[0])):
            old = _advantages([m[1] for m in members], self.by_std)
            new = _advantages([m[2] for m in members], self.by_std)
            delta = max(abs(a - b) for a, b in zip(old, new))
            at["groups"] += 1
            if delta <= 1e-6:
                continue
            at["groups changed"] += 1
            at["sign flips"] += sum((a > 1e-9 and b < -1e-9) or (a < -1e-9 and b > 1e-9) for a, b in zip(old, new))
            old_flat, new_flat = all(abs(a) <= 1e-9 for a in old), all(abs(b) <= 1e-9 for b in new)
            at["groups gaining a signal"] += old_flat and not new_flat
            at["groups losing their signal"] += new_flat and not old_flat
            self.fh.write(json.dumps({"step": step, "group": group, "max_advantage_change": round(delta, 6),
                                      "rollouts": [{"rollout_id": m[0], "old_reward": m[1], "new_reward": m[2],
                                                    "old_advantage": round(a, 6), "new_advantage": round(b, 6)}
                                                   for m, a, b in zip(members, old, new)]}, sort_keys=True) + "\n")
            # ties broken by (step, group) so that the same run always keeps the same TOP
            entry = (round(delta, 6), str(step).zfill(12), str(group), step, group)
            if len(self.largest) < TOP:
                heapq.heappush(self.largest, entry)
            else:
                heapq.heappushpop(self.largest, entry)

    def close(self) -> dict[str, Any]:
        self.fh.close()
        largest = sorted(self.largest, key=lambda t: (-t[0], t[1], t[2]))
        changed = {str(s): dict(sorted(c.items())) for s, c in self.steps.items() if c["groups changed"]}
        return {"steps": len(self.steps), "steps trained differently": len(changed), "by step": changed,
                "largest advantage changes": [{"step": s, "group": g, "max_advantage_change": d}
                                              for d, _, _, s, g in largest]}


def _records(path: Path) -> Iterator[RolloutRecord]:
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            record = decode(line)
            if record is None:
                raise RescoreError(f"{path}:{n}: not a rollout record (not a JSON object: {line[:60]!r}); a line "
                                   f"cut short by a crash can be removed, the rest is kept")
            yield record


def rescore(run_dir: str, config_path: str, out_dir: str, *, overrides: list[str] = (), out=None,
            batch: int = BATCH) -> dict[str, Any]:
    """Re-score every stored rollout of ``run_dir`` with the rewards of ``config_path``; write ``out_dir``."""
    from agentrl.config import load_config
    from agentrl.rewards import RewardSet
    from agentrl.rewards.review import DEFAULT_THRESHOLD, threshold_of

    run = RunDir(run_dir)
    if not run.rollouts.is_file():
        raise RescoreError(f"{run_dir}: no {RunDir.ROLLOUTS} here (found: "
                           f"{', '.join(sorted(p.name for p in run.path.iterdir())) if run.path.is_dir() else 'no such folder'}); "
                           f"give the run directory that `agentrl train` wrote")
    target = Path(out_dir).expanduser().resolve()
    if target == run.path.resolve():
        raise RescoreError(f"--out {out_dir} is the run directory itself; rescoring never writes over the old scores: "
                           f"give another folder")
    settings, _, _ = load_config(config_path, list(overrides))
    rewards = RewardSet.from_config(settings.rewards, where=f"{config_path}: agentrl.rewards")
    version = rewards.version
    thresholds = {c.label: getattr(c.reward, "pass_threshold", None) or DEFAULT_THRESHOLD for c in rewards.components}
    by_id, by_source = _rows(run)
    sources = _Sources()
    target.mkdir(parents=True, exist_ok=True)
    tally = _Tally(threshold_of(rewards), thresholds, _Groups(target / "groups.jsonl", run_norm_by_std(run.path)))
    started = time.perf_counter()

    def item_of(rec: RolloutRecord) -> dict | None:
        row = by_source.get(str(rec.source)) or by_id.get(str(rec.prompt_id))
        return row or sources.row(rec.source, "val" if rec.validation else "train")

    async def score(rec: RolloutRecord, row: dict | None) -> dict:
        if rec.stop_reason in INFRA_STOPS or str(rec.unscorable or "").startswith(("tools:", "model:")):
            return _side(None, {}, rec.unscorable, version)  # nothing of the model's to score: stays unscorable
        if row is None:
            return _side(None, {}, f"rescore: the row of prompt {rec.prompt_id!r} is neither in {run.data} nor at "
                                   f"{rec.source!r}", version)
        item = make_item(row["messages"], row.get("metadata"), **row.get("fields", {}), id=row["id"],
                         source=row.get("source"))
        steps = rec.to_dict()["trajectories"] or [{"response": ""}]  # the rewards take the steps as the episode gave them
        sample = make_sample(rec.rollout_id, steps, messages=rec.messages, reasoning=steps[-1].get("reasoning", ""))
        result = await rewards.ascore(sample, item)
        return _side(result.score, result.components, result.unscorable, version)

    async def main() -> None:
        pending: list[tuple[RolloutRecord, dict | None]] = []
        with (target / "scores.jsonl").open("w", encoding="utf-8") as fh:
            async def flush() -> None:
                news = await asyncio.gather(*(score(rec, row) for rec, row in pending))
                for (rec, row), new in zip(pending, news):
                    old = _side(rec.reward, rec.components, rec.unscorable, rec.reward_version)
                    tally.add(rec, row, old, new)
                    fh.write(json.dumps({"rollout_id": rec.rollout_id, "step": rec.step, "validation": rec.validation,
                                         "prompt_id": rec.prompt_id, "old": old, "new": new}, sort_keys=True) + "\n")
                pending.clear()
                tally.settle()

            for rec in _records(run.rollouts):
                pending.append((rec, item_of(rec)))
                if len(pending) >= batch:
                    await flush()
            await flush()

    asyncio.run(main())
    seconds = time.perf_counter() - started
    tally.settle(final=True)
    groups = tally.group_writer.close()
    summary = {"run": str(run.path), "config": str(config_path), "new_reward_version": version,
               "old_reward_versions": dict(sorted(tally.old_versions.items())),
               "pass_threshold": tally.threshold, "counts": dict(sorted(tally.counts.items())),
               "flips_by_reward": {k: dict(sorted(v.items())) for k, v in sorted(tally.by_reward.items())},
               "flips_by_slice": {k: dict(sorted(v.items())) for k, v in sorted(tally.by_slice.items())},
               "advantages": groups}
    (target / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    print(render(summary, seconds, target), file=out or sys.stdout, flush=True)
    return summary


def render(summary: dict[str, Any], seconds: float, target: Path) -> str:
    c = summary["counts"]
    n = c.get("rollouts", 0)
    old = ", ".join(summary["old_reward_versions"]) or "none"
    lines = [f"rescored {n} rollouts of {summary['run']} with {summary['new_reward_version']} (was {old}) in "
             f"{seconds:.1f} s ({n / seconds if seconds else 0:.0f} rollouts/s)",
             f"changed {c.get('changed', 0)}; passed -> failed {c.get('passed -> failed', 0)}, failed -> passed "
             f"{c.get('failed -> passed', 0)} (pass at {summary['pass_threshold']:g}); unscorable before "
             f"{c.get('unscorable before', 0)}, now {c.get('unscorable now', 0)}"]
    for title, table in (("by reward", summary["flips_by_reward"]), ("by slice", summary["flips_by_slice"])):
        parts = [f"{k}: " + ", ".join(f"{a} {b}" for a, b in v.items()) for k, v in table.items() if v]
        lines.append(f"{title}: " + ("; ".join(parts) if parts else "no flips"))
    adv = summary["advantages"]
    steps = ", ".join(f"{s}: {v.get('groups changed', 0)} of {v.get('groups', 0)} groups"
                      for s, v in list(adv["by step"].items())[:12])
    lines.append(f"steps that would have trained differently: {adv['steps trained differently']} of {adv['steps']}"
                 + (f" ({steps}{', ...' if len(adv['by step']) > 12 else ''})" if steps else ""))
    lines.append(f"written: {target / 'scores.jsonl'}, {target / 'groups.jsonl'}, {target / 'summary.json'}")
    return "\n".join(lines)
