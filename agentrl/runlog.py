"""The run directory's append-only files, written safely from many processes.

Agent-loop workers (several Ray processes) append finished rollouts to ``rollouts.jsonl``; each line
is written whole under an exclusive lock, so concurrent writers never interleave partial lines.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any


def append_jsonl(path: str | Path, record: dict[str, Any]) -> None:
    line = (json.dumps(record, default=str, allow_nan=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            view = memoryview(line)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def read_lines(path: str | Path, start: int = 0) -> tuple[list[bytes], int]:
    """The complete, non-blank lines from byte offset ``start``, and the offset after the last one (a line
    still being written is left for the next read)."""
    path = Path(path)
    if not path.exists():
        return [], start
    with path.open("rb") as fh:
        fh.seek(start)
        data = fh.read()
    end = data.rfind(b"\n")
    if end < 0:
        return [], start
    return [raw for raw in data[: end + 1].splitlines() if raw.strip()], start + end + 1


def read_jsonl(path: str | Path, start: int = 0) -> tuple[list[dict], int]:
    """Complete lines from byte offset ``start``; returns them and the offset after the last one."""
    lines, end = read_lines(path, start)
    records = []
    for raw in lines:
        try:
            records.append(json.loads(raw))
        except json.JSONDecodeError:
            continue
    return records, end
