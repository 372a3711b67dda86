"""Before a run attaches to a Ray cluster (``RAY_ADDRESS``): read what the cluster has, and refuse a plan it
cannot place, saying what is missing. verl would otherwise wait for its placement groups without a word.

    nodes = read_cluster("10.0.0.1:6379")          # alive nodes: address, CPUs and GPUs (total and free)
    problems, notes = check_fits(needs(overrides), nodes)

What a plan asks of the cluster (verl 0.9.1, ``trainer.nnodes`` × ``trainer.n_gpus_per_node`` ranks):
- one placement group per node, ``STRICT_PACK``: one bundle per rank of 1 GPU and ``COLOCATE_CPUS`` CPUs
  (verl's ``ResourcePoolManager.max_colocate_count``), so each of ``nnodes`` distinct nodes needs
  ``n_gpus_per_node`` GPUs and ``COLOCATE_CPUS × n_gpus_per_node`` CPUs;
- TransferQueue's controller and each of its storage units hold one CPU each, anywhere;
- verl's other actors (agent-loop and reward workers; the task runner runs in the driver, agentrl.verl.main,
  unless AGENTRL_TASK_RUNNER=actor) hold none once started, but Ray needs one free CPU to schedule each of them.
The cluster is read in a child process with a time limit: an unreachable address or a refused token is an
error with Ray's own reason, never a hang.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from agentrl.errors import AgentrlError

COLOCATE_CPUS = 3  # verl's ResourcePoolManager.max_colocate_count: CPUs in each rank's placement bundle
READ_TIMEOUT_S = 60.0
TQ_STORAGE_DEFAULT = 8  # verl's transfer_queue.backend.SimpleStorage.num_data_storage_units


class ClusterError(AgentrlError):
    """The Ray cluster cannot be read, or cannot place the run; the message says what is missing."""


@dataclass(frozen=True)
class Node:
    address: str
    cpus: float
    gpus: float
    free_cpus: float
    free_gpus: float

    def describe(self) -> str:
        return f"{self.address}: {_n(self.cpus)} CPU, {_n(self.gpus)} GPU"


@dataclass(frozen=True)
class Needs:
    nodes: int
    gpus_per_node: int
    cpus_per_node: int  # the placement group's CPUs on each of those nodes
    other_cpus: int  # anywhere in the cluster: TransferQueue, and one to schedule verl's other actors

    @property
    def total_cpus(self) -> int:
        return self.nodes * self.cpus_per_node + self.other_cpus


def _n(x: float) -> str:
    return f"{x:g}"


def needs(overrides: dict[str, Any]) -> Needs:
    """What the composed overrides ask of the cluster."""
    nodes = int(overrides.get("trainer.nnodes", 1))
    gpus = int(overrides.get("trainer.n_gpus_per_node", 8))
    storage = int(overrides.get("transfer_queue.backend.SimpleStorage.num_data_storage_units", TQ_STORAGE_DEFAULT))
    return Needs(nodes=nodes, gpus_per_node=gpus, cpus_per_node=COLOCATE_CPUS * gpus, other_cpus=1 + storage + 1)


def check_fits(need: Needs, nodes: list[Node]) -> tuple[list[str], list[str]]:
    """(problems, notes): problems make the plan unplaceable by the cluster as it is built; notes say when it
    fits, but not now, because other jobs hold part of it (the run then waits for them)."""
    problems: list[str] = []
    notes: list[str] = []
    fit = [n for n in nodes if n.gpus >= need.gpus_per_node and n.cpus >= need.cpus_per_node]
    if len(fit) < need.nodes:
        problems.append(
            f"the plan needs {need.nodes} node(s) with {need.gpus_per_node} GPU(s) and {need.cpus_per_node} CPUs each "
            f"(trainer.nnodes × trainer.n_gpus_per_node, {COLOCATE_CPUS} CPUs per GPU for verl's placement group); "
            f"{len(fit)} of the cluster's {len(nodes)} node(s) have that")
    total = sum(n.cpus for n in nodes)
    if total < need.total_cpus:
        problems.append(f"the plan needs {need.total_cpus} CPUs in all ({need.nodes} × {need.cpus_per_node} for the "
                        f"trainer ranks, {need.other_cpus} for TransferQueue and verl's other actors); the cluster "
                        f"has {_n(total)}")
    if not problems:
        free = [n for n in nodes if n.free_gpus >= need.gpus_per_node and n.free_cpus >= need.cpus_per_node]
        if len(free) < need.nodes or sum(n.free_cpus for n in nodes) < need.total_cpus:
            notes.append("the cluster has room for this run, but other jobs hold part of it now: the run waits for "
                         "them (`ray status` shows what is in use)")
    return problems, notes


def read_cluster(address: str, timeout: float = READ_TIMEOUT_S, env: dict[str, str] | None = None) -> list[Node]:
    """The alive nodes of the Ray cluster at ``address``, read by a short-lived driver in a child process
    (with ``env``, default this process's environment: Ray's authentication settings come from it)."""
    cmd = [sys.executable, "-m", "agentrl.verl.cluster", address]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"the Ray cluster at RAY_ADDRESS={address} did not answer within {timeout:.0f} s; check "
                           f"the address (`ray status --address={address}` on this machine) and that the head "
                           f"node's port is reachable from here") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        reason = "\n".join(lines[-6:]) or f"exit code {done.returncode}"
        hint = ""
        if "auth" in done.stderr.lower() or "token" in done.stderr.lower():
            hint = ("\nThe cluster uses token authentication: export RAY_AUTH_MODE=token and the cluster's token "
                    "(RAY_AUTH_TOKEN, or the file ~/.ray/auth_token copied from the head node) before `agentrl train`")
        raise ClusterError(f"could not read the Ray cluster at RAY_ADDRESS={address}:\n{reason}{hint}")
    return [Node(**n) for n in json.loads(done.stdout.strip().splitlines()[-1])]


def check_cluster(address: str, overrides: dict[str, Any], timeout: float = READ_TIMEOUT_S) -> list[str]:
    """Raise ``ClusterError`` when the cluster at ``address`` cannot place the plan; return lines to show."""
    nodes = read_cluster(address, timeout)
    need = needs(overrides)
    problems, notes = check_fits(need, nodes)
    listing = "; ".join(n.describe() for n in nodes) or "no node alive"
    if problems:
        raise ClusterError(
            f"the Ray cluster at RAY_ADDRESS={address} cannot place this run: " + "; ".join(problems)
            + f".\nIts nodes: {listing}.\nAdd the missing nodes (`ray start --address={address}` with --num-cpus and "
            "--num-gpus as needed), or plan for what is there with agentrl.nodes and agentrl.gpus_per_node")
    return [f"Ray cluster at {address}: {len(nodes)} node(s) ({listing}); the plan needs {need.nodes} × "
            f"({need.gpus_per_node} GPU, {need.cpus_per_node} CPU) + {need.other_cpus} CPU: it fits", *notes]


def _main(address: str) -> None:
    """Print the cluster's alive nodes as one JSON line (run as ``python -m agentrl.verl.cluster ADDRESS``)."""
    import logging

    import ray
    from ray._private.state import available_resources_per_node

    ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, include_dashboard=False,
             configure_logging=False)
    try:
        free = available_resources_per_node()
        out = []
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            total, avail = node.get("Resources", {}), free.get(node["NodeID"], {})
            out.append({"address": f"{node.get('NodeManagerAddress')}:{node.get('NodeManagerPort')}",
                        "cpus": total.get("CPU", 0.0), "gpus": total.get("GPU", 0.0),
                        "free_cpus": avail.get("CPU", 0.0), "free_gpus": avail.get("GPU", 0.0)})
    finally:
        ray.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    _main(sys.argv[1])
