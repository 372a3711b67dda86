"""Linux isolation primitives, by plain syscalls through ctypes (no extra packages).

Namespaces (unshare/setns/mount), Landlock (filesystem, TCP and signal scoping), a seccomp-BPF
deny filter, rlimits and the uid drop. Each function raises OSError with the syscall name when the
kernel refuses, so the zygote can report exactly what it could not achieve.
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


# ---------------------------------------------------------------- seccomp
_AUDIT_ARCH_X86_64 = 0xC000003E
_RET_ALLOW, _RET_KILL, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET, _AND = 0x20, 0x15, 0x35, 0x45, 0x06, 0x54
# x86_64 numbers of syscalls untrusted Python never needs: kernel attack surface, namespaces, tracing.
DENIED_SYSCALLS = {
    "ptrace": 101, "syslog": 103, "personality": 135, "uselib": 134, "vhangup": 153, "pivot_root": 155,
    "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166,
    "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172,
    "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179, "lookup_dcookie": 212,
    "clock_settime": 227, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "clock_adjtime": 305, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_getfd": 438, "mount_setattr": 442,
    # System V IPC and POSIX message queues: objects that would outlive the call in the worker's IPC
    # namespace, where the next call could read them.
    "shmget": 29, "shmat": 30, "shmctl": 31, "semget": 64, "semop": 65, "semctl": 66, "shmdt": 67,
    "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semtimedop": 220, "mq_open": 240,
    "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
    # Acting on another process: signals through a pidfd, its memory advice.
    "pidfd_send_signal": 424, "process_madvise": 440,
}
# Kernel state shared by every process on the machine that a call could set and a later (or concurrent) call
# read back without any file of its own. Page cache: which pages of a readable file are cached is set by
# reading and evicted with fadvise(DONTNEED) or madvise(MADV_COLD/MADV_PAGEOUT), and read without timing
# by mincore(), cachestat(), readahead() and reads flagged RWF_NOWAIT (preadv2, or AIO). What is left is
# timing a read, and a page once brought in cannot be evicted again from inside (sandbox/README.md).
PAGE_CACHE_SYSCALLS = {"fadvise64": 221, "readahead": 187, "mincore": 27, "cachestat": 451, "io_setup": 206,
                       "io_submit": 209}
# Watching a shared inode: inotify, fanotify (and fcntl(F_NOTIFY) below) report when another process, such as
# a concurrent call, opens or reads a file or directory that both can read.
NOTIFY_SYSCALLS = {"inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254, "fanotify_init": 300,
                   "fanotify_mark": 301}
# Machine-wide figures and counters a call could read, or advance for another call to read: sysinfo()
# (free and shared RAM move with another test's tmpfs pages), the socket cookie counter (getsockopt
# SO_COOKIE); the pidfs inode counter is read through a pidfd: clone's CLONE_PIDFD is denied, and pidfd_open
# (CHILD_ONLY_SYSCALLS) by the template's filter where its loop is the C one, which waits on its child through
# a SIGCHLD signalfd; the Python loop waits on a pidfd, so there each child adds child_seccomp_program (a
# filter installed per call costs its JIT compile, a few hundred microseconds on a loaded VM).
COUNTER_SYSCALLS = {"sysinfo": 99}
_NR_GETSOCKOPT, _NR_SETSOCKOPT, CLONE_PIDFD = 55, 54, 0x1000
# (level, optname) refused: SOL_SOCKET/SO_COOKIE reads the counter; SO_PEERPIDFD (get) and SO_PASSPIDFD (set)
# hand out pidfds of a unix socket's peer; SOL_IPV6/IPV6_FLOWLABEL_MGR leases flow labels, state of the
# worker's network namespace (which outlives calls) that a later call finds by EEXIST.
DENIED_GETSOCKOPTS = ((1, 57), (1, 77), (41, 32))
DENIED_SETSOCKOPTS = ((1, 76), (41, 32))
CHILD_ONLY_SYSCALLS = {"pidfd_open": 434}
# Futexes not flagged FUTEX_PRIVATE_FLAG on a page of a file mapping are keyed by (inode, offset): two
# concurrent tests that map the same library could meet on one. Every operation that wakes or requeues
# another waiter is refused unless private (EINVAL, which glibc's wrappers take as "nothing to wake");
# the futex2 calls that wake are refused whole (glibc does not use them).
_NR_FUTEX, _FUTEX_PRIVATE, _FUTEX_CMD_MASK = 202, 128, 0x7F
_FUTEX_WAKERS = (1, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13)  # WAKE, REQUEUE, CMP_REQUEUE, WAKE_OP, *_PI, WAKE_BITSET
FUTEX2_WAKERS = {"futex_wake": 454, "futex_requeue": 456}
MADV_COLD, MADV_PAGEOUT, RWF_NOWAIT = 20, 21, 8
_NR_FLOCK, _NR_FCNTL, _NR_MADVISE, _NR_PREADV2, _NR_PWRITEV2 = 73, 72, 28, 327, 328
# fcntl commands that take a lock (POSIX record locks and open-file-description locks) and dnotify.
_F_SETLK, _F_SETLKW, _F_OFD_SETLK, _F_OFD_SETLKW, _F_NOTIFY = 6, 7, 37, 38, 1026
# Measures that a benchmark may switch off one at a time (AGENTRL_SANDBOX_BENCH_OFF); the isolation report
# then says the sandbox is weak.
MEASURES = ("page_cache", "locks", "noatime", "pid_reset", "time_wait", "counters", "call_cgroup")

# Syscalls that act on the process named by an argument: allowed only on the caller itself (all of the
# listed arguments 0), so a call cannot change its template's (or a sibling's) limits, priority, CPU set,
# scheduling or pages. `setpriority(PRIO_USER, 0)` would reach every process of the uid: it needs which=0 too.
SELF_ONLY_SYSCALLS = {
    "setpriority": (141, (0, 1)), "sched_setparam": (142, (0,)), "sched_setscheduler": (144, (0,)),
    "sched_setaffinity": (203, (0,)), "ioprio_set": (251, (0, 1)), "migrate_pages": (256, (0,)),
    "move_pages": (279, (0,)), "prlimit64": (302, (0,)), "sched_setattr": (314, (0,)),
}
_NR_CLONE, _NR_CLONE3, _NR_SOCKET, _NR_CONNECT, _NR_SENDTO = 56, 435, 41, 42, 44
_NS_FLAGS = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP
_ALLOWED_SOCKET_FAMILIES = (1, 2, 10)  # AF_UNIX, AF_INET, AF_INET6 (the network namespace has no route out)


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _arg_block(nr: int, arg: int, cases: list[tuple[int, int]], *, mask: bool = False) -> list[bytes]:
    """For syscall `nr`: load the low word of argument `arg`, return the action of the first case whose
    value it equals (with `mask`: has any of its bits set), else allow. Every path ends in a return."""
    body = [_insn(_LD_W_ABS, 0, 0, 16 + 8 * arg)]
    for value, action in cases:
        body += [_insn(_JSET if mask else _JEQ, 0, 1, value), _insn(_RET, 0, 0, action)]
    body += [_insn(_RET, 0, 0, _RET_ALLOW)]
    return [_insn(_JEQ, 0, len(body), nr)] + body


def _sockopt_block(nr: int, pairs, action: int) -> list[bytes]:
    """For getsockopt/setsockopt `nr`: `action` when (level, optname) (arguments 1, 2) is one of `pairs`."""
    body = []
    for level, name in pairs:  # each pair: 4 instructions; a miss goes on to the next pair
        body += [_insn(_LD_W_ABS, 0, 0, 32), _insn(_JEQ, 0, 2, name), _insn(_LD_W_ABS, 0, 0, 24),
                 _insn(_JEQ, 4 * (len(pairs) - len(body) // 4 - 1) + 1, 0, level)]
    body += [_insn(_RET, 0, 0, _RET_ALLOW), _insn(_RET, 0, 0, action)]
    return [_insn(_JEQ, 0, len(body), nr)] + body


def seccomp_program(deny_connect: bool = True, *, off: tuple[str, ...] = (), deny_pidfd_open: bool = False) -> bytes:
    """A deny-list filter: EPERM for DENIED_SYSCALLS, clone with namespace flags and exotic socket
    families; ENOSYS for clone3 (glibc falls back to clone, whose flags we can inspect); kill on a
    foreign architecture or x32 numbers. Without network, also EPERM for connect() and for sendto()
    with an address: Landlock before ABI 8 does not stop connecting to a pathname unix socket
    (a Ray raylet, dbus), and socketpair()/send() on connected pairs keep working.

    Against state shared between calls (`off` names measures a benchmark switched off): EPERM for
    PAGE_CACHE_SYSCALLS, madvise(MADV_COLD/MADV_PAGEOUT) and RWF_NOWAIT reads and writes; EPERM for
    NOTIFY_SYSCALLS and fcntl(F_NOTIFY); and locks (flock, fcntl F_SETLK/F_SETLKW/F_OFD_SETLK/F_OFD_SETLKW)
    succeed without locking anything, so no sandboxed process ever holds a lock that another could see
    (F_GETLK keeps working and reports none). A call's own processes get no mutual exclusion from locks.
    Machine-wide counters and figures ("counters"): EPERM for sysinfo, the futex2 wakes, the socket options
    of DENIED_GETSOCKOPTS / DENIED_SETSOCKOPTS, clone with CLONE_PIDFD and (`deny_pidfd_open`) pidfd_open;
    EINVAL for a waking futex operation without FUTEX_PRIVATE_FLAG."""
    eperm, enosys, granted = _RET_ERRNO | 1, _RET_ERRNO | 38, _RET_ERRNO | 0
    p = [_insn(_LD_W_ABS, 0, 0, 4), _insn(_JEQ, 1, 0, _AUDIT_ARCH_X86_64), _insn(_RET, 0, 0, _RET_KILL),
         _insn(_LD_W_ABS, 0, 0, 0), _insn(_JGE, 0, 1, 0x40000000), _insn(_RET, 0, 0, _RET_KILL)]
    denied = dict(DENIED_SYSCALLS)
    if "page_cache" not in off:
        denied.update(PAGE_CACHE_SYSCALLS)
    if "locks" not in off:
        denied.update(NOTIFY_SYSCALLS)
    if "counters" not in off:
        denied.update(COUNTER_SYSCALLS)
        denied.update(FUTEX2_WAKERS)
        if deny_pidfd_open:  # a template whose loop waits without a pidfd (the C loop: a SIGCHLD signalfd)
            denied.update(CHILD_ONLY_SYSCALLS)
    # read, write, close, mmap, brk, ioctl, pread64...: numbers below the first one a rule names are allowed
    # at once, so the commonest calls skip the list.
    ruled = [*denied.values(), *PAGE_CACHE_SYSCALLS.values(), *(nr for nr, _ in SELF_ONLY_SYSCALLS.values()),
             _NR_MADVISE, _NR_PREADV2, _NR_PWRITEV2, _NR_FLOCK, _NR_FCNTL, _NR_CLONE3, _NR_CONNECT, _NR_SENDTO,
             _NR_CLONE, _NR_SOCKET, _NR_GETSOCKOPT, _NR_SETSOCKOPT, _NR_FUTEX]
    p += [_insn(_JGE, 1, 0, min(ruled)), _insn(_RET, 0, 0, _RET_ALLOW)]
    for nr in sorted(denied.values()):
        p += [_insn(_JEQ, 0, 1, nr), _insn(_RET, 0, 0, eperm)]
    if "page_cache" not in off:
        p += _arg_block(_NR_MADVISE, 2, [(MADV_COLD, eperm), (MADV_PAGEOUT, eperm)])
        for nr in (_NR_PREADV2, _NR_PWRITEV2):  # flags: argument 5
            p += _arg_block(nr, 5, [(RWF_NOWAIT, eperm)], mask=True)
    if "locks" not in off:
        p += [_insn(_JEQ, 0, 1, _NR_FLOCK), _insn(_RET, 0, 0, granted)]
        p += _arg_block(_NR_FCNTL, 1, [(_F_SETLK, granted), (_F_SETLKW, granted), (_F_OFD_SETLK, granted),
                                       (_F_OFD_SETLKW, granted), (_F_NOTIFY, eperm)])
    if "counters" not in off:
        einval = _RET_ERRNO | 22
        for nr, pairs in ((_NR_GETSOCKOPT, DENIED_GETSOCKOPTS), (_NR_SETSOCKOPT, DENIED_SETSOCKOPTS)):
            p += _sockopt_block(nr, pairs, eperm)
        # futex(uaddr, op, ...): a shared (not FUTEX_PRIVATE_FLAG) waking op -> EINVAL
        wakers = len(_FUTEX_WAKERS)
        p += [_insn(_JEQ, 0, wakers + 5, _NR_FUTEX), _insn(_LD_W_ABS, 0, 0, 24),
              _insn(_JSET, wakers + 1, 0, _FUTEX_PRIVATE), _insn(_AND, 0, 0, _FUTEX_CMD_MASK)]
        p += [_insn(_JEQ, wakers - i, 0, op) for i, op in enumerate(_FUTEX_WAKERS)]
        p += [_insn(_RET, 0, 0, _RET_ALLOW), _insn(_RET, 0, 0, einval)]
    p += [_insn(_JEQ, 0, 1, _NR_CLONE3), _insn(_RET, 0, 0, enosys)]
    if deny_connect:
        p += [_insn(_JEQ, 0, 1, _NR_CONNECT), _insn(_RET, 0, 0, eperm)]
        # sendto: args[4] (dest_addr) at offset 48 (low) / 52 (high); non-NULL -> EPERM
        p += [_insn(_JEQ, 0, 6, _NR_SENDTO), _insn(_LD_W_ABS, 0, 0, 48), _insn(_JEQ, 0, 2, 0),
              _insn(_LD_W_ABS, 0, 0, 52), _insn(_JEQ, 1, 0, 0), _insn(_RET, 0, 0, eperm), _insn(_RET, 0, 0, _RET_ALLOW)]
    for nr, args in sorted(SELF_ONLY_SYSCALLS.values()):
        n = len(args)
        block = []
        for k, a in enumerate(args):  # each argument word must be 0, else EPERM (the last instruction)
            block += [_insn(_LD_W_ABS, 0, 0, 16 + 8 * a), _insn(_JEQ, 0, 4 * n - 4 * k - 1, 0),
                      _insn(_LD_W_ABS, 0, 0, 20 + 8 * a), _insn(_JEQ, 0, 4 * n - 4 * k - 3, 0)]
        block += [_insn(_RET, 0, 0, _RET_ALLOW), _insn(_RET, 0, 0, eperm)]
        p += [_insn(_JEQ, 0, len(block), nr)] + block
    # clone: args[0] (flags) low word at offset 16; CLONE_PIDFD too, which would hand out a pidfd
    clone_denied = _NS_FLAGS | (0 if "counters" in off else CLONE_PIDFD)
    p += [_insn(_JEQ, 0, 4, _NR_CLONE), _insn(_LD_W_ABS, 0, 0, 16), _insn(_JSET, 0, 1, clone_denied),
          _insn(_RET, 0, 0, eperm), _insn(_RET, 0, 0, _RET_ALLOW)]
    # socket: args[0] (family)
    n = len(_ALLOWED_SOCKET_FAMILIES)
    p += [_insn(_JEQ, 0, n + 2, _NR_SOCKET), _insn(_LD_W_ABS, 0, 0, 16)]
    for i, fam in enumerate(_ALLOWED_SOCKET_FAMILIES):
        p += [_insn(_JEQ, n - i, 0, fam)]
    p += [_insn(_RET, 0, 0, _RET_ERRNO | 97)]  # EAFNOSUPPORT
    p += [_insn(_RET, 0, 0, _RET_ALLOW)]
    return b"".join(p)


def child_seccomp_program() -> bytes:
    """The filter each call's child adds to the template's: EPERM for CHILD_ONLY_SYSCALLS (what the
    template itself needs). Stacked filters all run; the architecture was checked by the first."""
    eperm = _RET_ERRNO | 1
    p = [_insn(_LD_W_ABS, 0, 0, 0)]
    for nr in CHILD_ONLY_SYSCALLS.values():
        p += [_insn(_JEQ, 0, 1, nr), _insn(_RET, 0, 0, eperm)]
    return b"".join(p + [_insn(_RET, 0, 0, _RET_ALLOW)])


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp_install(program: bytes) -> None:
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(PR_SET_SECCOMP, 2, ctypes.addressof(prog), 0, 0), "prctl(PR_SET_SECCOMP)")


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
