"""Per-step metrics, console progress and checkpoint bookkeeping for a run directory.

    {"step": 3, "validation": false, "reward_mean": 0.61, "reward/math": 0.6, "frac_reward_zero_std": 0.25, ...}
    {"step": 3, "validation": true, "val/reward_mean": 0.55, "val/reward/math": 0.5, "val/rollouts": 64, ...}

verl logs its own step metrics (loss, KL, entropy, grad norm, ...) to a JSONL file; the agent loop logs
every rollout to ``rollouts.jsonl`` with the trainer step it was drawn for and whether it is validation.
The Watcher joins the two on (step, validation) into ``metrics.jsonl``: training and validation are two
streams, never mixed. It prints progress and records complete checkpoints in ``checkpoint_status.json``.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

from agentrl.failures import diagnose
from agentrl.placement import Placer
from agentrl.record import RolloutRecord
from agentrl.rolloutfile import decode, line_key, read_new
from agentrl.rundir import RunDir
from agentrl.runlog import read_jsonl
from agentrl.stepwarnings import no_signal, sampler_fault
from agentrl.tripwires import Tripwires, heldout_labels
from agentrl.verl.metric_names import SCORE_MEAN, TRAINING_PREFIXES, VALIDATION_PREFIX, VERL_FALLBACKS, VERL_KEYS


def _finite(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def rollout_summary(rollouts: list[RolloutRecord]) -> dict[str, Any]:
    """Aggregate the training rollouts of one step (records as :mod:`agentrl.rolloutfile` reads them)."""
    scored = [r for r in rollouts if r.unscorable is None and _finite(r.reward) is not None]
    rewards = [float(r.reward) for r in scored]
    out: dict[str, Any] = {
        "rollouts": len(rollouts),
        "unscorable": len(rollouts) - len(scored),
        "reward_mean": statistics.fmean(rewards) if rewards else None,
        "reward_std": statistics.pstdev(rewards) if len(rewards) > 1 else (0.0 if rewards else None),
        "tool_calls_per_rollout": statistics.fmean(r.tool_calls or 0 for r in rollouts) if rollouts else None,
    }
    out["frac_reward_zero_std"] = zero_spread_share(scored)
    versions = sorted({str(r.reward_version) for r in rollouts if r.reward_version})
    if versions:  # the reward set's version(s) that gave these scores (one, unless the rewards changed mid-step)
        out["reward_version"] = versions[0] if len(versions) == 1 else versions
    parts: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        for name, value in (r.components or {}).items():
            if _finite(value) is not None:
                parts[name].append(float(value))
    for name, values in sorted(parts.items()):
        out[f"reward/{name}"] = statistics.fmean(values)
    stale = [r.staleness for r in rollouts if isinstance(r.staleness, int)]
    if stale:  # off-policy runs: how many updates behind the trained policy each rollout was generated
        out["staleness_mean"] = statistics.fmean(stale)
        out["staleness_max"] = max(stale)
        out.update({f"staleness/{k}": stale.count(k) for k in sorted(set(stale))})  # rollouts per value
    return out


def zero_spread_share(scored: list[RolloutRecord]) -> float | None:
    """The share of prompt groups (samples of one prompt, ``prompt_id``) whose rewards are all equal: GRPO
    gives such a group zero advantages, so it teaches nothing. None when no group has two scored samples."""
    groups: dict[Any, list[float]] = defaultdict(list)
    for r in scored:
        groups[r.prompt_id].append(float(r.reward))
    sized = [g for g in groups.values() if len(g) > 1]
    return sum(max(g) - min(g) < 1e-9 for g in sized) / len(sized) if sized else None


def last_complete_checkpoint(run_dir: Path) -> dict | None:
    path = RunDir(run_dir).checkpoint_status
    if not path.exists():
        return None
    try:
        status = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return status if status.get("complete") else None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def check_checkpoint(run_dir: Path) -> dict | None:
    """Record verl's newest checkpoint once it is complete (verl writes the tracker file last)."""
    from agentrl.verl import checkpoints as layout

    ckpt_root = RunDir(run_dir).checkpoints
    step = layout.latest_step(ckpt_root)
    if step is None:
        return None
    folder, hf = layout.step_dir(ckpt_root, step), layout.hf_dir(ckpt_root, step)
    previous = last_complete_checkpoint(run_dir)
    if previous and previous.get("step") == step:
        return None
    from agentrl.lora_merge import merge_lora_checkpoint

    if (hf / "config.json").exists():
        # LoRA: verl wrote adapter names; make each checkpoint a plain HF model (older ones too, which an
        # attempt whose watcher had died left unmerged). Never one past the tracker's step: that is a save an
        # attempt stopped in the middle of, which the resumed run writes again.
        for at, older in layout.steps(ckpt_root):
            if at <= step and (older == folder or layout.lora_meta_files(older)[0].exists()):
                merge_lora_checkpoint(older / "actor")
    if not layout.has_model(hf):
        return None
    status = {"complete": True, "step": step, "path": str(folder), "hf_model": str(hf),
              "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    _write_atomic(RunDir(run_dir).checkpoint_status, json.dumps(status, indent=2))
    return status


def error_tail(log_path: Path, lines: int = 12) -> str:
    """The most telling lines at the end of training.log (the last traceback, else the last lines), after a
    plain account of the failure where it is a known kind (agentrl.failures)."""
    try:
        text = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no training.log)"
    text = [re.sub(r"\x1b\[[0-9;]*m", "", t) for t in text[-4000:]]
    known = diagnose("\n".join(text))
    errors = [i for i, t in enumerate(text) if re.search(r"(Error|Exception)\b.*:", t) and "Warning" not in t]
    if errors:
        last = errors[-1]
        tail = "\n".join(text[max(0, last - lines + 2): last + 2])
    else:
        tail = "\n".join(text[-lines:])
    return f"{known}\n{tail}" if known else tail


def _step_of(line: bytes) -> tuple[Any, bool] | None:
    """(step, validation) of one JSONL line; None for a line that is not a JSON object."""
    key = line_key(line)
    return None if key is None else (key.step, bool(key.validation))


def rewind(run_dir: Path, step: int, attempt: int) -> int:
    """Before resuming from checkpoint ``step``: set aside every line of metrics.jsonl and rollouts.jsonl
    that the resumed run will write again (training past ``step``; validation at ``step`` and later, as
    the resumed run validates before its first step). They move to ``logs/rewound.ATTEMPT.*.jsonl``, so
    nothing is lost and no step appears twice. Returns how many lines moved.

    The files are streamed, a line at a time: a long run's rollouts.jsonl (gigabytes) costs a resume one
    read, and memory for one line."""
    moved = 0
    for name in (RunDir.METRICS, RunDir.ROLLOUTS, RunDir.TRAINED):
        path = Path(run_dir) / name
        if not path.exists():
            continue
        aside = Path(run_dir) / "logs" / f"rewound.{attempt}.{Path(name).name}"
        tmp = path.with_name(path.name + ".tmp")
        dropped = 0
        with path.open("rb") as src, tmp.open("wb") as keep, aside.open("ab") as drop:
            for line in src:
                found = _step_of(line)
                if found is None:
                    rewound = True  # not a record: a line cut short when the last attempt died
                else:
                    at, validation = found
                    rewound = isinstance(at, int) and (at >= step if validation else at > step)
                (drop if rewound else keep).write(line if line.endswith(b"\n") else line + b"\n")
                dropped += rewound
        if dropped:
            os.replace(tmp, path)
            moved += dropped
        else:
            tmp.unlink()
        if aside.stat().st_size == 0:
            aside.unlink()
    _recover_lost_steps(Path(run_dir), step)
    return moved


def _recover_lost_steps(run_dir: Path, step: int) -> None:
    """verl saves a step's checkpoint before it logs the step's metrics: an attempt stopped in between
    leaves a checkpointed step with rollouts but no metrics line. Write that line from its rollouts
    (``"recovered": true``, without verl's own metrics) so the curve has no hole. Only the rollouts of
    such steps are parsed."""
    metrics, _ = read_jsonl(RunDir(run_dir).metrics)
    have = {m.get("step") for m in metrics if not m.get("validation")}
    by_step: dict[int, list[RolloutRecord]] = defaultdict(list)
    path = RunDir(run_dir).rollouts
    if path.exists():
        with path.open("rb") as fh:
            for line in fh:
                found = _step_of(line)
                if found is None or found[1] or not isinstance(found[0], int):
                    continue
                if 0 < found[0] <= step and found[0] not in have:
                    record = decode(line)
                    if record is not None:
                        by_step[found[0]].append(record)
    lost = sorted(by_step)
    if not lost:
        return
    for n in lost:
        metrics.append({"step": n, "validation": False, "recovered": True, **rollout_summary(by_step[n])})
    metrics.sort(key=lambda m: (m.get("step") if isinstance(m.get("step"), int) else -1, bool(m.get("validation"))))
    _write_atomic(RunDir(run_dir).metrics, "".join(json.dumps(m) + "\n" for m in metrics))


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else "n/a"


class Watcher:
    """Follows verl's metric file and rollouts.jsonl; writes one metrics.jsonl line per training step
    (``"validation": false``) and one per evaluation (``"validation": true``, keys ``val/...``)."""

    def __init__(self, run_dir: Path, attempt: int, total_steps: int, out: TextIO = sys.stdout,
                 start_step: int = 0, group_size: int = 1) -> None:
        self.run_dir = Path(run_dir)
        self.verl_file = RunDir(self.run_dir).verl_metrics(attempt)
        self.rollouts_file = RunDir(self.run_dir).rollouts
        self.metrics_file = RunDir(self.run_dir).metrics
        self.total = total_steps
        self.out = out
        self.started = time.monotonic()
        self.verl_offset = 0
        self.rollout_offset = self.rollouts_file.stat().st_size if self.rollouts_file.exists() else 0
        # rollouts by (trainer step, validation); each rollout names the step it was drawn for
        self.pending: dict[tuple[Any, bool], list[RolloutRecord]] = defaultdict(list)
        self.first_step: int | None = None
        self.first_step_at = 0.0
        self.start_step = start_step
        self.last_step = start_step
        # off-policy runs: rollouts wait in logs/generated.jsonl until logs/trained.jsonl names their group
        self.placer = Placer(self.run_dir, group_size)
        self.silent_steps = 0  # consecutive training steps with no learning signal
        self.sampler_warned = False
        self.log_file = RunDir(self.run_dir).training_log  # tool-server restarts the workers report are echoed
        self.log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        self.tripwires = Tripwires(heldout=_heldout_rewards(self.run_dir))  # reward-hacking signals per step

    def poll(self) -> None:
        self.placer.place()
        self._echo_tool_events()
        rollouts, self.rollout_offset = read_new(self.rollouts_file, self.rollout_offset)
        for r in rollouts:
            self.pending[(r.step, bool(r.validation))].append(r)
        records, self.verl_offset = read_jsonl(self.verl_file, self.verl_offset)
        for rec in records:
            step, data = int(rec.get("step", 0)), rec.get("data", {})
            if any(k.startswith(VALIDATION_PREFIX) for k in data):
                self._validation(step, data)
            if any(k.startswith(TRAINING_PREFIXES) for k in data):
                self._step(step, data)
        status = check_checkpoint(self.run_dir)
        if status:
            print(f"  checkpoint saved: step {status['step']} -> {status['hf_model']}", file=self.out, flush=True)

    def _echo_tool_events(self) -> None:
        """Print the lines the workers wrote to training.log about tool servers (restarts, with the reason)."""
        try:
            with self.log_file.open("rb") as fh:
                fh.seek(self.log_offset)
                chunk = fh.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.log_offset += len(complete)
        for raw in complete.decode(errors="replace").splitlines():
            at = raw.find("agentrl: tool server ")
            if at >= 0:  # Ray prefixes worker lines with "(AgentLoopWorker pid=...)"
                print(f"  {raw[at:]}", file=self.out, flush=True)

    def _write(self, line: dict) -> None:
        with self.metrics_file.open("a") as fh:
            fh.write(json.dumps(line) + "\n")

    def _validation(self, step: int, data: dict) -> None:
        rollouts = self.pending.pop((step, True), [])
        summary = rollout_summary(rollouts)
        line: dict[str, Any] = {"step": step, "validation": True, "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
        line.update({f"val/{k}": v for k, v in summary.items()})
        line["verl"] = {k: _finite(v) for k, v in data.items() if k.startswith("val") and _finite(v) is not None}
        self._write(line)
        self.tripwires.on_validation(step, line)
        parts = ", ".join(f"{k[len('val/reward/'):]} {_fmt(v)}" for k, v in line.items() if k.startswith("val/reward/"))
        print(f"validation at step {step}: reward {_fmt(line['val/reward_mean'])}" + (f" ({parts})" if parts else "")
              + f"  tool calls/rollout {_fmt(line['val/tool_calls_per_rollout'])}  rollouts {line['val/rollouts']}"
              + (f"  unscorable {line['val/unscorable']}" if line["val/unscorable"] else ""), file=self.out, flush=True)

    def _step(self, step: int, data: dict) -> None:
        rollouts = self.pending.pop((step, False), [])
        line: dict[str, Any] = {"step": step, "validation": False, "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
        line.update(rollout_summary(rollouts))
        if line["reward_mean"] is None and not rollouts:
            line["reward_mean"] = _finite(data.get(SCORE_MEAN))
        for ours, theirs in VERL_KEYS.items():
            theirs = theirs if theirs in data else VERL_FALLBACKS.get(ours, theirs)
            if theirs in data:
                line[ours] = _finite(data[theirs])
        line["verl"] = {k: _finite(v) for k, v in data.items() if not k.startswith("val") and _finite(v) is not None}
        for key, why in (("warning", no_signal(line)), ("rollout_warning", sampler_fault(line))):
            if why:
                line[key] = why
        alerts = self.tripwires.on_step(step, line, rollouts)
        if alerts:
            line["alerts"] = [a.to_dict() for a in alerts]
        self._write(line)
        now = time.monotonic()
        if self.first_step is None:
            self.first_step, self.first_step_at = step, now
        self.last_step = step
        elapsed = now - self.started
        remaining = max(0, self.total - step)
        # steady-state pace: time between step lines (start-up excluded); verl's own step time at first
        done_since_first = step - self.first_step
        pace = (now - self.first_step_at) / done_since_first if done_since_first else (line.get("step_time") or 0.0)
        eta = pace * remaining
        extra = f"  unscorable {line['unscorable']}" if line.get("unscorable") else ""
        if line.get("staleness_max") is not None:
            extra += f"  staleness {line['staleness_mean']:.2f} (max {line['staleness_max']})"
        print(f"step {step}/{self.total}  elapsed {_clock(elapsed)}  eta {_clock(eta)}  reward {_fmt(line.get('reward_mean'))}"
              f"  tool calls/rollout {line.get('tool_calls_per_rollout') or 0:.2f}{extra}", file=self.out, flush=True)
        for alert in alerts:
            print(f"  {alert}", file=self.out, flush=True)
        if line.get("rollout_warning") and not self.sampler_warned:
            self.sampler_warned = True  # said once: it holds for every step of the run
            print(f"  warning: step {step}: {line['rollout_warning']}", file=self.out, flush=True)
        why = line.get("warning", "")
        self.silent_steps = self.silent_steps + 1 if why else 0
        if why and self.silent_steps in (1, 5) or self.silent_steps and self.silent_steps % 20 == 0:
            print(f"  warning: step {step}: {why}" + (f" ({self.silent_steps} steps in a row)" if self.silent_steps > 1 else ""),
                  file=self.out, flush=True)

    def finish(self) -> None:
        done = self.last_step - self.start_step
        print(f"agentrl: done, step {self.last_step} of {self.total} ({done} trained in this attempt) in "
              f"{_clock(time.monotonic() - self.started)}; metrics in {self.metrics_file}", file=self.out, flush=True)


def _heldout_rewards(run_dir: Path) -> list[str]:
    """The run's weight-0 rewards (logged, not trained on): the tripwires' held-out checks."""
    try:
        rewards = json.loads(RunDir(run_dir).spec.read_text()).get("rewards")
    except (OSError, ValueError, AttributeError):
        return []
    return heldout_labels(rewards)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60:d}:{seconds % 60:02d}"
