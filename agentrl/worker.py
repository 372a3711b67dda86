"""What one agent-loop worker process keeps between rollouts: built from a ``RunSpec``, closed once.

    state = WorkerState(RunSpec.read("runs/demo/agentrl_spec.json"))
    result = await state.rewards.ascore(sample, item)
    hub = state.hub()            # this event loop's ToolHub (None when the run has no tools)
    await state.aclose()

verl instantiates the agent loop class once per rollout, so the loop asks ``WorkerState.for_file`` for
the worker's one state object; an embedding (a local engine, a test) builds ``WorkerState(spec)`` itself.
Nothing here imports verl.
"""

from __future__ import annotations

import asyncio
import gc
import os
from typing import Any

from agentrl.spec import RunSpec


GC_THRESHOLD = (50_000, 20, 100)  # young collections every 50k allocations, not 700


def settle_gc() -> None:
    """Make the garbage collector cheap for a process that runs hundreds of rollouts at once.

    Everything loaded so far (torch, transformers, verl, the rewards, the MCP SDK: ~450k objects) is
    moved out of the collector's sight with ``gc.freeze()``, so a full collection walks only what the
    rollouts allocate, and young collections run every 50,000 allocations instead of every 700. In
    ``benchmarks/bench_loop.py`` this took agentrl's own CPU per turn from 1.84 to 1.30 ms. Once per
    process; ``AGENTRL_GC_TUNING=0`` leaves the collector as Python sets it.
    """
    if os.environ.get("AGENTRL_GC_TUNING", "1") == "0" or getattr(settle_gc, "done", False):
        return
    settle_gc.done = True  # type: ignore[attr-defined]
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


class WorkerState:
    """The reward set, one ToolHub per event loop, the simulated user and the newest policy version seen."""

    _by_file: dict[str, "WorkerState"] = {}

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self._rewards: Any = None
        self._hubs: dict[int, Any] = {}  # MCP sessions belong to the event loop that opened them
        self._user: Any = None
        # the newest policy version this worker has seen, for rollouts that fail before reaching the model
        self.last_versions: dict[str, Any] = {"global_steps": 0, "min_global_steps": 0, "max_global_steps": 0}

    @classmethod
    def for_file(cls, path: str) -> "WorkerState":
        """The state of this worker process for the spec at ``path`` (read and validated once)."""
        if path not in cls._by_file:
            state = cls._by_file[path] = cls(RunSpec.read(path))
            state.warm_up()
            settle_gc()
        return cls._by_file[path]

    @classmethod
    def for_spec(cls, spec: RunSpec) -> "WorkerState":
        """The state of this worker process for a spec built in the process (verl's Hydra keys)."""
        key = spec.model_dump_json()
        if key not in cls._by_file:
            state = cls._by_file[key] = cls(spec)
            state.warm_up()
            settle_gc()
        return cls._by_file[key]

    def warm_up(self) -> None:
        """Load the rewards and import the tools client now, so the modules they bring join ``settle_gc``."""
        self.rewards  # noqa: B018  (loads the reward set)
        if self.spec.tools:
            import agentrl.tools.client  # noqa: F401  (the MCP SDK)

    @property
    def rewards(self):
        if self._rewards is None:
            from agentrl.rewards import RewardSet

            self._rewards = RewardSet.from_config(self.spec.rewards, where="agentrl.rewards")
        return self._rewards

    def hub(self):
        if not self.spec.tools:
            return None
        key = id(asyncio.get_running_loop())
        if key not in self._hubs:
            from agentrl.tools import ToolHub

            self._hubs[key] = ToolHub.from_config(self.spec.tools, allow=self.spec.tool_allow,
                                                  max_result_chars=self.spec.agent.max_tool_result_chars,
                                                  run_key=self.spec.run_dir)  # run-wide tool limits on Ray
        return self._hubs[key]

    def simulated_user(self):
        options = self.spec.agent.simulated_user
        if not options:
            return None
        if self._user is None:
            from agentrl.tools.simuser import SimulatedUser

            options = dict(options)
            key_env = options.pop("api_key_env", None)
            if key_env:
                options["api_key"] = os.environ.get(key_env)
            self._user = SimulatedUser(options.pop("model"), **options)
        return self._user

    async def aclose(self) -> None:
        """Close this event loop's hub (its MCP sessions and servers)."""
        hub = self._hubs.pop(id(asyncio.get_running_loop()), None)
        close = getattr(hub, "aclose", None) or getattr(hub, "close", None)
        if close is not None:
            result = close()
            if asyncio.iscoroutine(result):
                await result
