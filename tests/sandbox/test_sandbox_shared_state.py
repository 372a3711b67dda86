"""What one call could learn from another without any file or object of its own, by class:

1. kernel state that outlives a call (page-cache residency, access times, the pid counter, TCP TIME_WAIT);
2. concurrent calls meeting on a shared inode (locks, watches);
and the benchmark's switches, which open such a channel again by switching its measure off.

Each test plays the attack for real (a writer call, then a reader call, or two calls at once on two workers)
and asserts that the reader learns nothing. A reply read by the wrong caller, verdicts decided in the
solution's process and exceptions carried across are test_sandbox_reply_and_verdict.py's.
"""

from __future__ import annotations

import ast
import os
import secrets
import signal
import sysconfig
import threading
import time
from pathlib import Path

import pytest

from agentrl.sandbox import SandboxError

from .conftest import NORMAL_GRADER, calls_of, wait_until
from .test_sandbox_crosscall import escaped


def stdio(stdin: str, expected: str) -> dict:
    return {"type": "stdio", "stdin": stdin, "expected_stdout": expected}


def outputs(sb, code: str, stdins: list[str]) -> list[str]:
    """What `code` printed for each stdin: each test expects '?' and fails with the output in its detail."""
    verdicts = sb.run_tests(code, [stdio(s, "?") for s in stdins], timeout_per_test=15)
    out = []
    for v in verdicts:
        assert v.kind == "fail", v
        out.append(ast.literal_eval(v.detail.split(", got ", 1)[1]).strip())
    return out


@pytest.fixture
def library_file():
    """A file of 64 pages in a folder every call may read (the virtualenv's site-packages), removed after."""
    path = Path(sysconfig.get_paths()["purelib"]) / f"_agentrl_probe_{secrets.token_hex(4)}.bin"
    path.write_bytes(os.urandom(64 * 4096))
    path.chmod(0o644)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)  # clean pages: fadvise(DONTNEED) drops only those
    os.close(fd)
    yield path
    path.unlink()


# ---------------------------------------------------------------- 1. kernel state outliving a call
PID_WRITER = "import os\nfor _ in range(40):\n    p = os.fork()\n    if p == 0:\n        os._exit(0)\n    os.waitpid(p, 0)\nprint('x')"
PID_READER = "import os\nprint(os.getpid())"


def test_a_call_cannot_count_the_processes_earlier_calls_started(sb):
    """Fork-and-reap N, and the next call would read N off its own pid: every call starts at the same pid."""
    pids = []
    for _ in range(3):
        outputs(sb, PID_WRITER, ["", ""])  # one writer on each worker
        pids += outputs(sb, PID_READER, ["", ""])
    assert len(set(pids)) == 1, pids
    grader = escaped("import os\nresult = os.getpid()")  # a grader file that escaped RestrictedPython, too
    got = set()
    for _ in range(3):
        sb.run_grader(escaped("import os\nfor _ in range(40):\n    p = os.fork()\n    if p == 0:\n        os._exit(0)\n"
                              "    os.waitpid(p, 0)\nresult = 0"), "forker.py", {}, {})
        got.add(sb.run_grader(grader, "pid.py", {}, {}))
    assert len(got) == 1, got


CAPS = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
header = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)()
assert libc.syscall(125, header, data) == 0  # capget
print(' '.join(str(x) for x in data))
"""


def test_the_pid_rewind_capability_stays_with_the_template(sb):
    """The template keeps CAP_CHECKPOINT_RESTORE to rewind the pid counter; a call has no capability at all."""
    assert all(v.passed for v in sb.run_tests(CAPS, [stdio("", "0 0 0 0 0 0")] * 2)), "a call holds a capability"


def test_reading_a_file_leaves_no_access_time(sb, library_file, tmp_path):
    """Under relatime a read updates the access time of a file whose atime is older than its mtime, and any
    later call can stat() it (stat is outside Landlock): no mount a call sees records access times."""
    os.utime(library_file, (1_000_000, time.time()))
    [v] = sb.run_tests(f"print(len(open({str(library_file)!r}, 'rb').read()))", [stdio("", str(64 * 4096))])
    assert v.passed, v
    assert os.stat(library_file).st_atime == 1_000_000
    declared = tmp_path / "refs.txt"
    declared.write_text("42")
    tmp_path.chmod(0o755)
    os.utime(declared, (1_000_000, time.time()))
    src = f"def grade(sample, item):\n    return float(open({str(declared)!r}).read())\n"
    assert sb.run_grader(src, "reads.py", {}, {}, read_paths=[str(tmp_path)]) == 42.0
    assert os.stat(declared).st_atime == 1_000_000


PAGE_WRITER = """
import os, sys
bits = sys.stdin.read().strip()
fd = os.open(PATH, os.O_RDONLY)
try:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead: a read brings in its own page only
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
except OSError:
    pass
for i, b in enumerate(bits):
    if b == '1':
        os.pread(fd, 4096, i * 4096)
print('x')
"""
PAGE_READER = """
import ctypes, os
fd = os.open(PATH, os.O_RDONLY)
out = ''
try:
    for i in range(N):
        try:
            os.preadv(fd, [bytearray(4096)], i * 4096, os.RWF_NOWAIT)
            out += '1'
        except BlockingIOError:
            out += '0'
except OSError:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, N * 4096, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    vec = (ctypes.c_ubyte * N)()
    if libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(N * 4096), vec) == 0:
        out = ''.join(str(v & 1) for v in vec)
    else:
        out = 'blocked'
print(out)
"""


def test_page_cache_residency_carries_no_message(sb, library_file):
    """A writer call evicts (fadvise) or reads each page of a file every call can read; a reader call probes
    residency without timing (preadv2 RWF_NOWAIT, else mincore). Neither half works any more."""
    message = "".join(secrets.choice("01") for _ in range(32))
    path = repr(str(library_file))
    for _ in range(2):  # on each worker (the pool hands them out in turn); the page cache is the machine's
        outputs(sb, PAGE_WRITER.replace("PATH", path), [message])
        [got] = outputs(sb, "N = 32\n" + PAGE_READER.replace("PATH", path), [""])
        assert got != message


TW_CONNECT = """import socket, urllib.request
def grade(sample, item):
    port = int(urllib.request.getproxies()['http'].rsplit(':', 1)[1])
    s = socket.create_connection(('127.0.0.1', port), timeout=2)
    mine = s.getsockname()[1]
    s.close()
    return float(mine)
"""
TW_PROBE = """import socket
def grade(sample, item):
    s = socket.socket()
    try:
        s.bind(('127.0.0.1', item['port']))
        return 0.0
    except OSError:
        return 1.0
    finally:
        s.close()
"""


def _closing(pool, port: int) -> bool:
    """Whether a socket on local ``port`` is still closing (any state but TIME_WAIT, the one under test) in a
    worker's network namespace, read from the host (/proc/<zygote>/net/tcp)."""
    for w in pool.workers:
        try:
            rows = open(f"/proc/{w.proc.pid}/net/tcp").read().splitlines()[1:]
        except OSError:
            continue
        if any(f[1].endswith(f":{port:04X}") and f[3] != "06" for f in (row.split() for row in rows)):
            return True
    return False


def test_a_closed_connection_leaves_no_port_for_a_later_network_grader(sb):
    """A network grader closes a connection (its port would sit in TIME_WAIT for a minute in the worker's
    network namespace); later graders, on every worker, probe that port with bind()."""
    port = int(sb.run_grader(TW_CONNECT, "connect.py", {}, {}, network=True))
    pool = sb._pool("grader", network=True)
    wait_until(lambda: not _closing(pool, port), "the connection closed on both sides")
    found = [sb.run_grader(TW_PROBE, "probe.py", {}, {"port": port}, network=True) for _ in range(3)]
    assert found == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------- 2. concurrent calls on shared inodes
RELEASE = """
import ctypes, signal, time
released = []
signal.signal(signal.SIGUSR1, lambda *_: released.append(1))
def in_place():  # the host sees this name (/proc/<pid>/comm) and only then starts the other call
    ctypes.CDLL(None).prctl(15, b"agentrl-held", 0, 0, 0)  # PR_SET_NAME
def hold(seconds=12):  # until the host says the other call is done (SIGUSR1), never on a guess of its timing
    end = time.monotonic() + seconds
    while not released and time.monotonic() < end:
        time.sleep(0.02)
    return bool(released)
"""
LOCKER = RELEASE + """
import fcntl, os, struct, sys
role = sys.stdin.read().strip()
if role == 'hold':
    fd = os.open('/dev/null', os.O_RDWR)
    fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 4242, 17, 0))
    lib = os.open(os.__file__, os.O_RDONLY)
    fcntl.flock(lib, fcntl.LOCK_EX)
    in_place()
    print('held' if hold() else 'let go before the look ended')
else:
    fd = os.open('/dev/null', os.O_RDWR)
    got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))
    kind, _, start, length, _ = struct.unpack('hhqqi', got)
    seen = [] if kind == fcntl.F_UNLCK else ['lock at %d+%d' % (start, length)]
    lib = os.open(os.__file__, os.O_RDONLY)
    try:
        fcntl.flock(lib, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        seen.append('flock held')
    print(', '.join(seen) or 'nothing')
"""


def _in_place(pid: int) -> bool:
    """Whether a call's process has named itself as RELEASE's ``in_place()`` does."""
    try:
        return open(f"/proc/{pid}/comm").read().strip() == "agentrl-held"
    except OSError:
        return False


def _while_held(sb, code: str, role: str, look: str) -> list[str]:
    """Run ``code`` with stdin ``role`` as one call; once the host sees it in place (the call's process named
    by ``in_place()``), run ``look`` as a second call on the other worker, then tell the first to end
    (SIGUSR1, to that call's process only). The outputs of both, in that order. A first call that ends
    without getting in place (nothing to hold here) ends the wait too."""
    first: dict = {}
    pool = sb._pool("code")
    holder = threading.Thread(target=lambda: first.update(out=outputs(sb, code, [role])))
    holder.start()
    try:
        def placed() -> int:
            return next((p for p in calls_of(pool) if _in_place(p)), 0) or (-1 if not holder.is_alive() else 0)
        pid = wait_until(placed, "the first call in place")
        second = outputs(sb, code, [look])
        if pid > 0:
            os.kill(pid, signal.SIGUSR1)
    finally:
        holder.join()
    return first["out"] + second


def test_concurrent_calls_cannot_meet_on_a_lock(sb):
    """Two calls at once on two workers: one takes a byte-range lock on /dev/null (its range is the message)
    and an flock on a library file and holds them until the other has looked for them."""
    got = _while_held(sb, LOCKER, "hold", "look")
    assert got == ["held", "nothing"], got


WATCHER = RELEASE + """
import os, select, sys
role = sys.stdin.read().strip()
folder = os.path.dirname(os.__file__)
if role == 'watch':
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    if fd < 0 or libc.inotify_add_watch(fd, folder.encode(), 0x1 | 0x20) < 0:  # IN_ACCESS | IN_OPEN
        print('nothing')
    else:
        in_place()
        seen, end = 0, time.monotonic() + 12
        while not released and time.monotonic() < end:
            if select.select([fd], [], [], 0.02)[0]:
                seen += len(os.read(fd, 65536)) > 0
        while select.select([fd], [], [], 0)[0]:  # what arrived before the host's word
            seen += len(os.read(fd, 65536)) > 0
        print('seen' if seen else 'nothing')
else:
    for _ in range(20):
        open(os.path.join(folder, 'this.py'), 'rb').read()
    print('read')
"""


def test_concurrent_calls_cannot_watch_each_other_read(sb):
    got = _while_held(sb, WATCHER, "watch", "read")
    assert got == ["nothing", "read"], got


# ---------------------------------------------------------------- the benchmark's switches
def test_a_measure_switched_off_makes_the_report_weak(monkeypatch):
    """bench_sandbox.py switches measures off one at a time; such a sandbox never passes as strong, and the
    channel that measure closes is open again (so the measure, not something else, is what closes it)."""
    from agentrl.sandbox import Sandbox
    monkeypatch.setenv("AGENTRL_SANDBOX_BENCH_OFF", "pid_reset")
    box = Sandbox(size=1)
    try:
        report = box.isolation_report()
        assert not report.strong and {"pid_reset", "bench_off"} <= set(report.missing()), report.summary()
        with pytest.raises(SandboxError) as e:
            box.run_tests(PID_READER, [stdio("", "?")])
        assert e.value.cause == "weak_isolation"
        pids = []
        for code in (PID_READER, PID_WRITER, PID_READER):
            [v] = box.run_tests(code, [stdio("", "?")], allow_weak=True)
            pids.append(v.detail.split(", got ", 1)[1])
        assert pids[0] != pids[2], pids
    finally:
        box.close()


def test_an_unknown_switch_stops_the_worker(monkeypatch):
    from agentrl.sandbox import Sandbox
    monkeypatch.setenv("AGENTRL_SANDBOX_BENCH_OFF", "pid_rest")
    box = Sandbox(size=1)
    try:
        with pytest.raises(SandboxError) as e:
            box.run_grader(NORMAL_GRADER, "normal.py", {}, {})
        assert "pid_rest" in str(e.value) and "pid_reset" in str(e.value), e.value
    finally:
        box.close()
