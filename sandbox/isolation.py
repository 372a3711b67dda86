"""What a sandbox worker (:mod:`.zygote`) does to itself before its first call, each measure noted in its
report as taken or not and why.

    z = Zygote("code", uid, network=False)
    enter(z)      # own mount/IPC/UTS/network namespaces (a network grader's only way out: the proxy),
                  # a pid namespace, Landlock, seccomp filters, per-slot uids, a memory cgroup base
    z.report      # {"mount_ns": [True, "private mount namespace: ..."], "landlock_fs": [...], ...}

Run once, in the zygote, privileged; the templates and calls it forks later inherit what it set up. Where a
measure cannot be had (not root, an older kernel) the report says so and the worker goes on without it.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

from . import cgroup, harden, seccomp
from . import template as template_mod
from .netproxy import start_proxy

if TYPE_CHECKING:
    from .zygote import Zygote


def enter(z: "Zygote") -> None:
    """Isolate the worker ``z`` and fill ``z.report``; sets ``z.off``, ``z.call_env``, ``z.pidns_fd``,
    ``z.pid_reset``, ``z.seccomp``/``z.child_seccomp`` and ``z.cg_base`` for the templates it starts."""
    is_root = os.geteuid() == 0
    z.off = harden.bench_off()
    # Network graders get a namespace of their own too; their only way out is the proxy (netproxy.py),
    # which stays in the host's namespace and refuses the host's own and private addresses.
    proxy = start_proxy(z.uid if is_root else None, close=z.host_fds) if z.network and is_root else None
    flags = harden.CLONE_NEWNS | harden.CLONE_NEWIPC | harden.CLONE_NEWUTS | harden.CLONE_NEWNET
    try:
        harden.unshare(flags)
        z.note("mount_ns", True, "private mount namespace: scratch on a size-capped tmpfs, home directories hidden")
        if proxy is not None:
            port = proxy.serve_inside()
            url = f"http://127.0.0.1:{port}"
            z.call_env = {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url}
            z.note("net_ns", True, f"own network namespace; the only way out is an HTTP(S) proxy ({url}) that "
                   "refuses the host's own, loopback and private addresses")
        else:
            z.note("net_ns", True, "empty network namespace (no interfaces up)")
        z.note("ipc_uts_ns", True, "private IPC and UTS namespaces")
        _no_time_wait(z)
        z.fs.noatime = "noatime" not in z.off
        z.fs.mount()
        z.note("noatime", z.fs.noatime, "every mount calls see records no access times: a read leaves no "
               "trace for a later call's stat()" if z.fs.noatime else "switched off (AGENTRL_SANDBOX_BENCH_OFF)")
    except OSError as e:
        if proxy is not None:
            os.kill(proxy.pid, signal.SIGKILL)
        for key in ("mount_ns", "net_ns", "ipc_uts_ns", "noatime"):
            z.note(key, False, f"{e} (needs root or CAP_SYS_ADMIN)")
    pidns_error = None
    try:
        z.pidns_fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        harden.unshare(harden.CLONE_NEWPID)
        harden.setns(z.pidns_fd, harden.CLONE_NEWPID)
        z.note("pid_ns", True, "calls run under a template that is pid 1 of its own pid namespace: it kills "
               "every process a call started before it reports")
    except OSError as e:
        z.pidns_fd = None
        pidns_error = e
    if z.pidns_fd is None or not is_root:
        z.note("pid_reset", False, "no pid namespace of its own: a call can learn how many processes earlier "
               "calls started from its own pid")
    else:
        z.pid_reset = "pid_reset" not in z.off and harden.has_capability(harden.CAP_CHECKPOINT_RESTORE)
        z.note("pid_reset", z.pid_reset, "each call starts at the same pid: its template rewinds its pid "
               "namespace's counter (ns_last_pid) before forking it" if z.pid_reset else
               "switched off (AGENTRL_SANDBOX_BENCH_OFF)" if "pid_reset" in z.off else
               "no CAP_CHECKPOINT_RESTORE: a call can learn how many processes earlier calls started")
    z.fs.abi = abi = harden.landlock_abi()
    z.note("landlock_fs", abi >= 1, f"Landlock ABI {abi}: read only the interpreter, libraries and "
           "declared paths; write only the scratch dir" if abi else "kernel has no Landlock")
    z.note("landlock_net", abi >= 4 and not z.network, f"Landlock ABI {abi} TCP bind/connect denied"
           if abi >= 4 and not z.network else "not applied (network requested or ABI < 4)")
    z.note("landlock_scope", abi >= 6, "signals and abstract unix sockets scoped to the sandbox"
           if abi >= 6 else f"needs Landlock ABI 6, have {abi}")
    if harden.X86_64:  # the C loop waits without a pidfd: its template's own filter denies pidfd_open
        z.seccomp, z.child_seccomp = seccomp.filters(network=z.network, off=z.off, note=z.note,
                                                     c_loop=template_mod.fast_path() == "C")
    else:
        z.note("seccomp", False, "filter only written for x86_64")
    z.note("uid_drop", is_root, f"per-slot uids, no supplementary groups, no capabilities: calls run as "
           f"{z.call_uid}, their template as {z.uid}" if is_root else
           "not root: cannot switch to a per-slot uid (RLIMIT_NPROC shared with the host user)")
    z.note("rlimits", True, "CPU, address space, file size, processes, open files, core=0")
    z.cg_base, why = cgroup.find_base()
    if z.cg_base is not None:
        cgroup.sweep(z.cg_base)
    z.note("cgroups", z.cg_base is not None, "a memory cgroup (v1) per template: all of a call's processes "
           "together get memory_mb (RLIMIT_AS bounds each one too)" if z.cg_base is not None else
           f"not used ({why}): RLIMIT_AS bounds each process, so a call with n processes can use n x memory_mb")
    if pidns_error is not None:
        how = ("killed by the template's memory cgroup" if z.cg_base is not None else
               f"killed by the slot uid ({z.call_uid})" if is_root else
               "NOT killed if they leave the call's process group (setsid)")
        z.note("pid_ns", False, f"{pidns_error}; processes a call leaves running are {how} after it ends")
    loop = template_mod.fast_path()
    z.note("fork_loop", True, "per-call loop of the templates in C (_forkserver)" if loop == "C" else
           "per-call loop of the templates in Python (the _forkserver extension is not built or is "
           "switched off by AGENTRL_SANDBOX_FORKSERVER=python): same isolation, fewer calls per second")
    z.note("env_empty", True, "child environment holds only the declared variables (+HOME/TMPDIR=scratch)")
    if z.off:
        z.note("bench_off", False, "measures switched off by AGENTRL_SANDBOX_BENCH_OFF (for benchmarks only): "
               + ", ".join(z.off))


def _no_time_wait(z: "Zygote") -> None:
    """In this worker's fresh network namespace: keep no TCP connection in TIME_WAIT (or an orphaned
    FIN_WAIT2) after it closes. Such a port outlives the call that used it, and a later call probing ports
    with bind() would read which ones an earlier call connected from."""
    if "time_wait" in z.off:
        z.note("time_wait", False, "switched off (AGENTRL_SANDBOX_BENCH_OFF)")
        return
    try:
        with open("/proc/sys/net/ipv4/tcp_max_tw_buckets", "w") as f:
            f.write("0")
        z.note("time_wait", True, "tcp_max_tw_buckets=0 in the worker's network namespace: no closed "
               "connection keeps its port for a later call to find")
    except OSError as e:
        z.note("time_wait", not z.network, f"cannot set tcp_max_tw_buckets: {e}" +
               ("" if z.network else " (no TCP here anyway)"))
