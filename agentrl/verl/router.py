"""verl's request router for agentrl's CPU runs, in a process that imports neither verl nor torch.

verl sends each generate request of its agent-loop workers through one Ray actor that picks the rollout server
(``verl.workers.rollout.router.GlobalRequestLoadBalancer``: the server a request id used before, else the one
with the fewest requests in flight). That actor is a process of its own, and because its class lives in verl, the
process imports verl, and with it torch and transformers, to keep a dictionary: on a 2-core machine about 13 s
of CPU at every start, beside the processes doing the work. verl's own extension point for routers,
``actor_rollout_ref.rollout.router_config_path`` (a YAML file naming ``router_class``, constructed with
``(servers, that file's dict)``), lets agentrl run the same policy from this module, whose process imports only
Ray, cachetools and the standard library. It implements verl's ``RequestLoadBalancer`` protocol (verl's
``workers/rollout/router.py``) in full, the calls verl's trainers make to add, remove and rebalance servers
included. verl forwards no ``full_determinism`` flag to a router of this kind, so the CPU plan, which never sets
it, is where agentrl selects it (``agentrl.verl.args.CPU_DEFAULTS``).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import cachetools

CONFIG = Path(__file__).with_name("router.yaml")  # what router_config_path names (an absolute path)


class Router:
    """Sticky by request id (a multi-turn rollout's requests go to the server holding its prefix), else the
    server with the fewest requests in flight, ties broken at random; the last ``max_cache_size`` request ids
    are remembered."""

    def __init__(self, servers: dict[str, Any], config: dict | None = None) -> None:
        self._servers: dict[str, Any] = dict(servers)
        self._inflight: dict[str, int] = {sid: 0 for sid in servers}
        self._sticky: cachetools.LRUCache = cachetools.LRUCache(maxsize=int((config or {}).get("max_cache_size", 10000)))

    def acquire_server(self, request_id: str, **extra: Any) -> tuple[str, Any]:
        server_id = self._sticky.get(request_id)  # a hit makes the id the most recently used
        if server_id is None or server_id not in self._inflight:  # new, evicted, or its server removed since
            if not self._inflight:
                raise RuntimeError("No available servers in load balancer")
            least = min(self._inflight.values())
            server_id = random.choice([sid for sid, n in self._inflight.items() if n == least])
            self._sticky[request_id] = server_id  # the least recently used id goes when the cache is full
        self._inflight[server_id] += 1
        return server_id, self._servers[server_id]

    def release_server(self, server_id: str, request_id: str | None = None) -> None:
        if self._inflight.get(server_id, 0) > 0:
            self._inflight[server_id] -= 1

    def require_acquire_fields(self) -> list[str]:
        return []

    def require_release_fields(self) -> list[str]:
        return []

    def add_servers(self, servers: dict[str, Any]) -> None:
        for sid, handle in servers.items():
            self._servers[sid], self._inflight[sid] = handle, 0

    def remove_servers(self, server_ids: list[str]) -> None:
        for sid in server_ids:
            self._servers.pop(sid, None)
            self._inflight.pop(sid, None)

    def get_inflight_count(self, server_id: str) -> int:
        return self._inflight.get(server_id, 0)

    def get_all_servers(self) -> list[str]:
        return list(self._inflight)

    def clear_sticky_cache(self) -> dict:
        cleared = len(self._sticky)
        self._sticky.clear()
        return {"cleared_entries": cleared, "server_loads": dict(self._inflight)}

    def get_status(self) -> dict:
        return {"servers": dict(self._inflight), "total_inflight": sum(self._inflight.values()),
                "active_servers": len(self._inflight), "registered_handles": list(self._servers)}

    def get_total_inflight(self) -> int:
        return sum(self._inflight.values())
