"""Off-policy runs: each training rollout placed under the step that trained it.

With ``agentrl.max_off_policy_steps`` > 0 a rollout is generated before the step that will train it is known:
the agent loop appends it to ``logs/generated.jsonl``, and agentrl's wrapper of verl's replay-buffer sampling
(``agentrl.verl.pacing``) appends the groups each step trained to ``logs/trained.jsonl``. The :class:`Placer` (run by ``agentrl.metrics.Watcher`` at every poll, and by the
runner before a resume) joins the two into ``rollouts.jsonl``, each group once.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from agentrl.rundir import RunDir
from agentrl.runlog import append_jsonl, read_jsonl


class Placer:
    """Off-policy runs: moves the rollouts of each group a step trained on from logs/generated.jsonl into
    rollouts.jsonl, under that step, with the step they were drawn for and their staleness: (step - 1) - the
    policy version that generated them (0: on-policy). trained.jsonl is read before generated.jsonl, and a
    group's rollouts are written before the sampler can pick it, so every named group's rollouts are there."""

    def __init__(self, run_dir: Path, group_size: int) -> None:
        run = RunDir(run_dir)
        self.rollouts_file, self.generated_file, self.trained_file = run.rollouts, run.generated, run.trained
        self.group_size = max(1, group_size)
        self.generated_offset = self.trained_offset = 0
        self.generated: dict[str, list[dict]] = defaultdict(list)
        self.placed = self._placed_groups()

    def _placed_groups(self) -> set[str]:
        """Groups whose rollouts are already in rollouts.jsonl (placed by an earlier attempt)."""
        placed: set[str] = set()
        if not self.generated_file.exists() or not self.rollouts_file.exists():
            return placed
        with self.rollouts_file.open("rb") as fh:
            for line in fh:
                found = re.search(rb'"group": "([^"]+)"', line)
                if found and b'"drawn_step"' in line:
                    placed.add(found.group(1).decode())
        return placed

    def place(self) -> None:
        trained, self.trained_offset = read_jsonl(self.trained_file, self.trained_offset)
        generated, self.generated_offset = read_jsonl(self.generated_file, self.generated_offset)
        for r in generated:
            if str(r.get("group")) not in self.placed:
                self.generated[str(r.get("group"))].append(r)
        for line in trained:
            step = int(line["step"])
            for group in line.get("groups", []):
                rollouts = self.generated.pop(group, [])[-self.group_size:]  # a re-issued group's newest
                if group in self.placed or not rollouts:
                    continue
                self.placed.add(group)
                for r in rollouts:
                    version = r.get("policy_version")
                    placed = {**r, "step": step, "drawn_step": r.get("step"),
                              "staleness": step - 1 - version if isinstance(version, int) else None}
                    append_jsonl(self.rollouts_file, placed)


def place_trained(run_dir: Path, group_size: int) -> None:
    """Before a resume: place the rollouts of every group an earlier attempt trained but whose watcher died
    before placing them, so that rewinding and recovering lost steps see them."""
    Placer(run_dir, group_size).place()
