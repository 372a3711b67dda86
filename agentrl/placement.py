"""Off-policy runs: each training rollout placed under the step that trained it.

With ``agentrl.max_off_policy_steps`` > 0 a rollout is generated before the step that will train it is known:
the agent loop appends it to ``logs/generated.jsonl``, and agentrl's wrapper of verl's replay-buffer sampling
(``agentrl.verl.pacing``) appends the groups each step trained to ``logs/trained.jsonl``. The :class:`Placer` (run by ``agentrl.metrics.Watcher`` at every poll, and by the
runner before a resume) joins the two into ``rollouts.jsonl``, each group once.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import msgspec

from agentrl.rolloutfile import LineKey, line_key
from agentrl.rundir import RunDir
from agentrl.runlog import append_jsonl, read_jsonl, read_lines


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
        self.generated: dict[str, list[tuple[LineKey, bytes]]] = defaultdict(list)
        self.placed = self._placed_groups()

    def _placed_groups(self) -> set[str]:
        """Groups whose rollouts are already in rollouts.jsonl (placed by an earlier attempt)."""
        placed: set[str] = set()
        if not self.generated_file.exists() or not self.rollouts_file.exists():
            return placed
        with self.rollouts_file.open("rb") as fh:
            for line in fh:
                key = line_key(line)
                if key is not None and isinstance(key.group, str) and key.group and key.drawn_step is not msgspec.UNSET:
                    placed.add(key.group)
        return placed

    def place(self) -> None:
        trained, self.trained_offset = read_jsonl(self.trained_file, self.trained_offset)
        lines, self.generated_offset = read_lines(self.generated_file, self.generated_offset)
        for line in lines:
            key = line_key(line)
            if key is not None and str(key.group) not in self.placed:
                self.generated[str(key.group)].append((key, line))
        for line in trained:
            step = int(line["step"])
            for group in line.get("groups", []):
                rollouts = self.generated.pop(group, [])[-self.group_size:]  # a re-issued group's newest
                if group in self.placed or not rollouts:
                    continue
                self.placed.add(group)
                for key, line in rollouts:  # the line as generated, filed under the step that trained it
                    version = key.policy_version
                    placed = {**json.loads(line), "step": step, "drawn_step": key.step,
                              "staleness": step - 1 - version if isinstance(version, int) else None}
                    append_jsonl(self.rollouts_file, placed)


def place_trained(run_dir: Path, group_size: int) -> None:
    """Before a resume: place the rollouts of every group an earlier attempt trained but whose watcher died
    before placing them, so that rewinding and recovering lost steps see them."""
    Placer(run_dir, group_size).place()
