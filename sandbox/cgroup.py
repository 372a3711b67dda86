"""Two memory cgroups per template: its own, and one inside it for its calls.

RLIMIT_AS bounds each process; a call that forks can still use `nproc` times `memory_mb`. The zygote
(root) makes a cgroup beside its own in the cgroup v1 memory hierarchy and puts the template there before
its first call, and a `call` cgroup inside it. Each child the template forks moves itself into `call`
first thing (through a descriptor of its `cgroup.procs` that the zygote opened and sends with each call),
so everything a call's processes charge (their pages, tmpfs and memfd pages they write, socket buffers) is
counted there and bounded by `memory_mb`; when it is reached the kernel's OOM killer chooses among the
call's processes only, never the template, whose memory the call's pages do not count against. The zygote
tells an OOM kill from other kills by the call cgroup's OOM-kill counter.

Only the v1 memory controller is supported (this is what the machines agentrl is developed on have);
elsewhere `find_base` says why not and the isolation report shows `cgroups: NO`.
"""

from __future__ import annotations

import os

PREFIX = "agentrl-sandbox-"


def find_base() -> tuple[str | None, str]:
    """The directory of this process's memory cgroup (v1), or None and the reason."""
    if os.geteuid() != 0:
        return None, "not root: cannot create cgroups"
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
        with open("/proc/self/mountinfo") as f:
            mounts = f.read().splitlines()
    except OSError as e:
        return None, f"cannot read /proc: {e}"
    rel = next((line.split(":", 2)[2] for line in lines if line.split(":")[1:2] and
                "memory" in line.split(":")[1].split(",")), None)
    if rel is None:
        return None, "no cgroup v1 memory controller (cgroup v2 is not supported yet)"
    for m in mounts:
        pre, _, post = m.partition(" - ")
        fields, super_fields = pre.split(), post.split()
        if len(super_fields) >= 3 and super_fields[0] == "cgroup" and "memory" in super_fields[2].split(","):
            root, mountpoint = fields[3], fields[4]
            sub = rel[len(root):] if rel.startswith(root) else rel
            base = os.path.normpath(mountpoint + "/" + sub.lstrip("/"))
            if os.access(base, os.W_OK) and os.path.exists(base + "/memory.limit_in_bytes"):
                return base, ""
            return None, f"{base} is not writable"
    return None, "the cgroup v1 memory controller is not mounted"


def sweep(base: str) -> None:
    """Remove cgroups left by zygotes that are gone (killed before they could clean up)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX):].split("-")[0]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            for path in (os.path.join(base, name, "call"), os.path.join(base, name)):
                try:
                    os.rmdir(path)
                except OSError:
                    pass


class MemoryCgroup:
    def __init__(self, base: str, name: str) -> None:
        self.path = os.path.join(base, PREFIX + name)
        self.call = os.path.join(self.path, "call")  # the calls' cgroup, inside the template's
        os.makedirs(self.call, exist_ok=True)
        self.limit: int | None = None
        self.baseline: int | None = None  # kept for callers that reset it; a call's cgroup starts empty
        self._procs: int | None = None

    def _read(self, name: str, where: str | None = None) -> str:
        with open(os.path.join(where or self.call, name)) as f:
            return f.read()

    def _write(self, name: str, value: str, where: str | None = None) -> None:
        with open(os.path.join(where or self.call, name), "w") as f:
            f.write(value)

    def place_template(self, pid: int) -> None:
        """Put the template in its own cgroup (not the calls'), before its first call."""
        self._write("cgroup.procs", str(pid), self.path)

    def procs_fd(self) -> int:
        """A descriptor of the calls' `cgroup.procs`, opened here (as root): a child writes "0" to it to
        move itself in. The same descriptor is sent with every call."""
        if self._procs is None:
            self._procs = os.open(os.path.join(self.call, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        return self._procs

    def usage(self) -> int:
        return int(self._read("memory.usage_in_bytes"))

    def set_call_limit(self, memory_mb: int) -> None:
        """`memory_mb` for everything the call's processes charge (pages they share with the template
        unchanged are charged to the template's cgroup)."""
        limit = memory_mb * (1 << 20)
        if limit != self.limit:
            self._write("memory.limit_in_bytes", str(limit))
            self.limit = limit

    def pids(self) -> set[int]:
        """The processes in it now, the template's and the calls' (exited ones may be listed until reaped)."""
        return {int(x) for where in (self.path, self.call) for x in self._read("cgroup.procs", where).split()}

    def oom_kills(self) -> int:
        for line in self._read("memory.oom_control").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        if self._procs is not None:
            os.close(self._procs)
            self._procs = None
        for path in (self.call, self.path):
            try:
                os.rmdir(path)
            except OSError:
                pass  # still busy: the next zygote's sweep removes it
