"""What the job page knows about a run, read from its run directory only (no connection to the trainer).

    runs = find_runs("runs")                  # {"demo": Path("runs/demo"), ...}
    info = run_info(runs["demo"])             # status, step/total, %, ETA, latest reward, times, summary line
    info["status"]                            # running | finished | resumable | failed
    lines, offset = metric_lines(runs["demo"], 0)    # metrics.jsonl from a byte offset (for live updates)

Status comes from the files ``agentrl train`` keeps: ``.agentrl.lock`` is held (flock) while a trainer runs;
finished means metrics.jsonl reached the configured number of steps; otherwise a complete checkpoint in
``checkpoint_status.json`` makes the run resumable (``agentrl train`` again continues it), and without one
it failed (the detail is the last error in training.log).
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from agentrl.metrics import error_tail, last_complete_checkpoint
from agentrl.rundir import RunDir
from agentrl.runlog import read_jsonl
from agentrl.verl.metric_names import CHART_PREFIXES

RUN_MARKERS = RunDir.MARKERS
DOWNLOADS = (RunDir.CONFIG, RunDir.TRAINING_LOG, RunDir.METRICS, RunDir.ROLLOUTS)
ATTEMPT = re.compile(rb"^===== attempt (\d+) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) =====$", re.M)


def is_run(path: Path) -> bool:
    return RunDir(path).is_run()


def find_runs(root: str | Path) -> dict[str, Path]:
    """Run directories: ``root`` itself if it is one, else its sub-folders (two levels) that are."""
    root = Path(root).expanduser().resolve()
    if is_run(root):
        return {root.name: root}
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    for child in sorted(root.iterdir()):
        if is_run(child):
            found[child.name] = child
        elif child.is_dir() and not child.name.startswith("."):
            for grand in sorted(child.iterdir()):
                if is_run(grand):
                    found[f"{child.name}/{grand.name}"] = grand
    return found


def is_running(run_dir: Path) -> bool:
    return RunDir(run_dir).is_running()


def read_config(run_dir: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(RunDir(run_dir).config.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return doc if isinstance(doc, dict) else {}


def total_steps(run_dir: Path, config: dict[str, Any]) -> int | None:
    """The run's planned steps: agentrl.max_steps, else rows // batch_size * epochs, as ``agentrl train`` plans."""
    block = config.get("agentrl") or {}
    if block.get("max_steps"):
        return int(block["max_steps"])
    try:
        with (run_dir / "data" / "train.jsonl").open("rb") as fh:
            rows = sum(1 for line in fh if line.strip())
        return rows // int(block.get("batch_size") or 1) * int(block.get("epochs") or 1) or None
    except (OSError, ValueError):
        return None


def metric_lines(run_dir: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """metrics.jsonl lines from a byte offset, without verl's raw dict (what the charts need is kept)."""
    records, end = read_jsonl(RunDir(run_dir).metrics, offset)
    return [slim(r) for r in records], end


def slim(record: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in record.items() if k != "verl" and (isinstance(v, (int, float, str)) or v is None)}
    for k, v in (record.get("verl") or {}).items():
        if k.startswith(CHART_PREFIXES):
            out.setdefault(k, v)
    return out


def _attempts(run_dir: Path) -> list[tuple[int, float]]:
    """``(attempt, start time)`` of each attempt; training.log's head gives the first one's time, and the
    command line the runner saves per attempt (logs/command.N.json) counts them all."""
    try:
        with RunDir(run_dir).training_log.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return []
    found = [(int(n), time.mktime(time.strptime(t.decode(), "%Y-%m-%d %H:%M:%S"))) for n, t in ATTEMPT.findall(head)]
    for path in (run_dir / "logs").glob("command.*.json"):
        n = path.name.split(".")[1]
        if n.isdigit() and all(a != int(n) for a, _ in found):
            found.append((int(n), path.stat().st_mtime))
    return sorted(found)


def _parse_time(text: Any) -> float | None:
    try:
        return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        return None


def summary_line(last: dict[str, Any]) -> str:
    """The one-line state of the optimiser: ``loss … • grad … • lr … @ step N``."""
    def fmt(v: Any) -> str:
        return "n/a" if not isinstance(v, (int, float)) else f"{v:.4g}"
    return f"loss {fmt(last.get('loss'))} • grad {fmt(last.get('grad_norm'))} • lr {fmt(last.get('learning_rate'))} " \
           f"@ step {last.get('step', 0)}"


def _last_lines(path: Path, n: int) -> list[str]:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            block, data = 64 * 1024, b""
            while size and data.count(b"\n") <= n:
                step = min(block, size)
                size -= step
                fh.seek(size)
                data = fh.read(step) + data
                block *= 2
    except OSError:
        return []
    return [re.sub(r"\x1b\[[0-9;]*m", "", t) for t in data.decode("utf-8", "replace").splitlines()[-n:]]


def log_tail(run_dir: Path, n: int = 200) -> list[str]:
    return _last_lines(RunDir(run_dir).training_log, n)


def _last_metric(run_dir: Path) -> dict[str, Any]:
    """The last training line of metrics.jsonl (validation lines, ``"validation": true``, are skipped)."""
    for line in reversed(_last_lines(RunDir(run_dir).metrics, 8)):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and not record.get("validation"):
            return slim(record)
    return {}


def run_info(run_dir: Path, name: str | None = None) -> dict[str, Any]:
    """Everything the run list and the run page's header show."""
    run_dir = Path(run_dir)
    config = read_config(run_dir)
    total = total_steps(run_dir, config)
    last = _last_metric(run_dir)
    step = int(last.get("step") or 0)
    running = is_running(run_dir)
    checkpoint = last_complete_checkpoint(run_dir)
    attempts = _attempts(run_dir)
    started = attempts[0][1] if attempts else RunDir(run_dir).config.stat().st_mtime \
        if RunDir(run_dir).config.exists() else None
    detail = ""
    if running:
        status = "running"
    elif total and step >= total:
        status = "finished"
    else:
        status = "resumable" if checkpoint else "failed"
        if not RunDir(run_dir).training_log.exists():
            start_error = RunDir(run_dir).start_error
            detail = (f"failed before training started: {start_error.read_text().strip()}" if start_error.is_file()
                      else "never started (no training.log)")
        else:
            tail = error_tail(RunDir(run_dir).training_log, lines=8)
            detail = tail if re.search(r"(Error|Exception)\b", tail) else \
                "training.log ends without an error: the trainer was interrupted or killed"
        if checkpoint:
            detail = f"stopped at step {step}; `agentrl train` on this config resumes from step {checkpoint['step']}\n" + detail
    mtimes = [p.stat().st_mtime for p in (RunDir(run_dir).metrics, RunDir(run_dir).training_log) if p.exists()]
    ended = None if running or not mtimes else max(mtimes)
    eta = _eta(run_dir, step, total) if running else None
    return {
        "name": name or run_dir.name, "path": str(run_dir), "status": status, "detail": detail, "step": step,
        "total": total, "percent": round(100.0 * step / total, 1) if total else None,
        "reward": last.get("reward_mean"), "started": started, "ended": ended, "eta_seconds": eta,
        "summary": summary_line(last) if last else "no step finished yet",
        "checkpoint": checkpoint.get("step") if checkpoint else None, "attempts": len(attempts),
    }


def _first_metric(run_dir: Path) -> dict[str, Any]:
    try:
        with RunDir(run_dir).metrics.open("rb") as fh:
            return json.loads(fh.readline())
    except (OSError, ValueError):
        return {}


def _eta(run_dir: Path, step: int, total: int | None) -> float | None:
    """Remaining steps times the pace between the first and last step lines (start-up left out).
    Reads only those two lines, so a long run's metrics.jsonl costs nothing per poll."""
    if not total or step >= total:
        return None
    first, last = _first_metric(run_dir), _last_metric(run_dir)
    t0, t1 = _parse_time(first.get("time")), _parse_time(last.get("time"))
    s0, s1 = first.get("step"), last.get("step")
    if None not in (t0, t1) and isinstance(s0, int) and isinstance(s1, int) and s1 > s0:
        pace = (t1 - t0) / (s1 - s0)
    elif isinstance(last.get("step_time"), (int, float)):
        pace = last["step_time"]
    else:
        return None
    return max(0.0, pace * (total - step))


def checkpoints(run_dir: Path) -> list[dict[str, Any]]:
    """verl's checkpoints: step, whether the HF model is complete, file count, size, the export command."""
    out = []
    from agentrl.verl import checkpoints as layout

    complete = last_complete_checkpoint(run_dir)
    for step, folder in layout.steps(RunDir(run_dir).checkpoints):
        files = [p for p in folder.rglob("*") if p.is_file()]
        hf = layout.hf_of(folder)
        has_model = layout.has_model(hf)
        out.append({"step": step, "files": len(files), "bytes": sum(p.stat().st_size for p in files),
                    "hf_model": str(hf) if has_model else None,
                    "complete": bool(complete and complete.get("step", -1) >= step and has_model),
                    "export": f"agentrl export {run_dir} --step {step} {run_dir.name}-step{step}"})
    return sorted(out, key=lambda c: c["step"])


def downloads(run_dir: Path) -> list[dict[str, Any]]:
    return [{"name": n, "bytes": (run_dir / n).stat().st_size} for n in DOWNLOADS if (run_dir / n).is_file()]


@lru_cache(maxsize=1)
def _reward_plugins() -> dict[str, str]:
    """reward name -> "plugin P from distribution D: description", from the plugins installed here."""
    try:
        from agentrl import plugins

        table = plugins.rewards()
    except Exception as exc:  # a broken third-party plugin must not take the page down
        return {"": f"plugins could not be listed ({type(exc).__name__}: {exc})"}
    out = {}
    for name, reg in table.items():
        desc = getattr(reg, "description", "") or ""
        out[name] = (f"plugin {getattr(reg, 'plugin', '?')} from {getattr(reg, 'distribution', '?')}"
                     + (f": {desc}" if desc else ""))
    return out


def _plugin_origin(name: str) -> str:
    known = _reward_plugins()
    return known.get(name) or known.get("") or "a plugin not installed here (agentrl plugins lists what is)"


def config_view(run_dir: Path) -> dict[str, Any]:
    """The configuration as the run page shows it: agentrl block, verl overrides, rewards with source, tools."""
    config = read_config(run_dir)
    block = dict(config.get("agentrl") or {})
    source = config.get("source")
    base = Path(source).parent if source else run_dir
    rewards = []
    for r in block.pop("rewards", None) or []:
        r = r if isinstance(r, dict) else {"name": str(r)}
        name = str(r.get("name", ""))
        if name.endswith(".py") or "/" in name:
            path = (base / name) if not Path(name).is_absolute() else Path(name)
            origin = f"file {path}" + ("" if path.exists() else " (missing now)")
        else:
            origin = _plugin_origin(name)
        rewards.append({"weight": 1.0, **r, "source": origin})
    tools = block.pop("tools", None)
    return {"agentrl": block, "verl_overrides": config.get("verl_overrides") or {}, "rewards": rewards,
            "tools": tools, "source": source, "command_line_overrides": config.get("command_line_overrides") or []}
