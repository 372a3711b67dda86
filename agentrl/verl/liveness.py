"""A rollout actor that dies stops the run with its cause, instead of leaving the trainer waiting for ever.

    agentrl: a rollout actor died: agent loop worker 0 (agent_loop_worker_0_1a2b3c4d): ... killed due to memory
    pressure (OOM) ... The run cannot go on without it (verl does not restart rollout actors) ...

verl's trainer hands each batch's prompts to its agent loop workers and then polls its replay buffer until the
rollouts are in. The workers, the reward loop workers and the rollout servers are Ray actors that verl never
restarts: when one dies (Ray's memory monitor kills the largest worker when the machine runs short; a segfault; a
kill), the rollouts it held never arrive and the poll goes on for ever ("pending: 0, running: 8, finished: 0" once
a minute, and nothing else). On a 2-core machine shared with other work this was seen to hang a SmolLM2 run for
ten minutes after Ray killed its rollout server and workers for memory.

So the actors are watched where verl creates them (``AgentLoopManager._init_agent_loop_workers``: the agent loop
and reward loop workers; ``RolloutReplica.init_*``: the rollout servers), and the replay buffer's poll asks them
every ``CHECK_EVERY`` seconds whether they are alive (their built-in ``__ray_ready__``: a dead actor answers at once
with its death cause; a busy one is left alone). The first dead one raises :class:`RolloutActorDiedError`, which ends the
trainer like any other error; ``agentrl train`` then explains it (``agentrl.failures``: memory, with the fix).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from agentrl.verl.patching import patch_on_import

REPLAY_BUFFER = "verl.trainer.ppo.v1.replay_buffer"
AGENT_LOOP = "verl.experimental.agent_loop.agent_loop"
REPLICA = "verl.workers.rollout.replica"
CHECK_EVERY = 20.0  # seconds between checks, during the replay buffer's poll
ANSWER_WITHIN = 1.0  # a dead actor answers at once (its error); a live one that is busy is not waited for

_watched: list[tuple[str, Any]] = []  # (what it is, its handle), in the trainer's process
_last_check = 0.0


class RolloutActorDiedError(RuntimeError):
    """A rollout actor of this run is dead; verl cannot go on without it."""


def watch(what: str, handle: Any) -> None:
    """Check ``handle`` (a Ray actor) from now on; ``what`` names it in the error."""
    if handle is not None and all(h is not handle for _, h in _watched):
        _watched.append((what, handle))


def forget() -> None:
    _watched.clear()


def check(timeout: float = ANSWER_WITHIN) -> None:
    """Raise :class:`RolloutActorDiedError` naming the first watched actor that is dead, with Ray's cause."""
    if not _watched:
        return
    import ray
    from ray.exceptions import RayActorError

    refs = {}
    for what, handle in list(_watched):
        try:
            refs[handle.__ray_ready__.remote()] = what
        except RayActorError as exc:
            _died(what, exc)
    ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
    for ref in ready:
        try:
            ray.get(ref)
        except RayActorError as exc:
            _died(refs[ref], exc)


def _died(what: str, exc: BaseException) -> None:
    cause = " ".join(str(exc).split())
    raise RolloutActorDiedError(
        f"agentrl: a rollout actor died: {what}: {cause[:1500]} The run cannot go on without it (verl does not "
        "restart rollout actors); it resumes from its last checkpoint when started again. If Ray killed it for "
        "memory: fewer rollouts at once (agentrl.batch_size, agentrl.samples_per_prompt), shorter "
        "agentrl.max_response_length, or less else running on this machine.") from exc


def check_now_and_then() -> None:
    global _last_check
    now = time.monotonic()
    if now - _last_check >= CHECK_EVERY:
        _last_check = now
        check()


def _name(handle: Any, fallback: str) -> str:
    try:
        return f"{fallback} ({handle._ray_actor_id.hex()[:12]})"
    except AttributeError:
        return fallback


def _wrap(cls: Any, name: str, make: Any) -> None:
    """Replace ``cls.name`` by ``make(original)`` once (a second install finds the mark and leaves it)."""
    original = getattr(cls, name, None)
    if original is None or getattr(original, "_agentrl_liveness", False):
        return
    wrapper = functools.wraps(original)(make(original))
    wrapper._agentrl_liveness = True
    setattr(cls, name, wrapper)


def patch_replay_buffer(module: Any) -> None:
    def make(original):
        def _wait_for_next_poll(self, partition_id, last_debug_time):
            check_now_and_then()
            return original(self, partition_id, last_debug_time)
        return _wait_for_next_poll

    _wrap(module.ReplayBuffer, "_wait_for_next_poll", make)


def patch_agent_loop(module: Any) -> None:
    def make(original):
        async def _init_agent_loop_workers(self):
            await original(self)
            for i, worker in enumerate(getattr(self, "agent_loop_workers", None) or []):
                watch(_name(worker, f"agent loop worker {i}"), worker)
            for i, worker in enumerate(getattr(self, "reward_loop_worker_handles", None) or []):
                watch(_name(worker, f"reward loop worker {i}"), worker)
        return _init_agent_loop_workers

    _wrap(module.AgentLoopManager, "_init_agent_loop_workers", make)


def patch_replica(module: Any) -> None:
    def make(original):
        async def init(self, *args, **kwargs):
            result = await original(self, *args, **kwargs)
            rank = getattr(self, "replica_rank", "?")
            for i, server in enumerate(getattr(self, "servers", None) or []):
                watch(_name(server, f"rollout server {i} of replica {rank}"), server)
            return result
        return init

    for method in ("init_hybrid", "init_hybrid_colocated", "init_colocated", "init_standalone"):
        _wrap(module.RolloutReplica, method, make)


def install() -> None:
    patch_on_import(REPLAY_BUFFER, patch_replay_buffer)
    patch_on_import(AGENT_LOOP, patch_agent_loop)
    patch_on_import(REPLICA, patch_replica)
