"""A run directory: where ``agentrl train`` keeps everything of one run, and the lock that makes it one run's.

    run = RunDir("runs/demo")
    run.rollouts, run.metrics, run.spec, run.config     # runs/demo/rollouts.jsonl, ... (names declared once, here)
    handle = run.lock()           # exclusive flock, None when another trainer holds it (keep the handle open)
    run.is_running()              # whether some trainer holds it (read without taking it)
    run.append_rollout(record)    # one whole line, safe from many processes

The layout (README.md, "The run directory"):

    config.yaml              the config as resolved (agentrl block + verl overrides)
    agentrl_spec.json        the run contract verl's agent-loop workers read (agentrl.spec.RunSpec)
    data/train.jsonl         the rows as verl reads them (data/val.jsonl: validation)
    metrics.jsonl            one line per training step and per evaluation
    rollouts.jsonl           one line per rollout (agentrl.record.RolloutRecord)
    training.log             verl's output, every attempt
    checkpoint_status.json   the newest complete checkpoint
    sandbox_isolation.json   what isolation the sandbox got on this machine
    reward_versions.json     each version of the reward set the run used, what it is made of, first used when
    checkpoints/             verl's checkpoints (global_step_N/actor/huggingface)
    logs/                    verl's metric file per attempt, lines set aside on resume
    .agentrl.lock            held (flock) while a trainer runs
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO, Any


class RunDir:
    CONFIG = "config.yaml"
    SPEC = "agentrl_spec.json"
    DATA = "data"
    METRICS = "metrics.jsonl"
    ROLLOUTS = "rollouts.jsonl"
    TRAINING_LOG = "training.log"
    CHECKPOINT_STATUS = "checkpoint_status.json"
    SANDBOX_REPORT = "sandbox_isolation.json"
    CHECKPOINTS = "checkpoints"
    LOGS = "logs"
    LOCK = ".agentrl.lock"
    TRAINED = "logs/trained.jsonl"  # a line per training step: the prompt groups it trained
    GENERATED = "logs/generated.jsonl"  # off-policy rollouts until the step that trains them is known
    ADVANTAGES = "logs/advantages.jsonl"  # per-turn credit: a line per trained rollout, what agentrl_grpo gave each turn
    REWARD_VERSIONS = "reward_versions.json"  # every version of the reward set the run used (agentrl.rewards.versions)
    START_ERROR = "start_error.txt"  # why the last `agentrl train` stopped before verl started (the job page shows it)
    # the files that make a folder a run directory, and those the job page offers for download
    MARKERS = (CONFIG, METRICS, TRAINING_LOG, ROLLOUTS)

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    config = property(lambda self: self.path / self.CONFIG)
    spec = property(lambda self: self.path / self.SPEC)
    data = property(lambda self: self.path / self.DATA)
    train_data = property(lambda self: self.path / self.DATA / "train.jsonl")
    val_data = property(lambda self: self.path / self.DATA / "val.jsonl")
    metrics = property(lambda self: self.path / self.METRICS)
    rollouts = property(lambda self: self.path / self.ROLLOUTS)
    training_log = property(lambda self: self.path / self.TRAINING_LOG)
    checkpoint_status = property(lambda self: self.path / self.CHECKPOINT_STATUS)
    sandbox_report = property(lambda self: self.path / self.SANDBOX_REPORT)
    checkpoints = property(lambda self: self.path / self.CHECKPOINTS)
    logs = property(lambda self: self.path / self.LOGS)
    lock_file = property(lambda self: self.path / self.LOCK)
    trained = property(lambda self: self.path / self.TRAINED)
    generated = property(lambda self: self.path / self.GENERATED)
    advantages = property(lambda self: self.path / self.ADVANTAGES)
    start_error = property(lambda self: self.path / self.START_ERROR)
    reward_versions = property(lambda self: self.path / self.REWARD_VERSIONS)

    def verl_metrics(self, attempt: int) -> Path:
        """verl's own metric file of one attempt (its ``file`` logger writes there)."""
        return self.logs / f"verl_metrics.{attempt}.jsonl"

    def is_run(self) -> bool:
        return self.path.is_dir() and any((self.path / m).exists() for m in self.MARKERS)

    def append_rollout(self, record: Any) -> None:
        """Append one rollout (a :class:`agentrl.record.RolloutRecord` or its dict) as a whole line."""
        from agentrl.runlog import append_jsonl

        append_jsonl(self.rollouts, record if isinstance(record, dict) else record.to_dict())

    def append_generated(self, record: Any) -> None:
        """Append an off-policy training rollout whose training step is not known yet (see
        ``agentrl.metrics.Watcher``, which moves it into rollouts.jsonl once a step trains its group)."""
        from agentrl.runlog import append_jsonl

        append_jsonl(self.generated, record if isinstance(record, dict) else record.to_dict())

    def lock(self) -> IO | None:
        """Take the run's lock: an open handle holding an exclusive flock (inherited descriptors keep it
        held), or None when another process holds it."""
        handle = open(self.lock_file, "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return None
        return handle

    def is_running(self) -> bool:
        """Whether a trainer holds the lock, read from /proc/locks so the check never takes it."""
        lock = self.lock_file
        if not lock.exists():
            return False
        held = _held_flock(lock)
        if held is not None:
            return held
        with open(lock) as fh:  # no /proc: take and drop a shared lock (a trainer holds it exclusively)
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
            return False


def _held_flock(path: Path) -> bool | None:
    """Whether some process holds a flock on ``path`` (None when /proc/locks cannot be read)."""
    try:
        st = path.stat()
        locks = Path("/proc/locks").read_text()
    except OSError:
        return None
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return any(line.split()[1] == "FLOCK" and dev in line.split() for line in locks.splitlines() if len(line.split()) > 5)
