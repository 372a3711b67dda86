"""One memory cgroup per template: the memory of all the processes of a call counted together.

RLIMIT_AS bounds each process; a call that forks can still use `nproc` times `memory_mb`. The zygote
(root) makes a cgroup beside its own in the cgroup v1 memory hierarchy, the template moves itself in
before it locks down, and every child it forks is counted there. Before a call the zygote sets the
limit to what the template already holds plus the call's `memory_mb`; when a call's processes reach it
the kernel's OOM killer ends one of them, and the zygote tells that apart from other kills by the
cgroup's OOM-kill counter.

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
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass


class MemoryCgroup:
    def __init__(self, base: str, name: str) -> None:
        self.path = os.path.join(base, PREFIX + name)
        os.makedirs(self.path, exist_ok=True)
        self.limit: int | None = None
        self.baseline: int | None = None  # what the template itself holds, read once it has settled

    def _read(self, name: str) -> str:
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def enter(self) -> None:
        """Move the calling process in (the template, before it locks down)."""
        self._write("cgroup.procs", "0")

    def usage(self) -> int:
        return int(self._read("memory.usage_in_bytes"))

    def set_call_limit(self, memory_mb: int) -> None:
        if self.baseline is None:
            self.baseline = self.usage()
        limit = self.baseline + memory_mb * (1 << 20)
        if limit != self.limit:
            self._write("memory.limit_in_bytes", str(limit))
            self.limit = limit

    def pids(self) -> set[int]:
        """The processes in it now (exited ones may still be listed until reaped)."""
        return {int(x) for x in self._read("cgroup.procs").split()}

    def oom_kills(self) -> int:
        for line in self._read("memory.oom_control").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        try:
            os.rmdir(self.path)
        except OSError:
            pass  # still busy: the next zygote's sweep removes it
