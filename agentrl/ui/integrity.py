"""The job page's "Reward integrity" section: the reward versions a run used and the tripwires it raised.

    integrity_view(Path("runs/demo"))
    {"versions": [{"version": "rv-3f9c0a51d2e4", "first_used": "...", "components": [...], "rollouts": None}],
     "alerts": [{"step": 12, "signal": "length_drift", "message": "...", "examples": ["r-..."]}]}

Versions come from the run directory's ``reward_versions.json`` (written by ``agentrl train``), alerts from
the ``alerts`` of each ``metrics.jsonl`` line (written by the watcher, ``agentrl.tripwires``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrl.rewards.versions import read_versions
from agentrl.rundir import RunDir
from agentrl.runlog import read_jsonl

MAX_ALERTS = 50


def integrity_view(run_dir: Path) -> dict[str, Any]:
    versions = read_versions(RunDir(run_dir).reward_versions)
    lines, _ = read_jsonl(RunDir(run_dir).metrics)
    alerts = [a for line in lines for a in (line.get("alerts") or []) if isinstance(a, dict)]
    return {"versions": versions, "alerts": alerts[-MAX_ALERTS:], "alerts_total": len(alerts)}
