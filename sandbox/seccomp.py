"""The seccomp-BPF filters that templates and calls run under, written as raw BPF (no extra packages).

    prog = seccomp.seccomp_program(deny_connect=True, deny_pidfd_open=True)  # a template's filter
    seccomp.seccomp_install(prog)       # in the template, after no_new_privs; every child inherits it
    seccomp.seccomp_install(seccomp.child_seccomp_program())   # stacked in a call's child (Python loop)

A deny list: syscalls untrusted Python never needs (kernel attack surface, namespaces, tracing, System V
IPC), and the rules against kernel state shared between calls (page-cache probes, locks and watches on
shared inodes, machine-wide counters and figures, shared futex wakes); sandbox/README.md says what each
closes. x86_64 only: elsewhere the zygote reports seccomp as missing.
"""

from __future__ import annotations

import ctypes
import struct

from .harden import (CLONE_NEWCGROUP, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER,
                     CLONE_NEWUTS, PR_SET_SECCOMP, _check, _libc)

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
# Mount ids: each call's scratch tmpfs is mounted afresh, and the kernel numbers mounts machine-wide (the
# 64-bit unique id from one counter; the short id from one shared allocator, lowest free first), so a call
# reading its scratch's id learns how many mounts every other sandbox made since: statx with
# STATX_MNT_ID/STATX_MNT_ID_UNIQUE is refused, and listmount/statmount, which list the same ids.
COUNTER_SYSCALLS = {"sysinfo": 99, "statmount": 457, "listmount": 458}
_NR_STATX, STATX_MNT_IDS = 332, 0x1000 | 0x4000
_NR_GETSOCKOPT, _NR_SETSOCKOPT, CLONE_PIDFD = 55, 54, 0x1000
# (level, optname) refused: SOL_SOCKET/SO_COOKIE reads the counter; SO_PEERPIDFD (get) and SO_PASSPIDFD (set)
# hand out pidfds of a unix socket's peer; SOL_IPV6/IPV6_FLOWLABEL_MGR leases flow labels, state of the
# worker's network namespace (which outlives calls) that a later call finds by EEXIST.
DENIED_GETSOCKOPTS = ((1, 57), (1, 77), (41, 32))
DENIED_SETSOCKOPTS = ((1, 76), (41, 32))
CHILD_ONLY_SYSCALLS = {"pidfd_open": 434}
# Futexes not flagged FUTEX_PRIVATE_FLAG on a page of a file mapping are keyed by (inode, offset): two
# concurrent tests that map the same library could meet on one. No call may queue a shared waiter: a shared
# FUTEX_WAIT or FUTEX_WAIT_BITSET returns EAGAIN at once ("the value changed": glibc's callers, pthread_join
# among them, look again), so the wakes no rule can refuse (the kernel's own, of a thread's clear_child_tid
# address and of robust lists, at exit) find no one in another call. Every other shared operation is refused
# (EINVAL, which glibc's wake wrappers take as "nothing to wake"); the futex2 calls are refused whole (their
# flags of futex_waitv lie in memory; glibc does not use them).
_NR_FUTEX, _FUTEX_PRIVATE, _FUTEX_CMD_MASK = 202, 128, 0x7F
_FUTEX_WAITS = (0, 9)  # FUTEX_WAIT, FUTEX_WAIT_BITSET
FUTEX2_SYSCALLS = {"futex_waitv": 449, "futex_wake": 454, "futex_wait": 455, "futex_requeue": 456}
MADV_COLD, MADV_PAGEOUT, RWF_NOWAIT = 20, 21, 8
_NR_FLOCK, _NR_FCNTL, _NR_MADVISE, _NR_PREADV2, _NR_PWRITEV2 = 73, 72, 28, 327, 328
# fcntl commands that take a lock (POSIX record locks and open-file-description locks) and dnotify.
_F_SETLK, _F_SETLKW, _F_OFD_SETLK, _F_OFD_SETLKW, _F_NOTIFY = 6, 7, 37, 38, 1026

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
    Machine-wide counters and figures ("counters"): EPERM for sysinfo, listmount, statmount, statx asking
    for a mount id, the futex2 calls, the socket options
    of DENIED_GETSOCKOPTS / DENIED_SETSOCKOPTS, clone with CLONE_PIDFD and (`deny_pidfd_open`) pidfd_open;
    for a futex operation without FUTEX_PRIVATE_FLAG, EAGAIN if it waits, EINVAL otherwise."""
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
        denied.update(FUTEX2_SYSCALLS)
        if deny_pidfd_open:  # a template whose loop waits without a pidfd (the C loop: a SIGCHLD signalfd)
            denied.update(CHILD_ONLY_SYSCALLS)
    # read, write, close, mmap, brk, ioctl, pread64...: numbers below the first one a rule names are allowed
    # at once, so the commonest calls skip the list.
    ruled = [*denied.values(), *PAGE_CACHE_SYSCALLS.values(), *(nr for nr, _ in SELF_ONLY_SYSCALLS.values()),
             _NR_MADVISE, _NR_PREADV2, _NR_PWRITEV2, _NR_FLOCK, _NR_FCNTL, _NR_CLONE3, _NR_CONNECT, _NR_SENDTO,
             _NR_CLONE, _NR_SOCKET, _NR_GETSOCKOPT, _NR_SETSOCKOPT, _NR_FUTEX, _NR_STATX]
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
        p += _arg_block(_NR_STATX, 3, [(STATX_MNT_IDS, eperm)], mask=True)  # statx(dirfd, path, flags, mask, buf)
        # futex(uaddr, op, ...): private -> allow; a shared wait -> EAGAIN; any other shared op -> EINVAL
        eagain = _RET_ERRNO | 11
        p += [_insn(_JEQ, 0, 8, _NR_FUTEX), _insn(_LD_W_ABS, 0, 0, 24), _insn(_JSET, 5, 0, _FUTEX_PRIVATE),
              _insn(_AND, 0, 0, _FUTEX_CMD_MASK), _insn(_JEQ, 2, 0, _FUTEX_WAITS[0]), _insn(_JEQ, 1, 0, _FUTEX_WAITS[1]),
              _insn(_RET, 0, 0, einval), _insn(_RET, 0, 0, eagain), _insn(_RET, 0, 0, _RET_ALLOW)]
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



def filters(*, network: bool, off: tuple[str, ...], c_loop: bool, note) -> tuple[bytes, bytes]:
    """A worker's filters: (its templates' filter, the one each call's child stacks on it, or b"" for none),
    with what they close written to the isolation report through `note(key, ok, reason)`. `c_loop`: the
    templates' loop is the C one, which waits on its child without a pidfd, so their own filter can deny
    pidfd_open; the Python loop's children deny it themselves."""
    program = seccomp_program(deny_connect=not network, off=off, deny_pidfd_open=c_loop)
    child = b"" if "counters" in off or c_loop else child_seccomp_program()
    switched_off = "switched off (AGENTRL_SANDBOX_BENCH_OFF)"
    note("counters", "counters" not in off, "machine-wide counters and figures unreadable: sysinfo, "
         "getsockopt(SO_COOKIE), pidfd_open, CLONE_PIDFD, mount ids (statx, listmount, statmount) and IPv6 "
         "flow label leases denied; no shared futex "
         "can be waited on or woken" if "counters" not in off else switched_off)
    note("page_cache", "page_cache" not in off, "page-cache residency can be neither probed (mincore, cachestat, "
         "RWF_NOWAIT, readahead) nor evicted (fadvise, MADV_COLD/PAGEOUT); reading remains, and timing a read"
         if "page_cache" not in off else switched_off)
    note("shared_inodes", "locks" not in off, "locks (flock, fcntl) are granted without locking and "
         "inotify/fanotify/dnotify are denied: concurrent calls cannot meet on a shared inode"
         if "locks" not in off else switched_off)
    note("seccomp", True, f"deny filter: {len(DENIED_SYSCALLS)} syscalls, namespace clone flags, clone3, non-inet "
         "socket families" + ("" if network else ", connect() and sendto(address) (no unix sockets)"))
    return program, child
