"""A Ray cluster of several nodes on this machine, started the way the README starts one (`ray start`), for tests.

    with RayCluster(nodes=2, cpus=8, gpus=1) as cluster:
        subprocess.run([...agentrl train...], env=cluster.env)   # RAY_ADDRESS and the auth token set
        cluster.node_ids()                                         # the alive nodes

With ``hosts=True`` (root, and `ip netns` working) each node is a host of its own: a network namespace with an
address on a virtual link between the two (10.251.x.1 and .2; nothing outside this machine is reachable from
either), with the machine's host name, which resolves to a loopback address here as on many machines: what a
cluster of two machines shows and nodes sharing 127.0.0.1 hide (gloo's peers connecting to 127.0.0.1, an
address that is only right on one machine). Commands that should run on the head host (a driver,
`agentrl train`) are prefixed with ``cluster.prefix``. Without namespaces every node listens on 127.0.0.1 only.
Nodes use ports found free here and a temp dir of their own, and token authentication is on (Ray's default once
a token exists) with a token that lives only in ``cluster.env``: nothing reaches ~/.ray or the environment of the
process that starts it. Each node is a `ray start --block` process; the cluster ends by signalling those
processes by pid, never with `ray stop`, then its namespaces are removed.
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


def hosts_possible() -> str:
    """Why two hosts cannot be made here ('' when they can): namespaces need root and the `ip` command."""
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("ip"):
        return "no `ip` command (iproute2)"
    probe = f"arlprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ""


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
    def __init__(self, nodes: int = 2, cpus: int = 8, gpus: int = 1, auth: bool = True, hosts: bool = False) -> None:
        self.nodes, self.cpus, self.gpus = nodes, cpus, gpus
        self.namespaces: list[str] = []  # one network namespace a node, with hosts=True
        self.ips = ["127.0.0.1"] * nodes
        self.prefix: list[str] = []  # runs a command on the head host
        # short: Ray's Unix sockets live under it and their paths have a length limit
        self.temp = Path(tempfile.mkdtemp(prefix="rc-", dir="/tmp"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        self.env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token" if auth else "disabled"})
        if auth:
            self.env["RAY_AUTH_TOKEN"] = uuid.uuid4().hex
        self.procs: list[subprocess.Popen] = []
        self.hosts_wanted = hosts
        self.address = ""
        self.last_error = ""

    def _make_hosts(self) -> None:
        """Two network namespaces joined by a virtual link, each with a default route over it (Ray finds a host's
        address from its route, as on a machine)."""
        if self.nodes != 2:
            raise ValueError("hosts=True makes two hosts")
        tag = f"arl{os.getpid() % 100000}{random.randrange(100)}"
        net = f"10.251.{random.randrange(20, 250)}"
        self.namespaces = [f"{tag}-0", f"{tag}-1"]
        self.ips = [f"{net}.1", f"{net}.2"]
        links = [f"{tag}a", f"{tag}b"]

        def ip(*args: str) -> None:
            subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

        for ns in self.namespaces:
            ip("netns", "add", ns)
        ip("link", "add", links[0], "type", "veth", "peer", "name", links[1])
        for ns, link, addr in zip(self.namespaces, links, self.ips):
            ip("link", "set", link, "netns", ns)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", link)
            ip("-n", ns, "link", "set", link, "up")
            ip("-n", ns, "route", "add", "default", "dev", link)
        self.prefix = ["ip", "netns", "exec", self.namespaces[0]]

    def _start(self, index: int) -> subprocess.Popen:
        base = _port_block(PORTS_PER_NODE + WORKER_PORTS)
        on_host = ["ip", "netns", "exec", self.namespaces[index]] if self.namespaces else []
        args = [*on_host, RAY, "start", "--block", "--disable-usage-stats", f"--num-cpus={self.cpus}", f"--num-gpus={self.gpus}",
                f"--temp-dir={self.temp / f'n{index}'}",
                f"--node-manager-port={base}", f"--object-manager-port={base + 1}",
                f"--metrics-export-port={base + 2}", f"--dashboard-agent-grpc-port={base + 3}",
                f"--dashboard-agent-listen-port={base + 4}", f"--runtime-env-agent-port={base + 5}",
                f"--min-worker-port={base + PORTS_PER_NODE}", f"--max-worker-port={base + PORTS_PER_NODE + WORKER_PORTS - 1}",
                "--object-store-memory=200000000"]
        if index == 0:
            self.address = f"{self.ips[0]}:{base + 6}"
            args += ["--head", f"--port={base + 6}", f"--ray-client-server-port={base + 7}", "--include-dashboard=false"]
        else:
            args += [f"--address={self.address}"]
        log = open(self.temp / f"n{index}.log", "wb")  # noqa: SIM115 (kept open for the process)
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.temp,
                                start_new_session=True)

    def __enter__(self) -> "RayCluster":
        try:
            if self.hosts_wanted:
                self._make_hosts()
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
        """The alive nodes, as a driver on the head host sees them (agentrl's own reader, in a child process)."""
        import json

        done = subprocess.run([*self.prefix, sys.executable, "-m", "agentrl.verl.cluster", self.address],
                              capture_output=True, text=True, timeout=60, env=self.env)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
        return json.loads(done.stdout.strip().splitlines()[-1])

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
        for ns in self.namespaces:  # anything still in a namespace was started there by this cluster's nodes
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces = []
        shutil.rmtree(self.temp, ignore_errors=True)
