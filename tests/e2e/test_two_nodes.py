"""End to end on a two-node Ray cluster started with `ray start`, as the README's "More than one machine" does.

Both nodes run on this machine (8 CPUs and 1 logical GPU each, standing in for two 1-GPU machines; the CPU path
trains on a logical GPU), each on a host of its own where it can be made (a network namespace with its own
address, see ray_cluster.py; `agentrl train` runs on the head host), with token authentication on, as Ray 2.60 has it once a token exists. `agentrl train`
attaches through RAY_ADDRESS with `agentrl.nodes=2`: one trainer rank on each node. One run lives through two
attempts: killed with `kill -9` in the middle of step 2, before its first checkpoint, then run again to the end.
What only a real cluster shows: verl's metrics reach the run directory from workers whose environment is the
`ray start` command's, actors land on both nodes, a killed driver leaves no actor alive and both nodes up, and
one tool cap holds for processes on both nodes (the run-wide limiter, checked on the same cluster after the run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from ray_cluster import RayCluster, hosts_possible  # tests/e2e/ray_cluster.py (pytest puts it on sys.path)
from runs import AGENTRL, tree_of

STEPS = 12  # steps take about a second here: enough of them that the kill lands mid-run

ACTORS = """
import json, logging, sys
import ray
from ray._private import state
ray.init(address=sys.argv[1], logging_level=logging.ERROR, log_to_driver=False, configure_logging=False)
print(json.dumps({"nodes": [n["NodeID"] for n in ray.nodes() if n["Alive"]],
                  "addresses": [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]],
                  "actors": [{"id": a["ActorID"], "cls": a["ActorClassName"], "state": a["State"],
                              "node": a["Address"]["NodeID"]} for a in state.actors().values()]}))
"""


LIMITS = """
import asyncio, json, logging, os, sys, urllib.request
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address=sys.argv[1], logging_level=logging.ERROR, log_to_driver=False, configure_logging=False)
cfg = json.loads(sys.argv[2])

@ray.remote(num_cpus=0)
class Caller:
    async def run(self):
        from agentrl.tools import ToolHub, ToolInfraError
        hub = ToolHub.from_config(cfg["tools"], run_key=cfg["key"])
        async def one(i):
            async with hub.rollout(f"r{i}") as session:
                try:
                    result = await session.call({"id": f"{os.getpid()}-{i}", "name": "tool", "arguments": {}})
                except ToolInfraError as exc:
                    return f"infra: {exc}"
                return "ok" if result.content.startswith("ok") else result.content
        try:
            results = await asyncio.gather(*(one(i) for i in range(cfg["calls"])))
        finally:
            await hub.aclose()
        return {"node": ray.get_runtime_context().get_node_id(), "results": results}

@ray.remote(num_cpus=0)
class Holder:
    async def start(self):
        from agentrl.tools import ToolHub
        self.hub = ToolHub.from_config(cfg["hold"], run_key=cfg["key"])
        async def hold(i):
            async with self.hub.rollout(f"h{i}") as session:
                await session.call({"id": f"hold-{i}", "name": "hold", "arguments": {"sleep": 600}})
        self.tasks = [asyncio.create_task(hold(i)) for i in range(2)]
        return os.getpid()

nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
where = [NodeAffinitySchedulingStrategy(n, soft=False) for n in nodes]
# kill -9 of a process on the other node holding 2 slots: they come back within the lease
holder = Holder.options(scheduling_strategy=where[-1]).remote()
pid = ray.get(holder.start.remote())
import time
limiter, end = None, time.monotonic() + 120
while time.monotonic() < end:
    try:
        limiter = limiter or ray.get_actor(cfg["actor"], namespace="agentrl")
        if ray.get(limiter.stats.remote())["servers"].get("hold", {}).get("in_use") == 2:
            break
    except ValueError:
        pass
    time.sleep(0.2)
held = ray.get(limiter.stats.remote())
os.kill(pid, 9)
killed = time.monotonic()
while ray.get(limiter.stats.remote())["servers"]["hold"]["in_use"] and time.monotonic() - killed < 120:
    time.sleep(0.2)
returned = {"seconds": time.monotonic() - killed, "held": held, "after": ray.get(limiter.stats.remote())}
callers = [Caller.options(scheduling_strategy=w).remote() for w in where]
out = ray.get([c.run.remote() for c in callers])
print(json.dumps({"callers": out, "stats": json.loads(urllib.request.urlopen(cfg["stats"]).read()), "kill": returned}))
"""


def tool_limits_across_nodes(cluster: RayCluster, root: Path) -> dict:
    """One process on each node calls one endpoint (tests/tools/servers/traffic_server.py on the head host:
    heavy-tailed latency, 429s injected) through the run-wide limiter at max_concurrency 4."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server_py = Path(__file__).resolve().parent.parent / "tools" / "servers" / "traffic_server.py"
    server = subprocess.Popen([*cluster.prefix, sys.executable, str(server_py), "--port", str(port), "--host",
                               cluster.ips[0], "--p50", "0.05", "--p99", "0.5", "--p429", "0.1", "--retry-after",
                               "0.2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://{cluster.ips[0]}:{port}"
        tools = [{"name": "tool", "url": f"{base}/tool", "parameters": {"type": "object"}, "max_concurrency": 4}]
        hold = [{"name": "hold", "url": f"{base}/hold", "parameters": {"type": "object"}, "max_concurrency": 2}]
        from agentrl.tools.limits import actor_name

        cfg = {"tools": tools, "hold": hold, "key": str(root / "limits"), "actor": actor_name(str(root / "limits")),
               "calls": 16, "stats": f"{base}/stats"}
        deadline = time.monotonic() + 60
        while True:
            probe = subprocess.run([*cluster.prefix, sys.executable, "-c", "import socket,sys; socket.create_connection("
                                    "(sys.argv[1], int(sys.argv[2])), timeout=1).close()", cluster.ips[0], str(port)],
                                   capture_output=True)
            if probe.returncode == 0 or time.monotonic() > deadline or server.poll() is not None:
                break
            time.sleep(0.5)
        done = subprocess.run([*cluster.prefix, sys.executable, "-c", LIMITS, cluster.address, json.dumps(cfg)],
                              env=cluster.env, capture_output=True, text=True, timeout=300)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:  # still answering a held call: end it
            server.kill()
            server.wait(10)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def cluster_state(cluster: RayCluster) -> dict:
    done = subprocess.run([*cluster.prefix, sys.executable, "-c", ACTORS, cluster.address], env=cluster.env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def training_steps(run: Path) -> list[int]:
    from agentrl.runlog import read_jsonl  # whole lines only: the watcher may be writing one

    return [m["step"] for m in read_jsonl(run / "metrics.jsonl")[0] if not m.get("validation")]


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory, demo):
    root = tmp_path_factory.mktemp("cluster")
    run = root / "run"
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump({"agentrl": {
        "name": "two-nodes", "model": demo["model_path"], "train_data": demo["train_path"],
        "rewards": [{"name": "math", "weight": 1.0}], "nodes": 2,
        "batch_size": 2, "samples_per_prompt": 4, "max_steps": STEPS,  # one checkpoint, at the end
        "max_prompt_length": 256, "max_response_length": 32, "learning_rate": 5e-4, "run_dir": str(run),
        "agent": {"max_turns": 1}}}))
    no_hosts = hosts_possible()
    result: dict = {"run": run, "no_hosts": no_hosts}
    with RayCluster(nodes=2, cpus=8, gpus=1, hosts=not no_hosts) as cluster:
        env = {**cluster.env, "PYTHONUNBUFFERED": "1"}
        result["ips"] = cluster.ips
        agentrl = [*cluster.prefix, *AGENTRL]
        # a plan the cluster cannot place (two logical GPUs a node) stops before verl, saying what is missing
        refused = subprocess.run(agentrl + ["train", str(config), "agentrl.gpus_per_node=2"], capture_output=True,
                                 text=True, env=env, cwd=root, timeout=300)
        result["refused"] = (refused.returncode, refused.stdout + refused.stderr)
        result["refused_started_verl"] = (run / "training.log").exists()
        dry = subprocess.run(agentrl + ["train", str(config), "--dry-run"], capture_output=True, text=True, env=env,
                             cwd=root, timeout=300)
        result["dry_run"] = (dry.returncode, dry.stdout + dry.stderr)
        first = subprocess.Popen(agentrl + ["train", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, env=env, cwd=root)
        deadline = time.monotonic() + 1200
        verl_log = run / "logs" / "verl_metrics.1.jsonl"  # verl's own metrics file: step 1 done, step 2 under way
        while not (verl_log.exists() and verl_log.stat().st_size) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        result["running_at_kill"] = first.poll() is None
        result["at_kill"] = cluster_state(cluster)
        local = tree_of(first.pid)[1:]  # the guard, tool servers: on the head host (none if agentrl ended early)
        first.kill()  # kill -9 mid-run, before the run's one checkpoint (at its last step)
        result["out1"] = first.communicate(timeout=60)[0]
        result["checkpoint_at_kill"] = (run / "checkpoints" / "latest_checkpointed_iteration.txt").exists()
        killed_at = time.monotonic()
        while True:
            after = cluster_state(cluster)
            alive = [a for a in after["actors"] if a["state"] != "DEAD"]
            if not alive or time.monotonic() - killed_at > 60:
                break
            time.sleep(1.0)
        result["after_kill"], result["seconds_to_clean"] = after, time.monotonic() - killed_at
        # the run directory stays locked until the last process of the killed run is gone (README); a user
        # who runs again sooner is told to wait
        _, left = psutil.wait_procs(local, timeout=60)
        result["local_left"] = [p.pid for p in left]
        before = {a["id"] for a in after["actors"]}

        second = subprocess.run(agentrl + ["train", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, cwd=root, timeout=1500)
        result["rc2"], result["out2"] = second.returncode, second.stdout
        result["second_actors"] = [a for a in cluster_state(cluster)["actors"] if a["id"] not in before]
        result["tool_limits"] = tool_limits_across_nodes(cluster, root)
        # where verl's file logger writes when VERL_FILE_LOGGER_PATH does not reach it: the cwd of `ray start`
        result["stray_metrics"] = [str(p) for p in cluster.temp.rglob("agentrl/*.jsonl")]
    (root / "summary.json").write_text(json.dumps({k: v for k, v in result.items() if k != "run"}, default=str))
    return result


def test_the_killed_attempt_was_mid_step_before_its_first_checkpoint(cluster_run):
    assert cluster_run["running_at_kill"], cluster_run["out1"][-3000:]
    assert not cluster_run["checkpoint_at_kill"]


def test_the_nodes_are_two_hosts(cluster_run):
    """Two addresses, one a node: gloo, Ray's object transfers and the run's files cross between hosts."""
    if cluster_run["no_hosts"]:
        pytest.skip(f"two hosts cannot be made here ({cluster_run['no_hosts']}): both nodes ran on 127.0.0.1")
    nodes = cluster_run["at_kill"]["addresses"]
    assert sorted(nodes) == sorted(cluster_run["ips"]) and len(set(nodes)) == 2


def test_kill_9_leaves_no_actor_alive_and_both_nodes_up(cluster_run):
    at_kill = cluster_run["at_kill"]
    alive = [a for a in at_kill["actors"] if a["state"] == "ALIVE"]
    assert {a["node"] for a in alive} == set(at_kill["nodes"]) and len(at_kill["nodes"]) == 2
    after = cluster_run["after_kill"]
    assert [a for a in after["actors"] if a["state"] != "DEAD"] == []
    assert cluster_run["local_left"] == []
    assert sorted(after["nodes"]) == sorted(at_kill["nodes"])


def test_the_run_again_trains_to_the_end_on_both_nodes(cluster_run):
    out = cluster_run["out2"]
    assert cluster_run["rc2"] == 0, out[-4000:]
    assert "restarting" in out and "from step 1: no checkpoint was complete" in out
    assert f"agentrl: done, step {STEPS} of {STEPS}" in out
    assert f"step {STEPS}/{STEPS}" in out  # console progress, from verl's metrics file
    assert len({a["node"] for a in cluster_run["second_actors"]}) == 2, cluster_run["second_actors"]


def test_metrics_from_the_cluster_hold_every_step_once(cluster_run):
    run = cluster_run["run"]
    assert training_steps(run) == list(range(1, STEPS + 1))
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all(m["loss"] is not None and m["rollouts"] == 8 for m in lines), lines  # verl's own metrics and ours, joined
    aside = run / "logs" / "rewound.2.metrics.jsonl"
    assert [json.loads(line)["step"] for line in aside.read_text().splitlines()][:1] == [1]
    status = json.loads((run / "checkpoint_status.json").read_text())
    assert status["complete"] and status["step"] == STEPS
    log = (run / "training.log").read_text(errors="replace")
    assert "===== attempt 1" in log and "===== attempt 2" in log
    assert cluster_run["stray_metrics"] == []


def test_a_plan_the_cluster_cannot_place_stops_before_verl_with_what_is_missing(cluster_run):
    rc, out = cluster_run["refused"]
    assert rc == 2, out[-3000:]
    assert "cannot place this run: the plan needs 2 node(s) with 2 GPU(s) and 6 CPUs each" in out
    assert "0 of the cluster's 2 node(s) have that" in out
    assert not cluster_run["refused_started_verl"]


def test_the_dry_run_reads_the_cluster_and_shows_what_every_worker_gets(cluster_run):
    rc, out = cluster_run["dry_run"]
    assert rc == 0, out[-3000:]
    assert "node(s)" in out and "it fits" in out
    assert "AGENTRL_SANDBOX_WORKERS:" in out  # in ray_kwargs.ray_init.runtime_env.env_vars
    assert "runtime_env.env_vars.VERL_FILE_LOGGER_PATH=" in out  # this run's own part, printed apart


def test_one_tool_cap_holds_across_both_nodes_and_429s_lose_nothing(cluster_run):
    """A process on each node, 16 calls each at once, max_concurrency 4 through the run's limiter: the endpoint
    never has more than 4 calls at once, and every call is answered after the injected 429s."""
    got = cluster_run["tool_limits"]
    assert len({c["node"] for c in got["callers"]}) == 2
    assert [r for c in got["callers"] for r in c["results"]] == ["ok"] * 32
    stats = got["stats"]
    assert stats["route_peak"]["tool"] == 4 and stats["answered"] == 32 and stats["pushed_back"] > 0, stats


def test_a_process_killed_on_the_other_node_gives_its_tool_slots_back_within_the_lease(cluster_run):
    """kill -9 of a process on the second node while 2 of its calls hold both slots of a server: the limiter
    takes them back 15 s (the lease) after its last heartbeat, checked every 3 s."""
    kill = cluster_run["tool_limits"]["kill"]
    assert kill["held"]["servers"]["hold"]["in_use"] == 2
    assert kill["after"]["servers"]["hold"]["in_use"] == 0 and kill["after"]["servers"]["hold"]["expired"] == 2
    assert kill["seconds"] <= 15 + 3 + 3, kill["seconds"]
