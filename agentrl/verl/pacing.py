"""verl's trainer waits for rollouts at agentrl's pace, not on a 2-second poll.

    AGENTRL_REPLAY_POLL_S=0.02   (default; verl's own value is 2.0)

verl 0.9.1's replay buffer (``verl.trainer.ppo.v1.replay_buffer.ReplayBuffer``) asks TransferQueue whether
a step's rollouts are done, then sleeps ``poll_interval`` (2 s) before asking again. Every training step
therefore waits on average a second after its last rollout finished, and the generation phase comes in
multiples of 2 s. verl takes ``poll_interval`` as a constructor argument but its trainer never passes one,
so agentrl supplies the default when the module is imported: nothing of verl is changed on disk, and a
trainer that does pass a value keeps it. Each poll is one metadata read from the TransferQueue
controller (well under a millisecond on this path), so polling 50 times a second costs nothing measurable.

It also records which prompt groups each training step trained on (``logs/trained.jsonl`` in the run
directory, a line ``{"step": N, "groups": [uid, ...]}`` per step): with ``max_off_policy_steps`` > 0 the
groups a step trains on are the first to finish, not the ones drawn for it, and this record is how the
run's rollouts are placed at the step that trained them and how a resumed run is shown to have trained
every prompt once.

``install()`` is called by agentrl's ``verl.plugins`` entry point in every process that imports verl.
verl imports its plugins while ``verl`` itself is still importing, so the replay-buffer module cannot be
imported here; it is patched when it is first imported (or at once, if it already was).
"""

from __future__ import annotations

import functools
import inspect
import os

from agentrl.verl.patching import patch_on_import

TARGET = "verl.trainer.ppo.v1.replay_buffer"
DEFAULT_POLL_S = 0.02


def poll_seconds() -> float:
    raw = os.environ.get("AGENTRL_REPLAY_POLL_S", "")
    try:
        value = float(raw) if raw else DEFAULT_POLL_S
    except ValueError:
        return DEFAULT_POLL_S
    return value if value > 0 else DEFAULT_POLL_S


def patch(module) -> None:
    """Give ``module.ReplayBuffer`` (and so its subclasses) agentrl's poll interval as the default."""
    cls = module.ReplayBuffer
    if getattr(cls.__init__, "_agentrl_paced", False):
        return
    original = cls.__init__
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        if "poll_interval" not in signature.bind_partial(self, *args, **kwargs).arguments:
            kwargs["poll_interval"] = poll_seconds()
        original(self, *args, **kwargs)

    __init__._agentrl_paced = True  # type: ignore[attr-defined]
    cls.__init__ = __init__
    for sampler in (cls, getattr(module, "ReplayBufferAsync", None)):
        if sampler is not None and "sample" in vars(sampler):
            sampler.sample = _recording(vars(sampler)["sample"])


def _recording(sample):
    """Wrap a replay buffer's ``sample`` so each training batch's groups are appended to the run
    directory's ``logs/trained.jsonl``."""
    if getattr(sample, "_agentrl_recording", False):
        return sample

    @functools.wraps(sample)
    def recorded(self, global_steps, partition_id, batch_size, *args, **kwargs):
        batch, metrics = sample(self, global_steps, partition_id, batch_size, *args, **kwargs)
        run_dir = os.environ.get("AGENTRL_RUN_DIR")
        if run_dir and partition_id == "train":
            from agentrl.rundir import RunDir
            from agentrl.runlog import append_jsonl

            groups = sorted({key.split("_", 1)[0] for key in batch.keys})
            append_jsonl(RunDir(run_dir).trained, {"step": int(global_steps), "groups": groups})
        return batch, metrics

    recorded._agentrl_recording = True  # type: ignore[attr-defined]
    return recorded


def install() -> None:
    patch_on_import(TARGET, patch)
