"""One call from an agent loop to verl's rollout server, shared by agentrl's loop and the endpoint's (program_loop).

    out, seconds = await sample(loop, request_id, prompt_ids, sampling_params, room, versions)

``loop`` is the agent loop instance: its ``parser`` (stop tokens), ``server_manager`` and ``state``.
"""

from __future__ import annotations

import time
from typing import Any

_VERSION_KEYS = ("global_steps", "min_global_steps", "max_global_steps")


def sampling_for(loop: Any, sampling_params: dict[str, Any], room: int) -> dict[str, Any]:
    """The sampling parameters of one call: at most ``room`` tokens, and the parser's stop tokens added."""
    params = dict(sampling_params, max_tokens=room)
    if loop.parser.stop_token_ids:
        params["stop_token_ids"] = sorted(set(params.get("stop_token_ids") or []) | set(loop.parser.stop_token_ids))
    return params


async def sample(loop: Any, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], room: int,
                 versions: dict[str, Any]) -> tuple[Any, float]:
    """One call to the rollout server with the parser's stop tokens added: its output and the seconds it took.
    The policy versions it reports (verl's trainer reads them to measure staleness) go into ``versions`` (the
    rollout's: min_global_steps stays the smallest seen) and ``loop.state.last_versions``."""
    params = sampling_for(loop, sampling_params, room)
    started = time.perf_counter()
    out = await loop.server_manager.generate(request_id, prompt_ids=list(prompt_ids), sampling_params=params)
    seconds = time.perf_counter() - started
    for key in _VERSION_KEYS:
        if out.extra_fields.get(key) is not None:
            value = out.extra_fields[key]
            if key == "min_global_steps" and key in versions:
                value = min(versions[key], value)
            versions[key] = value
            loop.state.last_versions[key] = out.extra_fields[key]
    return out, seconds
