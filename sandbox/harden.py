"""Linux isolation primitives, by plain syscalls through ctypes (no extra packages).

Namespaces (unshare/setns/mount), Landlock (filesystem, TCP and signal scoping), rlimits and the uid
drop (the seccomp-BPF filters are in seccomp.py). Each function raises OSError with the syscall name
when the kernel refuses, so the zygote can report exactly what it could not achieve.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import socket
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP = 0x10000000, 0x20000000, 0x40000000, 0x02000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 8192, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_GET_SECCOMP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS = 1, 21, 22, 38, 39
PR_SET_DUMPABLE = 4

X86_64 = platform.machine() == "x86_64"
_NR = {"landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446, "setns": 308}


def _check(rc: int, what: str) -> int:
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return rc


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), "setns")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


MNT_DETACH = 2


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def loopback_up() -> None:
    """Bring up `lo` in this (new) network namespace."""
    import fcntl
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack_from("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0)))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    return _check(_libc.prctl(option, arg2, arg3, 0, 0), f"prctl {option}")


# ---------------------------------------------------------------- Landlock
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_ALL_FS_V1 = (1 << 13) - 1            # execute .. make_sym
LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
LL_FILE_ONLY = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV
LL_NET_BIND, LL_NET_CONNECT = 1, 2
LL_SCOPE_ABSTRACT_UNIX, LL_SCOPE_SIGNAL = 1, 2


def landlock_abi() -> int:
    if not X86_64:
        return 0
    rc = _libc.syscall(_NR["landlock_create_ruleset"], None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(rc), 0)


def landlock_handled_fs(abi: int) -> int:
    fs = LL_ALL_FS_V1
    if abi >= 2:
        fs |= LL_REFER
    if abi >= 3:
        fs |= LL_TRUNCATE
    if abi >= 5:
        fs |= LL_IOCTL_DEV
    return fs


def landlock_ruleset(read: list[str], write: list[str], *, deny_tcp: bool, abi: int) -> int:
    """Build a ruleset fd: read-only beneath `read`, full access beneath `write`, nothing else.

    The fd is kept by the zygote and applied in each forked child with landlock_restrict(fd).
    """
    fs = landlock_handled_fs(abi)
    net = (LL_NET_BIND | LL_NET_CONNECT) if (deny_tcp and abi >= 4) else 0
    scoped = (LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("<QQQ", fs, net, scoped) if abi >= 4 else struct.pack("<Q", fs)
    if abi >= 4 and abi < 6:
        attr = struct.pack("<QQ", fs, net)
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _check(_libc.syscall(_NR["landlock_create_ruleset"], buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)),
                     "landlock_create_ruleset")
    read_rights = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
    for paths, rights in ((read, read_rights), (write, fs)):
        for path in paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a declared path that does not exist grants nothing
            try:
                allowed = rights
                if not os.path.isdir(path):
                    allowed &= LL_FILE_ONLY
                rule = ctypes.create_string_buffer(struct.pack("<Qi", allowed & fs, fd), 12)
                _check(_libc.syscall(_NR["landlock_add_rule"], ctypes.c_int(ruleset), ctypes.c_int(1), rule,
                                     ctypes.c_uint32(0)), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
    return ruleset


def landlock_restrict(ruleset_fd: int) -> None:
    _check(_libc.syscall(_NR["landlock_restrict_self"], ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)),
           "landlock_restrict_self")


# Measures that a benchmark may switch off one at a time (AGENTRL_SANDBOX_BENCH_OFF); the isolation report
# then says the sandbox is weak.
MEASURES = ("page_cache", "locks", "noatime", "pid_reset", "time_wait", "counters", "call_cgroup")


def bench_off() -> tuple[str, ...]:
    """Measures named in AGENTRL_SANDBOX_BENCH_OFF (benchmarks/bench_sandbox.py switches them off one at a time
    to measure what each costs). Unknown names stop the worker: a typo must not look like a measurement."""
    names = tuple(n.strip() for n in os.environ.get("AGENTRL_SANDBOX_BENCH_OFF", "").split(",") if n.strip())
    unknown = [n for n in names if n not in MEASURES]
    if unknown:
        raise ValueError(f"AGENTRL_SANDBOX_BENCH_OFF names unknown measures {unknown}; known: {', '.join(MEASURES)}")
    return names


# ---------------------------------------------------------------- rlimits and credentials
def vm_size() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def set_limits(*, cpu_s: int, address_space: int, fsize: int, nproc: int, nofile: int = 256) -> None:
    for res, value in ((resource.RLIMIT_CPU, cpu_s), (resource.RLIMIT_AS, address_space),
                       (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_NPROC, nproc),
                       (resource.RLIMIT_NOFILE, nofile), (resource.RLIMIT_CORE, 0),
                       (resource.RLIMIT_MEMLOCK, 0), (resource.RLIMIT_MSGQUEUE, 0)):
        resource.setrlimit(res, (value, value))


def drop_privileges(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


CAP_KILL, CAP_SETGID, CAP_SETUID, PR_SET_KEEPCAPS, _NR_CAPSET = 5, 6, 7, 8, 126
CALL_UID_OFFSET = 100  # a worker's calls run under its template's uid + this: the template is out of their reach


def capset(mask: int) -> None:
    """Set this process's effective and permitted capabilities to `mask` (inheritable none)."""
    header = ctypes.create_string_buffer(struct.pack("<Ii", 0x20080522, 0), 8)  # _LINUX_CAPABILITY_VERSION_3
    lo, hi = mask & 0xFFFFFFFF, mask >> 32
    data = ctypes.create_string_buffer(struct.pack("<6I", lo, lo, 0, hi, hi, 0), 24)
    _check(_libc.syscall(_NR_CAPSET, header, data), "capset")


CAP_CHECKPOINT_RESTORE = 40  # Linux >= 5.9: enough to set the next pid of a pid namespace (ns_last_pid)


def has_capability(cap: int) -> bool:
    """Whether this process has `cap` in its effective set."""
    with open("/proc/self/status") as f:
        eff = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    return bool(eff >> cap & 1)


def drop_to_uid_keeping_setuid(uid: int, *, pid_reset: bool = False) -> None:
    """Become `uid` with only CAP_SETUID, CAP_SETGID and CAP_KILL left: a template, so that each of its
    children can move to the calls' uid (and then drop all three) and the template can still kill them.
    `pid_reset`: keep CAP_CHECKPOINT_RESTORE too, to rewind its pid namespace's counter before each call."""
    prctl(PR_SET_KEEPCAPS, 1)
    drop_privileges(uid)
    capset((1 << CAP_SETUID) | (1 << CAP_SETGID) | (1 << CAP_KILL) | (pid_reset << CAP_CHECKPOINT_RESTORE))
    prctl(PR_SET_KEEPCAPS, 0)


MOUNT_ATTR_NOATIME, MOUNT_ATTR__ATIME, AT_RECURSIVE, _NR_MOUNT_SETATTR = 0x10, 0x70, 0x8000, 442
MOUNT_ATTR_RDONLY = 0x1


def noatime_all(root: str = "/") -> None:
    """Every mount at or below `root` in this mount namespace stops recording access times (Linux >= 5.12):
    a read by one call leaves no trace that a later call could read with stat()."""
    attr = ctypes.create_string_buffer(struct.pack("<QQQQ", MOUNT_ATTR_NOATIME, MOUNT_ATTR__ATIME, 0, 0), 32)
    _check(_libc.syscall(_NR_MOUNT_SETATTR, ctypes.c_int(-100), root.encode(), ctypes.c_uint(AT_RECURSIVE), attr,
                         ctypes.c_size_t(32)), "mount_setattr(MOUNT_ATTR_NOATIME)")


def readonly_tree(root: str) -> None:
    """Bind `root` onto itself with its submounts and make them all read-only (Linux >= 5.12). Device nodes
    stay usable (a read-only mount does not stop writing to /dev/null), but no process can change their
    inodes: `utimensat(NULL)`, which needs only write permission, fails with EROFS."""
    mount(root, root, None, MS_BIND | MS_REC)
    attr = ctypes.create_string_buffer(struct.pack("<QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0), 32)
    _check(_libc.syscall(_NR_MOUNT_SETATTR, ctypes.c_int(-100), root.encode(), ctypes.c_uint(AT_RECURSIVE), attr,
                         ctypes.c_size_t(32)), "mount_setattr(MOUNT_ATTR_RDONLY)")


def become_call_uid(uid: int) -> None:
    """In a template's child: the calls' uid, no capabilities at all."""
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    capset(0)


# ---------------------------------------------------------------- memory layout
MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25
HUGE = 2 << 20


def collapse_to_huge_pages(maps: str) -> int:
    """Back the private anonymous regions listed in `maps` (the text of /proc/self/maps) with 2 MiB pages
    where whole aligned 2 MiB windows fit; returns the bytes collapsed. A fork then copies one page-table
    entry per 2 MiB instead of 512, and an exit frees them as fast: measured on this VM, fork+exit of a
    process with 32 MiB of heap fell from 1.9 to 0.35 ms of CPU. Needs Linux >= 6.1 (MADV_COLLAPSE);
    elsewhere nothing happens."""
    done = 0
    for line in maps.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[1][:2] != "rw" or parts[1][3] != "p":
            continue
        if len(parts) > 5 and parts[5] != "[heap]":
            continue  # file-backed (a library's data) or a special mapping ([stack], [vvar])
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        start, end = (lo + HUGE - 1) // HUGE * HUGE, hi // HUGE * HUGE
        if end <= start:
            continue
        _libc.madvise(start, end - start, MADV_HUGEPAGE)
        if _libc.madvise(start, end - start, MADV_COLLAPSE) == 0:
            done += end - start
    return done


def fork_with_socket(child, close: tuple[int, ...] = ()) -> tuple[int, socket.socket]:
    """Fork a helper process joined to this one by a SEQPACKET socket pair: ``child(sock)`` runs in it with
    ``close`` (descriptors it must not hold) closed, and it exits when ``child`` returns or raises. Returns
    the child's pid and this side's socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            for fd in close:
                os.close(fd)
            child(theirs)
        finally:
            os._exit(0)
    theirs.close()
    return pid, ours
