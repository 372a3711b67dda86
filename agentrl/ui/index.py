"""An incremental index of ``rollouts.jsonl``: where each rollout's line is, per step, kept on disk.

    idx = RolloutIndex("runs/demo")          # opens (or creates) runs/demo/.agentrl-ui/rollouts.sqlite
    idx.update()                             # indexes only the bytes appended since the last call
    idx.steps()                              # [{"step": 3, "validation": 0, "rollouts": 64, "reward_mean": .41, ...}]
    rows, total = idx.query(step=3, limit=20, offset=0, reward_min=0.5, tool="calc.add")
    records = idx.read(rows)                 # just those lines (seek + read), as RolloutRecords (agentrl.rolloutfile)

A long run's rollouts.jsonl is gigabytes: the file is never read whole per request. ``update()`` reads
from the last indexed byte to the last complete line, decodes only the few fields the explorer filters on
(msgspec skips the rest), and stores (offset, length, step, reward, ...) rows in SQLite beside the run. A
file that shrank or was replaced is re-indexed from the start. Partial last lines (a writer mid-append) are
left for the next call.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any


from agentrl.record import RolloutRecord
from agentrl.rolloutfile import decode, decode_summary
from agentrl.rundir import RunDir

CHUNK = 16 * 2**20
SCHEMA_VERSION = 3




def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def _step_of(x: Any) -> int:
    try:
        return int(x)
    except (TypeError, ValueError):
        return -1  # a rollout without a step (older files) is filed under -1


def index_dir(run_dir: Path) -> Path:
    """Beside the run when writable, else under the user's cache (a read-only run directory still browses)."""
    here = Path(run_dir) / ".agentrl-ui"
    try:
        here.mkdir(exist_ok=True)
        if os.access(here, os.W_OK):
            return here
    except OSError:
        pass
    home = Path(os.environ.get("AGENTRL_HOME", Path.home() / ".cache" / "agentrl"))
    key = hashlib.sha1(str(Path(run_dir).resolve()).encode()).hexdigest()[:16]
    where = home / "ui-index" / key
    where.mkdir(parents=True, exist_ok=True)
    return where


class RolloutIndex:
    def __init__(self, run_dir: str | Path, path: str | Path | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.file = RunDir(self.run_dir).rollouts
        self.db_path = Path(path) if path else index_dir(self.run_dir) / "rollouts.sqlite"
        self.lock = threading.RLock()
        self.db = sqlite3.connect(str(self.db_path), check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self._schema()

    def _schema(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            self.db.executescript("DROP TABLE IF EXISTS rollouts; DROP TABLE IF EXISTS steps; DROP TABLE IF EXISTS meta;")
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS rollouts (
                id INTEGER PRIMARY KEY, offset INTEGER, length INTEGER, step INTEGER, validation INTEGER,
                reward REAL, unscorable INTEGER, tool_calls INTEGER, prompt_id TEXT, rollout_id TEXT,
                stop_reason TEXT, tools TEXT);
            CREATE INDEX IF NOT EXISTS by_step ON rollouts(step, validation, id);
            CREATE TABLE IF NOT EXISTS steps (
                step INTEGER, validation INTEGER, rollouts INTEGER, scored INTEGER, reward_sum REAL,
                unscorable INTEGER, tool_calls INTEGER, seconds REAL, model_seconds REAL, tool_seconds REAL,
                reward_seconds REAL, PRIMARY KEY (step, validation));
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
        """)
        self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self.db.commit()

    def _meta(self, key: str, default: str = "") -> str:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def _fingerprint(self) -> str:
        """The file's identity: its first line's hash (a replaced or rewritten file has another)."""
        try:
            with self.file.open("rb") as fh:
                return hashlib.sha1(fh.readline(4096)).hexdigest()
        except OSError:
            return ""

    @property
    def indexed_bytes(self) -> int:
        return int(self._meta("indexed_bytes", "0"))

    def _reset(self) -> None:
        self.db.executescript("DELETE FROM rollouts; DELETE FROM steps; DELETE FROM meta;")
        self.db.commit()

    def update(self) -> int:
        """Index what was appended since the last call; returns the number of new rollouts.
        Several processes may share one index (two `agentrl ui`, a report): a file lock makes one extend it."""
        with self.lock, open(str(self.db_path) + ".lock", "w") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)
            try:
                size = self.file.stat().st_size
            except OSError:
                if self.indexed_bytes:
                    self._reset()
                return 0
            start = self.indexed_bytes
            if size < start or (start and self._meta("fingerprint") != self._fingerprint()):
                self._reset()
                start = 0
            if size == start:
                return 0
            added = 0
            with self.file.open("rb") as fh:
                fh.seek(start)
                carry = b""
                pos = start
                while True:
                    chunk = fh.read(CHUNK)
                    if not chunk:
                        break
                    data = carry + chunk
                    end = data.rfind(b"\n")
                    if end < 0:
                        carry = data
                        continue
                    added += self._ingest(data[: end + 1], pos)
                    pos += end + 1
                    carry = data[end + 1:]
                    self._set_meta(pos)
                    self.db.commit()
            return added

    def _set_meta(self, pos: int) -> None:
        self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                            [("indexed_bytes", str(pos)), ("fingerprint", self._fingerprint())])

    def _ingest(self, data: bytes, base: int) -> int:
        rows = []
        steps: dict[tuple[int, int], list] = {}
        offset = 0
        for line in data.split(b"\n")[:-1]:
            length = len(line) + 1
            if line.strip():
                r = decode_summary(line)  # None: a malformed line is skipped, not fatal; it stays in the file
                if r is not None:
                    tools = sorted({c.name for s in r.turns for c in (s.tool_calls or []) if c.name})
                    reward = _number(r.reward)
                    unscorable = 1 if (r.unscorable is not None or reward is None) else 0
                    step, val = _step_of(r.step), 1 if r.validation else 0
                    calls = int(r.tool_calls) if isinstance(r.tool_calls, int) else 0
                    rows.append((base + offset, length, step, val, reward, unscorable, calls,
                                 None if r.prompt_id is None else str(r.prompt_id),
                                 None if r.rollout_id is None else str(r.rollout_id),
                                 None if r.stop_reason is None else str(r.stop_reason),
                                 "," + ",".join(tools) + "," if tools else ""))
                    agg = steps.setdefault((step, val), [0, 0, 0.0, 0, 0, 0.0, 0.0, 0.0, 0.0])
                    agg[0] += 1
                    if not unscorable:
                        agg[1] += 1
                        agg[2] += reward
                    agg[3] += unscorable
                    agg[4] += calls
                    for i, t in enumerate((r.seconds, r.model_seconds, r.tool_seconds, r.reward_seconds)):
                        agg[5 + i] += _number(t) or 0.0
            offset += length
        self.db.executemany("INSERT INTO rollouts (offset, length, step, validation, reward, unscorable, tool_calls,"
                            " prompt_id, rollout_id, stop_reason, tools) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
        self.db.executemany(
            "INSERT INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(step, validation) DO UPDATE SET "
            + ", ".join(f"{c}={c}+excluded.{c}" for c in ("rollouts", "scored", "reward_sum", "unscorable", "tool_calls",
                                                          "seconds", "model_seconds", "tool_seconds", "reward_seconds")),
            [(s, v, *agg) for (s, v), agg in steps.items()])
        return len(rows)

    def steps(self) -> list[dict[str, Any]]:
        """Per (step, validation): rollouts, mean reward of the scored ones, unscorable count, tool calls."""
        with self.lock:
            cur = self.db.execute("SELECT step, validation, rollouts, scored, reward_sum, unscorable, tool_calls, "
                                  "seconds, model_seconds, tool_seconds, reward_seconds FROM steps ORDER BY step, validation")
            return [{"step": s, "validation": bool(v), "rollouts": n, "scored": k,
                     "reward_mean": (rs / k) if k else None, "unscorable": u, "tool_calls_per_rollout": t / n if n else 0,
                     "seconds": sec, "model_seconds": ms, "tool_seconds": ts, "reward_seconds": rws}
                    for s, v, n, k, rs, u, t, sec, ms, ts, rws in cur.fetchall()]

    def tools(self, step: int, validation: bool = False) -> list[str]:
        with self.lock:
            cur = self.db.execute("SELECT DISTINCT tools FROM rollouts WHERE step=? AND validation=? AND tools != ''",
                                  (step, int(validation)))
            return sorted({t for (field,) in cur.fetchall() for t in field.strip(",").split(",") if t})

    def query(self, step: int, validation: bool = False, limit: int = 20, offset: int = 0,
              reward_min: float | None = None, reward_max: float | None = None, unscorable: str = "any",
              tool: str | None = None, text: str | None = None, prompt_id: str | None = None
              ) -> tuple[list[dict[str, Any]], int]:
        """One page of a step's rollouts, filtered; returns (rows in file order, total matching)."""
        where, args = ["step=?", "validation=?"], [step, int(validation)]
        if reward_min is not None:
            where.append("reward >= ?")
            args.append(reward_min)
        if reward_max is not None:
            where.append("reward <= ?")
            args.append(reward_max)
        if unscorable == "only":
            where.append("unscorable=1")
        elif unscorable == "none":
            where.append("unscorable=0")
        if tool:
            where.append("tools LIKE ?")
            args.append(f"%,{tool},%")
        if prompt_id is not None:
            where.append("prompt_id=?")
            args.append(prompt_id)
        sql = ("SELECT id, offset, length, step, validation, reward, unscorable, tool_calls, prompt_id, rollout_id,"
               " stop_reason, tools FROM rollouts WHERE " + " AND ".join(where) + " ORDER BY id")
        with self.lock:
            rows = [dict(zip(("id", "offset", "length", "step", "validation", "reward", "unscorable", "tool_calls",
                              "prompt_id", "rollout_id", "stop_reason", "tools"), r))
                    for r in self.db.execute(sql, args).fetchall()]
        if text:
            needle = text.lower()
            rows = [r for r, raw in zip(rows, self._raw(rows)) if needle in raw.decode("utf-8", "replace").lower()]
        return rows[offset: offset + limit], len(rows)

    def group_rewards(self, step: int, validation: bool = False) -> dict[str, list[tuple[str, float | None]]]:
        """prompt_id -> [(rollout_id, reward or None)] for the step: what group advantages are computed from."""
        with self.lock:
            cur = self.db.execute("SELECT prompt_id, rollout_id, reward, unscorable FROM rollouts "
                                  "WHERE step=? AND validation=? ORDER BY id", (step, int(validation)))
            groups: dict[str, list] = {}
            for pid, rid, reward, unscorable in cur.fetchall():
                groups.setdefault(pid, []).append((rid, None if unscorable else reward))
            return groups

    def _raw(self, rows: list[dict[str, Any]]) -> list[bytes]:
        out: list[bytes] = []
        if not rows or not self.file.exists():
            return [b"{}" for _ in rows]
        with self.file.open("rb") as fh:
            for r in rows:
                fh.seek(r["offset"])
                out.append(fh.read(r["length"]))
        return out

    def read(self, rows: list[dict[str, Any]]) -> list[RolloutRecord | None]:
        """The full records of the given index rows (only those lines are read), decoded by
        :mod:`agentrl.rolloutfile`; None for a line that is not a record."""
        return [decode(raw) for raw in self._raw(rows)]

    def close(self) -> None:
        with self.lock:
            self.db.close()
