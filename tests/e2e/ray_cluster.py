"""A Ray cluster of several nodes on this machine, started the way the README starts one (`ray start`), for tests.

    with RayCluster(nodes=2, cpus=8, gpus=1) as cluster:
        subprocess.run([...agentrl train...], env=cluster.env)   # RAY_ADDRESS and the auth token set
        cluster.node_ids()                                         # the alive nodes

Every node listens on 127.0.0.1 only, on ports found free here, with a temp dir of its own, and token
authentication on (Ray's default once a token exists) with a token that lives only in ``cluster.env``:
nothing reaches ~/.ray or the environment of the process that starts it. Each node is a `ray start --block`
process; the cluster ends by signalling those processes by pid, never with `ray stop`.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
PORTS_PER_NODE = 8
WORKER_PORTS = 100


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_block(size: int) -> int:
    """The first of ``size`` consecutive ports that are free now."""
    for _ in range(200):
        base = random.randrange(20000, 59000)
        if all(_free(p) for p in range(base, base + size)):
            return base
    raise RuntimeError("no block of free ports found")


class RayCluster:
    def __init__(self, nodes: int = 2, cpus: int = 8, gpus: int = 1, auth: bool = True) -> None:
        self.nodes, self.cpus, self.gpus = nodes, cpus, gpus
        # short: Ray's Unix sockets live under it and their paths have a length limit
        self.temp = Path(tempfile.mkdtemp(prefix="rc-", dir="/tmp"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        self.env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token" if auth else "disabled"})
        if auth:
            self.env["RAY_AUTH_TOKEN"] = uuid.uuid4().hex
        self.procs: list[subprocess.Popen] = []
        self.address = ""
        self.last_error = ""

    def _start(self, index: int) -> subprocess.Popen:
        base = _port_block(PORTS_PER_NODE + WORKER_PORTS)
        args = [RAY, "start", "--block", "--disable-usage-stats", f"--num-cpus={self.cpus}", f"--num-gpus={self.gpus}",
                f"--temp-dir={self.temp / f'n{index}'}",
                f"--node-manager-port={base}", f"--object-manager-port={base + 1}",
                f"--metrics-export-port={base + 2}", f"--dashboard-agent-grpc-port={base + 3}",
                f"--dashboard-agent-listen-port={base + 4}", f"--runtime-env-agent-port={base + 5}",
                f"--min-worker-port={base + PORTS_PER_NODE}", f"--max-worker-port={base + PORTS_PER_NODE + WORKER_PORTS - 1}",
                "--object-store-memory=200000000"]
        if index == 0:
            self.address = f"127.0.0.1:{base + 6}"
            args += ["--head", f"--port={base + 6}", f"--ray-client-server-port={base + 7}", "--include-dashboard=false"]
        else:
            args += [f"--address={self.address}"]
        log = open(self.temp / f"n{index}.log", "wb")  # noqa: SIM115 (kept open for the process)
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.temp,
                                start_new_session=True)

    def __enter__(self) -> "RayCluster":
        try:
            self.procs.append(self._start(0))
            self._wait_nodes(1)
            for i in range(1, self.nodes):
                self.procs.append(self._start(i))
            self._wait_nodes(self.nodes)
        except BaseException:
            self.close()
            raise
        self.env["RAY_ADDRESS"] = self.address
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def alive_nodes(self) -> list[dict]:
        """The alive nodes, as a driver of this cluster sees them (read in a child process)."""
        from agentrl.verl.cluster import read_cluster

        return [n.__dict__ for n in read_cluster(self.address, timeout=60, env=self.env)]

    def _wait_nodes(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"ray start exited with {dead[0].returncode}: {self.log_tail()}")
            if self.address:
                try:
                    if len(self.alive_nodes()) >= count:
                        return
                except Exception as exc:
                    self.last_error = str(exc)
            time.sleep(1.0)
        raise RuntimeError(f"{count} Ray node(s) not up in {timeout:.0f} s ({self.last_error}): {self.log_tail()}")

    def log_tail(self) -> str:
        return "\n".join((p.read_text(errors="replace")[-2000:]) for p in sorted(self.temp.glob("n*.log")))

    def pids(self) -> list[int]:
        """Every process of the cluster (the `ray start` processes and what they started)."""
        import psutil

        out = []
        for proc in self.procs:
            try:
                root = psutil.Process(proc.pid)
                out += [root.pid, *(c.pid for c in root.children(recursive=True))]
            except psutil.Error:
                pass
        return out

    def close(self) -> None:
        """End each node by the pid of its `ray start --block` (workers first, the head last)."""
        import psutil

        for proc in reversed(self.procs):
            tree = []
            try:
                root = psutil.Process(proc.pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                pass
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            _, left = psutil.wait_procs(tree, timeout=15)
            for p in left:  # only processes this node started
                try:
                    p.kill()
                except psutil.Error:
                    pass
        self.procs = []
        shutil.rmtree(self.temp, ignore_errors=True)
