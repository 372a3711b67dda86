"""Kernel state a call could leave for a later call, or read while another test of the same solution runs.

Each check runs in a sandbox of one worker, so every call goes to the same worker and template: what one call
set is there for the next one to find, unless the sandbox closes it. The checks show each channel closed at its
mechanism (a fresh description, a refused syscall, a read-only mount); they are not a catalogue of attacks.
"""

import os

import pytest

from agentrl.sandbox import Sandbox


@pytest.fixture(scope="module", params=["C", "Python"])
def one(request):
    """One worker, so consecutive calls share its template; both per-call loops."""
    before = os.environ.get("AGENTRL_SANDBOX_FORKSERVER")
    os.environ["AGENTRL_SANDBOX_FORKSERVER"] = request.param.lower()
    box = Sandbox(size=1)
    yield box
    box.close()
    if before is None:
        os.environ.pop("AGENTRL_SANDBOX_FORKSERVER", None)
    else:
        os.environ["AGENTRL_SANDBOX_FORKSERVER"] = before


def output(box, code: str) -> str:
    """What the code printed (the test itself always fails: its expected output is not printable)."""
    seen = []
    [v] = box.run_tests(code, [{"type": "stdio", "stdin": "", "expected_stdout": "\0",
                                "equal": lambda got, _: seen.append(got)}])
    assert seen, v
    return seen[0].strip()


SET_FLAGS = """import fcntl, os, signal
for fd in (0, 1, 2):
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, os.O_APPEND | os.O_NONBLOCK)
        fcntl.fcntl(fd, 10, signal.SIGUSR1)  # F_SETSIG
    except OSError:
        pass
"""
READ_FLAGS = """import fcntl, os
flags = fcntl.fcntl(0, fcntl.F_GETFL)
print(bool(flags & (os.O_APPEND | os.O_NONBLOCK)), fcntl.fcntl(0, 11))  # F_GETSIG
"""


def test_each_call_gets_a_null_device_description_of_its_own(one):
    """Fd 0 of a test without input is /dev/null: flags one call sets on it are not the next call's."""
    output(one, SET_FLAGS + "print('set')")
    assert output(one, READ_FLAGS) == "False 0"


DEVICE_TIMES = """import os
changed = []
for name in ("null", "zero", "full", "random", "urandom", "tty", "ptmx"):
    try:
        os.utime("/dev/" + name)
        changed.append(name)
    except OSError:
        pass
print(" ".join(changed) or "none")
"""


def test_no_call_can_set_a_device_nodes_times(one):
    assert output(one, DEVICE_TIMES) == "none"
    assert output(one, "print(open('/dev/null', 'w').write('x'), len(open('/dev/zero', 'rb').read(3)))") == "1 3"


COUNTERS = """import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def refused(f):
    try:
        f()
        return "read"
    except OSError as e:
        return errno.errorcode[e.errno]
def sysinfo():
    if libc.sysinfo(ctypes.create_string_buffer(128)) < 0:
        raise OSError(ctypes.get_errno(), "sysinfo")
def flowlabel():  # an IPV6_FLOWLABEL_MGR request (struct in6_flowlabel_req: 32 bytes)
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(41, 32, bytes(32))
def pidfd_clone():  # clone(CLONE_PIDFD | SIGCHLD) with a place for the pidfd
    fd = ctypes.c_int(-1)
    pid = libc.syscall(56, 0x1000 | 17, 0, ctypes.byref(fd), 0, 0)
    if pid == 0:
        os._exit(0)
    if pid < 0:
        raise OSError(ctypes.get_errno(), "clone")
    os.waitpid(pid, 0)
a, b = socket.socketpair()
print(refused(lambda: socket.socket().getsockopt(socket.SOL_SOCKET, 57, 8)), refused(lambda: os.pidfd_open(os.getpid())),
      refused(sysinfo), refused(flowlabel), refused(pidfd_clone), refused(lambda: a.getsockopt(socket.SOL_SOCKET, 77)),
      refused(lambda: a.setsockopt(socket.SOL_SOCKET, 76, 1)))
"""


def test_machine_wide_counters_and_figures_are_unreadable(one):
    """The socket cookie and pidfs inode counters (a call advances them, a later one reads the distance; a pidfd
    comes from pidfd_open, clone(CLONE_PIDFD) or a unix socket's SO_PEERPIDFD/SO_PASSPIDFD),
    sysinfo()'s memory figures (another test's tmpfs pages) and IPv6 flow label leases (they outlive the call in
    the worker's network namespace)."""
    assert output(one, COUNTERS).split() == ["EPERM"] * 7
    ordinary = ("import socket, os\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                "print(s.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) > 0, os.cpu_count() > 0)")
    assert output(one, ordinary) == "True True"


MOUNT_IDS = """import ctypes, errno, os, struct
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(256)
def statx(mask):  # statx(AT_FDCWD, ".", 0, mask, buf): the scratch directory's mount id (stx_mnt_id at 0x90)
    r = libc.syscall(332, -100, b".", 0, mask, buf)
    return str(struct.unpack_from("Q", buf, 0x90)[0]) if r == 0 else errno.errorcode[ctypes.get_errno()]
def listmount():  # listmount(LSMT_ROOT of this mount namespace): the unique ids of its mounts
    ids = (ctypes.c_uint64 * 64)()
    r = libc.syscall(458, struct.pack("IIQQ", 24, 0, 0xFFFFFFFFFFFFFFFF, 0), ids, 64, 0)
    return str(ids[0]) if r > 0 else errno.errorcode[ctypes.get_errno()]
def statmount():  # statmount(the scratch mount's unique id, STATMOUNT_MNT_BASIC)
    out = ctypes.create_string_buffer(512)
    r = libc.syscall(457, struct.pack("IIQQ", 24, 0, 2**31, 1), out, 512, 0)
    return "read" if r == 0 else errno.errorcode[ctypes.get_errno()]
print(statx(0x1000), statx(0x4000), listmount(), statmount(), os.stat(".").st_ino > 0)
"""


def test_mount_ids_are_unreadable(one):
    """Each call's scratch is a fresh mount, and the kernel numbers mounts machine-wide (one counter for the
    unique ids, one lowest-free allocator for the short ones): a call reading its scratch's mount id would learn
    how many mounts every other sandbox made since the last call that read it. statx's mount ids, listmount and
    statmount are refused; an ordinary stat still works."""
    assert output(one, MOUNT_IDS).split() == ["EPERM"] * 4 + ["True"]


FUTEX = """import ctypes, errno, mmap, threading
libc = ctypes.CDLL(None, use_errno=True)
page = mmap.mmap(-1, 4096)
addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
def wake(op):
    r = libc.syscall(202, ctypes.c_void_p(addr), op, 1, 0, 0, ctypes.c_uint(0xFFFFFFFF))  # val3: bitset
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
out = [wake(1), wake(1 | 128), wake(10), wake(10 | 128)]  # FUTEX_WAKE, _PRIVATE, WAKE_BITSET, _PRIVATE
done = []
threads = [threading.Thread(target=done.append, args=(n,)) for n in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
lock, cond = threading.Lock(), threading.Condition()
with cond:
    cond.notify_all()
print(*out, len(done))
"""


def test_shared_futexes_cannot_be_woken_and_threads_still_work(one):
    """A futex without FUTEX_PRIVATE_FLAG on a page of a file two tests map is keyed by (inode, offset): a wake
    would reach the other test's waiter. Waking is refused unless private; threads use private futexes."""
    assert output(one, FUTEX) == "EINVAL ok EINVAL ok 4"


NUMPY_WITHOUT_SYSINFO = """import os, threading
import numpy as np
a = np.arange(400.0).reshape(20, 20)
out = [int((a @ a.T).trace())]
t = threading.Thread(target=lambda: out.append(round(np.linalg.det(np.eye(3) * 2))))
t.start()
t.join()
try:
    os.getloadavg()
    out.append("load average read")
except OSError:
    out.append("no load average")
print(*out, os.cpu_count() == CPUS)
"""


def test_python_and_numpy_still_work_without_sysinfo(one):
    """What denying sysinfo() costs: numpy (its BLAS included), threads and os.cpu_count() work; glibc's
    getloadavg() fails. (sysconf(_SC_PHYS_PAGES) returns a meaningless number: glibc ignores the error.)"""
    code = NUMPY_WITHOUT_SYSINFO.replace("CPUS", str(os.cpu_count()))
    assert output(one, code) == "21253400 8 no load average True"
