"""Known ways a training run dies, recognised in training.log and said in words, with the fix.

    >>> text = ("ray.exceptions.OutOfMemoryError: 2 worker(s) were killed due to the node running low on memory. "
    ...         "Memory on the node (IP: 10.0.0.1, ID: ab) was 22.58GB used / 23.54GB limit (0.959325)\\n"
    ...         "Top 10 memory users: PID\\tMEM(GB)\\tCOMMAND\\n4359\\t19.59\\tray::WorkerDict.actor_rollout_update_actor\\n")
    >>> print(diagnose(text).splitlines()[0])
    out of memory: Ray's memory monitor killed 2 worker(s) at 22.58 of 23.54 GB; the largest, 19.59 GB, was the policy update

verl's own error for these is a Ray traceback hundreds of lines long whose last line names neither the phase
nor the setting to change. ``diagnose`` returns None for a failure it does not know; the caller then shows the
traceback's tail as before.
"""

from __future__ import annotations

import re

_RAY_OOM = re.compile(r"(\d+) worker\(s\) were killed due to the node running low on memory\. Memory on the node "
                      r"\([^)]*\) was ([\d.]+)GB used / ([\d.]+)GB limit")
_TOP_USER = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+(\S.*)$")

# the largest process's name -> (the phase in words, the settings that shrink it)
_PHASES = (
    ("update_actor", "the policy update",
     "a smaller micro-batch (actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=N, fewer sequences per forward "
     "pass), shorter sequences (agentrl.max_prompt_length / agentrl.max_response_length), or fewer sequences a step "
     "(agentrl.batch_size x agentrl.samples_per_prompt)"),
    ("compute_log_prob", "the log-probability pass",
     "a smaller micro-batch (actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=N) or shorter sequences "
     "(agentrl.max_prompt_length / agentrl.max_response_length)"),
    ("compute_ref_log_prob", "the reference model's log-probability pass",
     "a smaller micro-batch (actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=N), or agentrl.kl_coef: 0 "
     "(no reference model)"),
    ("Rollout", "generation (the rollout server)",
     "fewer sequences a step (agentrl.batch_size x agentrl.samples_per_prompt) or a shorter "
     "agentrl.max_response_length"),
)


def _largest_user(text: str, after: int) -> tuple[float, str] | None:
    """(GB, command) of the first row of Ray's "Top 10 memory users" table after offset ``after``."""
    table = text.find("Top 10 memory users:", after)
    if table < 0:
        return None
    for line in text[table:].splitlines()[1:4]:
        found = _TOP_USER.match(line)
        if found:
            return float(found.group(2)), found.group(3).strip()
    return None


def diagnose(text: str) -> str | None:
    """A plain account of a known failure in ``text`` (training.log's tail), or None."""
    oom = None
    for oom in _RAY_OOM.finditer(text):
        pass  # the last report is the one that ended the run
    if oom is None:
        return None
    killed, used, limit = oom.group(1), oom.group(2), oom.group(3)
    largest = _largest_user(text, oom.start())
    fix = ("fewer sequences a step (agentrl.batch_size x agentrl.samples_per_prompt) or shorter "
           "sequences (agentrl.max_prompt_length / agentrl.max_response_length)")
    largest_said = ""
    if largest:
        gb, command = largest
        for key, phase, phase_fix in _PHASES:
            if key in command:
                what, fix = phase, phase_fix
                break
        else:
            what = command.split()[0]
        largest_said = f"; the largest, {gb:.2f} GB, was {what}"
    return (f"out of memory: Ray's memory monitor killed {killed} worker(s) at {used} of {limit} GB{largest_said}\n"
            f"  fix: {fix}; close other programs using this machine's memory.\n"
            f"  Running `agentrl train` again resumes from the last complete checkpoint.")
