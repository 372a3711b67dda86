"""bench_train.py's reading of finished run directories, and its tables: nothing here trains.

    from train_report import analyse, startups
    analyse(Path("runs/demo"))    # prints the per-step table; returns (start-ups, steady s/step, % outside the model)
    startups(Path("runs/demo"))   # per attempt: seconds from verl's launch (and the command's start) to its first rollout

It reads ``metrics.jsonl``, ``rollouts.jsonl``, ``training.log`` (verl's start-up milestones, one section an
attempt), ``logs/command.N.json``, and the two files bench_train.py writes beside them: ``bench_starts.json`` (when
each attempt's `agentrl train` command started) and ``bench_peak_rss.json`` (the process tree's peak memory).
``bench_train.py --run DIR`` is :func:`analyse` alone; its other modes train first, then print with the
``print_*`` functions here.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path

from agentrl.rolloutfile import read_records
from agentrl.rundir import RunDir

STARTS = "bench_starts.json"  # in the run directory: when each attempt's `agentrl train` command started


def command_starts(run: Path) -> dict[str, float]:
    try:
        return json.loads((run / STARTS).read_text())
    except (OSError, ValueError):
        return {}


def attempt_launches(run: Path) -> list[tuple[int, float]]:
    """(attempt number, verl's launch time) for each attempt in training.log. Its header has whole seconds
    of local time; the runner writes logs/command.N.json just before, and its time is finer."""
    try:
        log = (run / "training.log").read_text(errors="replace")
    except OSError:
        return []
    out = []
    for n, at in re.findall(r"===== attempt (\d+) (\S+ \S+) =====", log):
        launched = datetime.datetime.fromisoformat(at).timestamp()
        try:
            written = (run / "logs" / f"command.{n}.json").stat().st_mtime
        except OSError:
            written = None
        out.append((int(n), written if written and launched - 1 <= written < launched + 1 else launched))
    return out


# Milestones verl prints (with a timestamp) during start-up, in order: the start-up split by them.
MILESTONES = [
    ("verl's imports, Hydra config, Ray start", r"Started a local Ray instance"),
    ("task runner (its own process in the baseline), TransferQueue, datasets",
     r"train and validate dataloader initialized"),
    ("actor worker: spawn, model, FSDP, optimizer", r"actor and ref model engine initialized"),
    ("reward loop, rollout server, checkpoint engine", r"checkpoint engine manager initialized"),
    ("checkpoint load (model, optimizer, data state)", r"all initialize finished, ready to fit"),
]
STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})"


def _attempt_logs(run: Path) -> dict[int, str]:
    try:
        log = (run / "training.log").read_text(errors="replace")
    except OSError:
        return {}
    parts = re.split(r"^===== attempt (\d+) \S+ \S+ =====$", log, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _phases(text: str, launched: float, first: float) -> list[tuple[str, float]]:
    """Seconds between consecutive milestones of one attempt's log, launch to first rollout."""
    out, last = [], launched
    for label, pattern in MILESTONES:
        stamp = re.search(STAMP + r"[^\n]*" + pattern, text)
        if not stamp:
            continue
        at = datetime.datetime.fromisoformat(stamp.group(1)).timestamp() + int(stamp.group(2)) / 1000
        out.append((label, at - last))
        last = at
    out.append(("agent-loop worker: spawn, first rollout", first - last))
    return out


def startups(run: Path) -> list[dict]:
    """Per attempt: seconds from verl's launch (and from the command's start, when known) to the first
    rollout that attempt started, and the first training step that attempt drew rollouts for."""
    path = RunDir(run).rollouts
    if not path.exists():
        return []
    # (start, trainer step or None for a validation rollout): the first rollout may be a validation one
    rollouts = sorted((r.started_at, None if r.validation else r.step) for r in read_records(path))
    attempts_ = attempt_launches(run)
    commands = command_starts(run)
    logs = _attempt_logs(run)
    out = []
    for i, (number, launched) in enumerate(attempts_):
        until = attempts_[i + 1][1] if i + 1 < len(attempts_) else math.inf
        mine = [(t, step) for t, step in rollouts if launched <= t < until]
        if not mine:
            continue
        first = mine[0][0]
        command = commands.get(str(number))
        steps = [step for _, step in mine if step is not None and step >= 1]  # trainer steps count from 1
        out.append({"attempt": number, "first_step": min(steps, default=None), "from_launch": first - launched,
                    "from_command": first - command if command else None,
                    "preflight": launched - command if command else None,
                    "phases": _phases(logs.get(number, ""), launched, first)})
    return out


def _union(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of [lo, hi] covered by at least one interval."""
    covered, end = 0.0, lo
    for a, b in sorted(intervals):
        a, b = max(a, end), min(b, hi)
        if b > a:
            covered += b - a
            end = b
    return covered


def off_policy_figures(run: Path) -> dict:
    """Steady pace and idle shares of one run (its first step, with start-up, left out)."""
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [m for m in metrics if not m.get("validation")]
    rollouts = list(read_records(RunDir(run).rollouts))
    ends = {}  # a step ends when its last rollout is placed and verl logs it: verl's own step clock
    for m in train:
        ends[m["step"]] = datetime.datetime.fromisoformat(m["time"]).timestamp()
    steps = sorted(ends)
    lo, hi = ends[steps[0]], ends[steps[-1]]
    steady = [m for m in train if m["step"] != steps[0]]
    step_s = (hi - lo) / max(1, len(steps) - 1)
    gen = statistics.fmean(m["verl"].get("timing_s/gen", 0.0) for m in steady)
    verl_step = statistics.fmean(m["verl"].get("timing_s/step", 0.0) for m in steady)
    in_flight = _union([(r.started_at, r.finished_at) for r in rollouts if not r.validation], lo, hi)
    return {"steps": len(steps), "step_s": step_s, "verl_step_s": verl_step,
            "trainer_waits": gen / verl_step if verl_step else float("nan"),
            "rollouts_idle": 1 - in_flight / (hi - lo) if hi > lo else float("nan"),
            "rewards": [m.get("reward_mean") for m in train],
            "staleness": [m.get("staleness_mean") for m in train]}


def compare_row(run: Path, value: str) -> tuple:
    """One run's row of the ``--rollouts``/``--dtypes`` table; prints its per-step table first (:func:`analyse`)."""
    ups, step_s, _ = analyse(run)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rollouts_ = list(read_records(RunDir(run).rollouts))
    train = [m for m in metrics if not m.get("validation")]
    # the steps analyse() calls steady; a one-step run (``--steps 1``, for a slow config) keeps its only step
    firsts = first_steps(ups, metrics)
    steady = [m for m in train if m["step"] not in firsts] or train
    if len(steady) == len(train) and any(m["step"] in firsts for m in train):
        print(f"{value}: one step only: gen_s and tokens/s include the first step's start-up")
    counted = {m["step"] for m in steady}
    gen = statistics.fmean(m["verl"].get("timing_s/gen", 0.0) for m in steady)
    tokens = sum(r.response_tokens for r in rollouts_ if not r.validation and r.step in counted)
    corr = [m["verl"].get("training/rollout_actor_probs_pearson_corr") for m in metrics if not m.get("validation")]
    peak = json.loads((run / "bench_peak_rss.json").read_text())["bytes"]
    return (value, ups[0]["from_command"] if ups else float("nan"), step_s, gen,
            tokens / max(1e-9, gen * len(steady)), peak / 2**30,
            min((c for c in corr if c is not None), default=float("nan")))


def print_compare_table(setting: str, rows: list[tuple]) -> None:
    print(f"\n{setting:>12} {'start-up_s':>10} {'step_s':>7} {'gen_s':>6} {'tokens/s':>8} {'peak_GiB':>8} "
          f"{'min_corr':>8}")
    for r in rows:
        print(f"{r[0]:>12} {r[1]:10.1f} {r[2]:7.2f} {r[3]:6.2f} {r[4]:8.0f} {r[5]:8.1f} {r[6]:8.4f}")
    print("start-up: `agentrl train` to the first rollout; step_s, gen_s: steady steps (the first left out); "
          "tokens/s: response tokens over generation time; peak: summed RSS of the process tree; min_corr: the "
          "lowest of verl's rollout-vs-actor log-prob correlation over the steps (nan: verl's bypass mode, which "
          "takes the CPU rollout's log-probs as they are, computes none)")


def print_off_policy(results: dict[str, list[dict]], delay: float, steps: int, repeat: int) -> None:
    """The ``--off-policy`` report: each run's :func:`off_policy_figures`, then the speed-up over sync."""
    print(f"\nthe demo, calculator answering {delay} s late, {steps} steps, {repeat} run(s) each; "
          f"steady state = after each run's first step")
    for name, runs in results.items():
        for i, f in enumerate(runs):
            print(f"{name:>24} run {i}: {f['step_s']:.2f} s/step (verl's step timer {f['verl_step_s']:.2f} s); trainer "
                  f"waits for rollouts {100 * f['trainer_waits']:.0f}% of a step; no rollout in flight "
                  f"{100 * f['rollouts_idle']:.0f}% of the time")
            print(f"{'':>24}   reward by step: " + " ".join("n/a" if r is None else f"{r:.2f}" for r in f["rewards"])
                  + ("" if not any(x is not None for x in f["staleness"]) else
                     "; staleness by step: " + " ".join("-" if x is None else f"{x:.2f}" for x in f["staleness"])))
    sync = statistics.fmean(f["step_s"] for f in results["sync"])
    off = statistics.fmean(f["step_s"] for f in results["max_off_policy_steps=1"])
    print(f"\nsteps per second, max_off_policy_steps=1 over sync: {sync / off:.2f}x "
          f"({sync:.2f} vs {off:.2f} s/step, means over {repeat} run(s) each)")


def print_summary(results: dict[str, tuple]) -> None:
    """The default mode's last lines: per run (agentrl, baseline), s/step, share outside the model, start-ups."""
    print()
    for name, (ups, step_s, outside) in results.items():
        print(f"{name}: {step_s:.2f} s/step, {outside:.0f}% outside the model; "
              + "; ".join(startup_text(u, fresh=i == 0) for i, u in enumerate(ups)))


def startup_text(u: dict, fresh: bool) -> str:
    kind = "fresh" if fresh else f"resumed (attempt {u['attempt']})"
    text = f"start-up {kind} {u['from_launch']:.1f} s from verl's launch"
    if u["from_command"] is not None:
        text += f", {u['from_command']:.1f} s from `agentrl train` ({u['preflight']:.1f} s of it agentrl's pre-flight)"
    return text


def first_steps(ups: list[dict], metrics: list[dict]) -> set[int]:
    """The first step of each attempt (:func:`startups`), which steady-state figures leave out."""
    return {u["first_step"] for u in ups} or {metrics[0]["step"] if metrics else 0}


def analyse(run: Path) -> tuple[list[dict], float, float] | None:
    """Per-step table for one run; returns (start-ups per attempt, steady s/step, % of a step outside the model)."""
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    by_step = defaultdict(list)
    for r in read_records(RunDir(run).rollouts):
        if not r.validation:
            by_step[r.step].append(r)
    rows = []
    saves = []
    ups = startups(run)
    firsts = first_steps(ups, metrics)
    for m in metrics:
        if m.get("validation"):
            continue
        v = m["verl"]
        rs = by_step.get(m["step"], [])  # each rollout names the trainer step it was drawn for
        save = v.get("timing_s/save_checkpoint", 0.0)
        if save:
            saves.append((m["step"], save))
        step = v.get("timing_s/step", 0.0) - save  # a checkpoint save is no part of a step's overhead
        gen = v.get("timing_s/gen", 0.0)
        # The rollouts of a step run concurrently: their span is the agent loop's wall time. Within it, the
        # share of each rollout's own time spent waiting on the model server is the model's share.
        if rs and rs[0].started_at:  # 0.0: a file written before rollouts were timed
            span = max(r.finished_at for r in rs) - min(r.started_at for r in rs)
        else:
            span = gen
        wait_share = (sum(r.model_seconds for r in rs) / max(1e-9, sum(r.seconds for r in rs))) if rs else 1.0
        trainer_model = sum(v.get(k, 0.0) for k in ("timing_s/old_log_prob", "timing_s/ref", "timing_s/update_actor",
                                                    "timing_s/update_weights"))
        model = span * wait_share + trainer_model
        rows.append((m["step"], step, gen, span, model, step - model,
                     statistics.fmean(r.tool_seconds for r in rs) if rs else 0.0,
                     statistics.fmean(r.reward_seconds for r in rs) if rs else 0.0))
    print(f"\n{'step':>4} {'step_s':>7} {'gen_s':>7} {'rollouts_s':>10} {'model_s':>8} {'outside_s':>9} "
          f"{'tool_s/rollout':>15} {'reward_s/rollout':>17}")
    for row in rows:
        print(f"{row[0]:>4} {row[1]:7.2f} {row[2]:7.2f} {row[3]:10.2f} {row[4]:8.2f} {row[5]:9.2f} {row[6]:15.4f} "
              f"{row[7]:17.4f}" + ("   (first of its attempt)" if row[0] in firsts else ""))
    steady = [r for r in rows if r[0] not in firsts] or rows
    step_mean = statistics.fmean(r[1] for r in steady)
    outside = statistics.fmean(r[5] for r in steady)
    waiting = statistics.fmean(r[2] - r[3] for r in steady)
    print(f"\nsteady state ({len(steady)} steps, each attempt's first step left out): {step_mean:.2f} s/step; "
          f"outside the model {outside:.2f} s ({100 * outside / step_mean:.0f}% of the step), of which {waiting:.2f} s "
          f"is the generation phase outlasting the rollouts (verl's replay-buffer polling)")
    if saves:
        print("checkpoint saves (left out of the step times above): "
              + ", ".join(f"step {s} {t:.2f} s" for s, t in saves))
    for i, u in enumerate(ups):
        print(startup_text(u, fresh=i == 0))
        if u["preflight"] is not None:
            print(f"  {u['preflight']:6.1f} s  agentrl's pre-flight: config, data, tool-server check (to verl's launch)")
        for label, seconds in u["phases"]:
            print(f"  {seconds:6.1f} s  {label}")
    if not ups:
        print("start-up: n/a")
    print(f"run directory: {run}")
    return (ups, step_mean, 100 * outside / step_mean)
