"""Run-wide tool limits on a real local Ray: several processes (each what an agent-loop worker is to the
limiter: a process on the cluster with a ToolHub given the run's key) call one loopback endpoint
(tests/tools/servers/traffic_server.py: heavy-tailed latency, injected 429s, in-flight calls recorded).
One Ray start-up for the whole file."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from agentrl.tools.limits import NAMESPACE, actor_name

from .conftest import HERE, _wait_for_port, free_port, run, stop

ray = pytest.importorskip("ray")

WORKER = """
import asyncio, json, logging, os, sys
import ray
ray.init(address=sys.argv[1], logging_level=logging.ERROR, log_to_driver=False, configure_logging=False)
from agentrl.tools import ToolHub, ToolInfraError
cfg = json.loads(sys.argv[2])

async def main():
    hub = ToolHub.from_config(cfg["tools"], run_key=cfg["run_key"])
    async def one(i):
        async with hub.rollout(f"r{i}") as session:
            try:
                result = await session.call({"id": f"{os.getpid()}-{i}", "name": "tool", "arguments": cfg["args"]})
            except ToolInfraError as exc:
                return f"infra: {exc}"
            return "ok" if result.content.startswith("ok") else result.content
    print("STARTED", flush=True)
    results = await asyncio.gather(*(one(i) for i in range(cfg["calls"])))
    await hub.aclose()
    print(json.dumps(results), flush=True)

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory):
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=4, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             _temp_dir=str(tmp_path_factory.mktemp("ray")))
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _server(*args: str):
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "servers" / "traffic_server.py"), "--port", str(port), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_port(port, proc)
    return proc, f"http://127.0.0.1:{port}"


def _limiter(run_key: str, lease_s: float):
    """The run's limiter, made first here so that its lease time is the test's (the first process makes it)."""
    from agentrl.tools.leases import actor_class

    actor = actor_class().options(name=actor_name(run_key), namespace=NAMESPACE, lifetime="detached",
                                  get_if_exists=True).remote(lease_s)
    assert ray.get(actor.ping.remote()) == lease_s
    return actor


def _workers(address: str, n: int, cfg: dict) -> list[subprocess.Popen]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    return [subprocess.Popen([sys.executable, "-c", WORKER, address, json.dumps(cfg)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env) for _ in range(n)]


def _results(procs: list[subprocess.Popen]) -> list[str]:
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        out += json.loads(stdout.strip().splitlines()[-1])
    return out


def _until(condition, what: str, limit: float = 120.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {limit}s")


@pytest.mark.parametrize("scope", ["run", "process"])
def test_the_cap_holds_across_processes_and_nothing_is_lost_to_429s(ray_address, scope):
    """Three processes, 16 calls each at once, max_concurrency 4: the server never sees more than 4 at once
    with the run's limiter; with ``"limit_scope": "process"`` (each process on its own) it does."""
    proc, base = _server("--p50", "0.05", "--p99", "0.5", "--p429", "0.1", "--retry-after", "0.2")
    key = f"cap-{scope}"
    actor = _limiter(key, 15.0)
    try:
        tools = [{"name": "tool", "url": f"{base}/tool", "parameters": {"type": "object"}, "max_concurrency": 4,
                  "rate_limit": None, "limit_scope": scope, "circuit_failures": 1000}]
        # every call's first attempt is answered 429 (Retry-After 0.2 s), and a tenth of the others at random
        pushed = {"fail": 1, "status": 429, "retry_after": "0.2"}
        results = _results(_workers(ray_address, 3, {"tools": tools, "run_key": key, "args": pushed, "calls": 16}))
        stats = httpx.get(f"{base}/stats").json()
        assert results == ["ok"] * 48  # every call answered, the 429s waited out
        assert stats["answered"] == 48 and stats["pushed_back"] >= 48
        if scope == "run":
            assert stats["peak"] == 4, stats["peak"]
            limiter = _until(lambda: (s := ray.get(actor.stats.remote()))["servers"]["tool"]["in_use"] == 0 and s,
                             "every slot back")
            assert limiter["servers"]["tool"]["peak"] == 4
            # one lease per request the server saw, and one per process for tools/list (which a function tool
            # answers from its config without a request)
            assert limiter["servers"]["tool"]["granted"] == stats["calls"] + 3
        else:
            assert stats["peak"] > 4, stats["peak"]
    finally:
        ray.kill(actor)
        stop(proc)


def test_a_process_killed_holding_slots_gives_them_back_within_the_lease(ray_address):
    proc, base = _server()
    key, lease_s = "kill", 3.0
    actor = _limiter(key, lease_s)
    try:
        tools = [{"name": "tool", "url": f"{base}/tool", "parameters": {"type": "object"}, "max_concurrency": 2}]
        holder = _workers(ray_address, 1, {"tools": tools, "run_key": key, "args": {"sleep": 120}, "calls": 2})[0]
        _until(lambda: httpx.get(f"{base}/stats").json()["in_flight"] == 2, "two calls in flight")
        assert ray.get(actor.stats.remote())["servers"]["tool"]["in_use"] == 2
        os.kill(holder.pid, signal.SIGKILL)
        killed = time.monotonic()
        holder.communicate(timeout=60)
        _until(lambda: ray.get(actor.stats.remote())["servers"]["tool"]["in_use"] == 0, "the slots back", 60)
        back_after = time.monotonic() - killed
        # the lease, plus one reaper period (lease / 5), plus the last heartbeat's age (at most lease / 5)
        assert back_after <= lease_s * 1.4 + 1.0, back_after
        assert ray.get(actor.stats.remote())["servers"]["tool"]["expired"] == 2
        # the slots serve the next process at once
        again = _results(_workers(ray_address, 1, {"tools": tools, "run_key": key, "args": {"sleep": 0}, "calls": 2}))
        assert again == ["ok", "ok"]
    finally:
        ray.kill(actor)
        stop(proc)


def test_a_process_that_loses_the_limiter_fails_its_calls_clearly_and_never_goes_unlimited(ray_address):
    from agentrl.tools import ToolHub, ToolInfraError

    proc, base = _server()
    tools = [{"name": "tool", "url": f"{base}/tool", "parameters": {"type": "object"}, "max_concurrency": 2}]

    async def go():
        hub = ToolHub.from_config(tools, run_key="lost")
        try:
            async with hub.rollout("r") as session:
                first = await session.call({"id": "a", "name": "tool", "arguments": {}})
                assert hub.run_limits is not None and first.content == "ok a"
                ray.kill(ray.get_actor(actor_name("lost"), namespace=NAMESPACE))
                with pytest.raises(ToolInfraError) as err:
                    await session.call({"id": "b", "name": "tool", "arguments": {}})
                # the next call looks the limiter up again: a new one, limiting as before
                third = await session.call({"id": "c", "name": "tool", "arguments": {}})
                assert third.content == "ok c"
                stats = await hub.run_limits.stats()
                assert stats["servers"]["tool"]["granted"] == 1 and stats["servers"]["tool"]["max_concurrency"] == 2
                ray.kill(ray.get_actor(actor_name("lost"), namespace=NAMESPACE))
                return err.value
        finally:
            await hub.aclose()

    try:
        error = run(go())
        calls = httpx.get(f"{base}/stats").json()["calls"]
    finally:
        stop(proc)
    assert error.kind == "limiter"
    text = str(error)
    assert actor_name("lost") in text and "namespace 'agentrl'" in text and '"limit_scope": "process"' in text
    assert calls == 2  # the second call never went out (the first and third did)


def test_a_hub_without_a_run_key_limits_its_own_process(ray_address):
    from agentrl.tools import ToolHub

    async def gates(run_key):
        hub = ToolHub.from_config([{"name": "t", "url": "http://127.0.0.1:9/t", "parameters": {"type": "object"}}],
                                  run_key=run_key)
        hub._bind()
        return hub._servers["t"].gate.scope

    assert asyncio.run(gates(None)) == "process" and asyncio.run(gates("some-run")) == "run"


def test_rollout_workers_sets_verls_agent_loop_processes(tmp_path):
    from agentrl.config import AgentrlSettings
    from agentrl.verl.args import build_overrides

    def workers(**extra):
        s = AgentrlSettings(model="m", train_data="t.jsonl", rewards=["math"], device="cpu", **extra)
        o = build_overrides(s, {}, model_path="m", train_file="t.parquet", val_file=None, run_dir=tmp_path,
                            spec_path="spec.json", cpu=True)
        return o["actor_rollout_ref.rollout.agent.num_workers"]

    assert workers() == 1 and workers(rollout_workers=3) == 3
    with pytest.raises(Exception, match="rollout_workers"):
        AgentrlSettings(model="m", train_data="t.jsonl", rewards=["math"], rollout_workers=0)


def test_the_limiter_ends_itself_once_no_process_has_used_it_for_a_while(ray_address):
    from agentrl.tools.leases import actor_class

    name = actor_name("idle")
    actor = actor_class().options(name=name, namespace=NAMESPACE, lifetime="detached").remote(0.5, idle_exit_s=1.0)
    ray.get(actor.heartbeat.remote("a-process"))  # a holder, silent from now on

    def gone():
        try:
            ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return True
        return False

    _until(gone, "the idle limiter gone", 60)
