"""An agent the user already wrote, as a plugin: ``async def run(row, base_url, api_key) -> str | None``.

    # my_agent.py: unchanged but for base_url / api_key
    async def run(row, base_url, api_key):
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key)
        ...                                   # the agent's own loop, its own Python tools
        return final_text                     # or None: the last assistant message served is the answer

    agentrl:
      agent: {program: my_agent.py}           # or "package.module:function", or a name from register_agents

Once per rollout (training, ``agentrl eval``/``prior``) agentrl opens an OpenAI-compatible endpoint that belongs
to that rollout (:mod:`agentrl.endpoint`), calls ``run`` with the row (messages, metadata, id, ... as agentrl
reads it), and scores what the endpoint served: the ``sample``'s messages are the last request's conversation plus
the answer served, its trajectories one step per assistant turn (tool calls as served, results as the agent sent
them back), its final answer what ``run`` returned. The agent's own tools run in this process, unsandboxed: they
are the user's code. A ``run`` that raises leaves the rollout unscorable (``agent: ...``), never 0.

``run`` must not block the event loop: call synchronous agents (smolagents, a sync client) through
``await asyncio.to_thread(...)``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import importlib.util
import inspect
import os
import sys
import time
import uuid
import weakref
from pathlib import Path
from typing import Any, Callable, Optional

from agentrl.errors import AgentrlError
from agentrl.record import RolloutRecord, StopReason
from agentrl.rundir import RunDir
from agentrl.trajectory import make_item, make_sample, make_step


class ProgramError(AgentrlError):
    """``agent.program`` names no usable ``run``; the message says what was asked, what exists and the fix."""


def _from_file(path: str) -> Callable:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ProgramError(f"agent.program: {path!r} is not a file (a relative path is relative to the config's "
                           f"folder); give a .py file defining `async def run(row, base_url, api_key)`")
    name = f"agentrl_program_{abs(hash(str(file.resolve())))}"
    if name in sys.modules:
        module = sys.modules[name]
    else:
        folder = str(file.resolve().parent)
        if folder not in sys.path:  # its own modules beside it import, as under `python file.py` (installed ones first)
            sys.path.append(folder)
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise ProgramError(f"agent.program: {path} failed to import: {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, "run", None)
    if fn is None:
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ProgramError(f"agent.program: {path} defines no `run` (it defines: {', '.join(defined) or 'nothing'}); "
                           f"add `async def run(row, base_url, api_key)`")
    return fn


def _from_module(target: str) -> Callable:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProgramError(f"agent.program: cannot import {module_name!r} ({exc}); install it or give a file path") from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise ProgramError(f"agent.program: module {module_name!r} has no {attr!r}")
    return fn


def load_program(value: Any, *, base: Optional[Path] = None) -> Callable:
    """The ``run`` function ``agent.program`` names: a ``.py`` file, ``module:function``, or a registered agent."""
    if callable(value):
        fn = value
    elif not isinstance(value, str) or not value:
        raise ProgramError("agent.program must be a .py file, module:function, or an agent's registered name")
    elif value.endswith(".py") or os.sep in value:
        fn = _from_file(value if base is None or os.path.isabs(value) else str(base / value))
    elif ":" in value:
        fn = _from_module(value)
    else:
        from agentrl import plugins

        found = plugins.agents()
        if value not in found:
            raise plugins.unknown_name_error("agent", value, list(found), "agent.program")
        fn = found[value].value
        if isinstance(fn, str):
            fn = load_program(fn)
    if not inspect.iscoroutinefunction(fn):
        raise ProgramError(f"agent.program: {getattr(fn, '__name__', fn)!r} must be `async def run(row, base_url, "
                           f"api_key)`; wrap a synchronous agent in `await asyncio.to_thread(...)`")
    return fn


def trajectory(turns: list[dict], last_messages: list[dict]) -> list[Any]:
    """One step per served assistant turn, with the results the agent sent back for its calls."""
    results: dict[str, dict] = {}
    for turn in turns:
        for m in turn.get("next_messages") or []:
            if m.get("role") == "tool" and m.get("tool_call_id"):
                results.setdefault(m["tool_call_id"], {"id": m["tool_call_id"], "name": m.get("name") or "",
                                                       "content": m.get("content") or "", "is_error": False})
    for m in last_messages:
        if m.get("role") == "tool" and m.get("tool_call_id"):
            results.setdefault(m["tool_call_id"], {"id": m["tool_call_id"], "name": m.get("name") or "",
                                                   "content": m.get("content") or "", "is_error": False})
    steps = []
    for turn in turns:
        step = make_step(turn["response"], turn["tool_calls"],
                         [dict(results[c["id"]], name=c["name"]) for c in turn["tool_calls"] if c["id"] in results])
        if turn.get("reasoning"):
            step["reasoning"] = turn["reasoning"]
        steps.append(step)
    return steps


# Blocking agents run through asyncio.to_thread hold a thread of the loop's default executor for their whole rollout;
# the loop's own work offloaded there (verl renders chat templates with run_in_executor(None, ...)) then finds none
# free once the rollouts in flight reach its size (min(32, cores + 4): 6 on 2 cores), and every rollout waits. The
# loops that play agents get a default executor as large as the rollouts in flight can be (threads start on use).
_LOOPS_WITH_ROOM: "weakref.WeakSet[asyncio.AbstractEventLoop]" = weakref.WeakSet()


def _room_for_blocking_agents() -> None:
    loop = asyncio.get_running_loop()
    if loop not in _LOOPS_WITH_ROOM:
        # the loop's own: asyncio.run shuts its default executor down when the loop ends
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1024,
                                                                        thread_name_prefix="agentrl-agent"))
        _LOOPS_WITH_ROOM.add(loop)


async def play(state: Any, rollout: Any, run: Callable, row: dict, *, trainer_step: Any = None,
               group: Optional[str] = None, step_known: bool = True, timeout: Optional[float] = None) -> RolloutRecord:
    """One rollout of the user's ``run`` against ``rollout`` (a :class:`agentrl.endpoint.server.Handler` that
    also keeps ``turns``, ``last_messages``, ``versions``, ``model_seconds`` and ``response_tokens()``)."""
    from agentrl.endpoint.server import shared_server

    _room_for_blocking_agents()
    started, wall_started = time.perf_counter(), time.time()
    item = make_item(row["messages"], row.get("metadata"), **row.get("fields", {}), id=row["id"], source=row.get("source"))
    rollout_id = f"r-{uuid.uuid4().hex[:16]}"
    unscorable: Optional[str] = None
    returned: Any = None
    stop_reason = StopReason.ANSWERED
    with shared_server().rollout(rollout) as (base_url, api_key):
        try:
            returned = await asyncio.wait_for(run(dict(row), base_url, api_key), timeout)
        except asyncio.TimeoutError:
            unscorable, stop_reason = f"agent: run() did not return within {timeout} s", StopReason.ABORTED
        except Exception as exc:  # the user's agent failed: could not score, never 0
            unscorable, stop_reason = f"agent: {type(exc).__name__}: {exc}", StopReason.ABORTED
    if getattr(rollout, "aborted", None):
        unscorable, stop_reason = f"model: {rollout.aborted}", StopReason.ABORTED
    elif getattr(rollout, "out_of_room", False) and stop_reason is StopReason.ANSWERED:
        stop_reason = StopReason.RESPONSE_BUDGET
    steps = trajectory(rollout.turns, rollout.last_messages) or [make_step("")]
    messages = [dict(m) for m in rollout.last_messages]
    if rollout.turns:
        last = rollout.turns[-1]
        messages.append({"role": "assistant", "content": last["response"],
                         **({"tool_calls": [{"type": "function", "id": c["id"], "function": {
                             "name": c["name"], "arguments": c["arguments"]}} for c in last["tool_calls"]]}
                            if last["tool_calls"] else {})})
    final = returned if isinstance(returned, str) else steps[-1]["response"]
    if returned is not None and not isinstance(returned, str) and unscorable is None:
        unscorable = f"agent: run() returned {type(returned).__name__}; return the final answer as str, or None"
    sample = make_sample(rollout_id, steps, final_answer=final, messages=messages,
                         reasoning=steps[-1].get("reasoning", ""))
    reward_started = time.perf_counter()
    score, components, passed = None, {}, {}
    if unscorable is None:
        result = await state.rewards.ascore(sample, item)
        score, components, unscorable, passed = result.score, result.components, result.unscorable, result.passed
    reward_seconds = time.perf_counter() - reward_started
    version = rollout.versions.get("global_steps", state.last_versions["global_steps"])
    tool_calls = sum(len(t["tool_calls"]) for t in rollout.turns)
    record = RolloutRecord(
        rollout_id=rollout_id, prompt_id=item.id, source=item.get("source"),
        step=int(trainer_step) if trainer_step is not None else version,
        validation=row.get("split") == "val", policy_version=version, group=group,
        messages=messages, trajectories=steps, tool_calls=tool_calls,
        reward=score, components=components, passed=passed, unscorable=unscorable, stop_reason=stop_reason,
        response_tokens=rollout.response_tokens(), started_at=round(wall_started, 3), finished_at=round(time.time(), 3),
        seconds=round(time.perf_counter() - started, 4), model_seconds=round(rollout.model_seconds, 4),
        reward_seconds=round(reward_seconds, 4))
    run_dir = RunDir(state.spec.run_dir)
    if step_known or record.validation:
        run_dir.append_rollout(record)
    else:
        run_dir.append_generated(record)
    return record
