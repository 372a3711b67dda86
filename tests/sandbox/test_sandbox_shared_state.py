"""What one call could learn from another without any file or object of its own, by class:

1. kernel state that outlives a call (page-cache residency, access times, the pid counter, TCP TIME_WAIT);
2. concurrent calls meeting on a shared inode (locks, watches);
3. a reply read by the wrong caller (a reward's own settings breaking the host's wait);
4. verdicts decided in the solution's process (`assert <expr> == <literal>` with a comparison inside);
5. control-flow exceptions carried across the two processes of an opaque test.

Each test plays the attack for real (a writer call, then a reader call, or two calls at once on two workers)
and asserts that the reader learns nothing.
"""

from __future__ import annotations

import ast
import os
import secrets
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

from agentrl.rewards import load_reward
from agentrl.rewards.loading import RewardConfigError
from agentrl.sandbox import SandboxError
from agentrl.sandbox import pool as pool_mod

from .conftest import assert_still_works
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


def test_a_closed_connection_leaves_no_port_for_a_later_network_grader(sb):
    """A network grader closes a connection (its port would sit in TIME_WAIT for a minute in the worker's
    network namespace); later graders, on every worker, probe that port with bind()."""
    port = int(sb.run_grader(TW_CONNECT, "connect.py", {}, {}, network=True))
    time.sleep(0.2)
    found = [sb.run_grader(TW_PROBE, "probe.py", {}, {"port": port}, network=True) for _ in range(3)]
    assert found == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------- 2. concurrent calls on shared inodes
LOCKER = """
import fcntl, os, struct, sys, time
role = sys.stdin.read().strip()
if role == 'hold':
    fd = os.open('/dev/null', os.O_RDWR)
    fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 4242, 17, 0))
    lib = os.open(os.__file__, os.O_RDONLY)
    fcntl.flock(lib, fcntl.LOCK_EX)
    time.sleep(3)
    print('held')
else:
    time.sleep(1)
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


def test_concurrent_calls_cannot_meet_on_a_lock(sb):
    """Two calls at once on two workers: one takes a byte-range lock on /dev/null (its range is the message)
    and an flock on a library file; the other looks for them."""
    got = outputs(sb, LOCKER, ["hold", "look"])
    assert got == ["held", "nothing"], got


WATCHER = """
import ctypes, os, select, sys, time
role = sys.stdin.read().strip()
folder = os.path.dirname(os.__file__)
if role == 'watch':
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    if fd < 0 or libc.inotify_add_watch(fd, folder.encode(), 0x1 | 0x20) < 0:  # IN_ACCESS | IN_OPEN
        print('nothing')
    else:
        seen = 0
        end = time.time() + 3
        while time.time() < end:
            if select.select([fd], [], [], 0.2)[0]:
                seen += len(os.read(fd, 65536)) > 0
        print('seen' if seen else 'nothing')
else:
    time.sleep(1)
    for _ in range(20):
        open(os.path.join(folder, 'this.py'), 'rb').read()
        time.sleep(0.05)
    print('read')
"""


def test_concurrent_calls_cannot_watch_each_other_read(sb):
    got = outputs(sb, WATCHER, ["watch", "read"])
    assert got == ["nothing", "read"], got


# ---------------------------------------------------------------- 3. replies bound to their requests
SEVEN = "def grade(sample, item):\n    return 7.0\n"
ONE = "def grade(sample, item):\n    return 1.0\n"


def test_a_reply_is_never_read_by_the_next_caller(sb, monkeypatch):
    """The host's wait fails after a request was written (as `select()` did with a timeout of 1e999): the reply
    left in the pipe must never be taken by a later call as its own."""
    sb._pool("grader").ensure_started()
    real, failed = pool_mod.Worker._read, []

    def read_once_failing(self, timeout):
        if not failed:
            failed.append(self)
            raise OverflowError("timeout doesn't fit into C timeval")
        return real(self, timeout)

    monkeypatch.setattr(pool_mod.Worker, "_read", read_once_failing)
    with pytest.raises(OverflowError):
        sb.run_grader(SEVEN, "seven.py", {}, {})
    assert [sb.run_grader(ONE, "one.py", {}, {}) for _ in range(4)] == [1.0] * 4


@pytest.mark.parametrize("timeout", [1e999, float("nan"), -1.0, 1e300, "10"])
def test_an_unrepresentable_timeout_is_refused_before_anything_runs(sb, timeout):
    with pytest.raises(SandboxError) as e:
        sb.run_grader(SEVEN, "seven.py", {}, {}, timeout=timeout)
    assert e.value.cause == "bad_input" and "seven.py" in str(e.value) and "timeout" in str(e.value)
    assert [sb.run_grader(ONE, "one.py", {}, {}) for _ in range(3)] == [1.0] * 3
    with pytest.raises(SandboxError):
        sb.run_tests("print(1)", [stdio("", "1")], timeout_per_test=timeout)


@pytest.mark.parametrize("setting", ["TIMEOUT = 1e999", "TIMEOUT = -5", "TIMEOUT = '10'", "NETWORK = 'yes'",
                                     "ENV = 'KEY'"])
def test_a_reward_files_own_settings_are_validated_when_it_loads(tmp_path, setting):
    path = tmp_path / "hostile.py"
    path.write_text(f"{setting}\n\ndef grade(sample, item):\n    return 1.0\n")
    with pytest.raises(RewardConfigError) as e:
        load_reward(str(path))
    assert str(path) in str(e.value) and setting.split()[0] in str(e.value), e.value


def test_a_deeply_nested_reward_file_is_a_config_error(tmp_path):
    path = tmp_path / "deep.py"
    path.write_text("X = " + "-" * 100_000 + "1\n\ndef grade(sample, item):\n    return 1.0\n")
    with pytest.raises(RewardConfigError) as e:
        load_reward(str(path))
    assert str(path) in str(e.value)


# ---------------------------------------------------------------- 4. verdicts from plain data only
FORGED_PROBES = {
    # (solution, test): the solution computes nothing, the test would pass if run in its process
    "its own math module": ("import types\nmath = types.SimpleNamespace(isclose=lambda *a, **k: True)\n"
                            "def f(x):\n    return 0.0\n", "assert math.isclose(f(2), 4.0) == True"),
    "the real math, patched": ("import math\nmath.isclose = lambda *a, **k: True\ndef f(x):\n    return 0.0\n",
                               "assert math.isclose(f(2), 4.0) == True"),
    "__sub__ returning 0": ("class Z:\n    def __sub__(self, other):\n        return 0.0\n"
                            "def f(x):\n    return Z()\n", "assert round(f(2) - 4.0, 9) == 0"),
    "__eq__ returning True": ("class E:\n    def __eq__(self, other):\n        return True\n"
                              "def f(x):\n    return E()\n", "assert (f(2) == 4.0) == True"),
}
HONEST = "import math\ndef f(x):\n    return 2.0 * x\n"


@pytest.mark.parametrize("code,test", FORGED_PROBES.values(), ids=FORGED_PROBES.keys())
def test_a_comparison_inside_the_probe_is_not_the_solutions_to_make(sb, code, test):
    [v] = sb.run_tests(code, [{"type": "assert", "code": test}])
    assert not v.passed, v
    [v] = sb.run_tests(HONEST, [{"type": "assert", "code": test}])
    assert v.passed, v


def test_plain_probes_still_run_in_one_process(sb):
    from agentrl.sandbox import verdicts
    for test in ("assert f(2) == 4", "assert Solution().run([1, 2], k=3) == [3]", "assert f('ab')[0] == 'a'"):
        assert verdicts.plan({"type": "assert", "code": test}, 100)[0]["mode"] == "probe", test
    code = "class Solution:\n    def run(self, xs, k):\n        return [sum(xs) * k // 3]\ndef f(x):\n    return 2 * x\n"
    tests = [{"type": "assert", "code": "assert Solution().run([1, 2], k=3) == [3]"},
             {"type": "assert", "code": "assert f(2) == 4"}]
    assert all(v.passed for v in sb.run_tests(code, tests))


# ---------------------------------------------------------------- 5. exceptions carried as data
VACUOUS = {
    "all(map(...))": "def check(candidate):\n    assert all(map(lambda c: candidate(c) == 2 * c, [1, 2, 3]))\n\ncheck(f)\n",
    "not any(map(...))": "def check(candidate):\n    assert not any(map(lambda c: candidate(c) != 2 * c, [1, 2, 3]))\n"
                         "\ncheck(f)\n",
}


@pytest.mark.parametrize("test", VACUOUS.values(), ids=VACUOUS.keys())
def test_stop_iteration_from_the_solution_does_not_end_the_tests_loop(sb, test):
    [v] = sb.run_tests("def f(x):\n    raise StopIteration\n", [{"type": "assert", "code": test}])
    assert not v.passed, v
    [v] = sb.run_tests("def f(x):\n    return 2 * x\n", [{"type": "assert", "code": test}])
    assert v.passed, v


def test_an_ordinary_exception_still_crosses_as_itself(sb):
    test = textwrap.dedent("""
        def check(candidate):
            try:
                candidate(-1)
            except ValueError as e:
                assert 'negative' in str(e)
            else:
                raise AssertionError('no ValueError')
        check(f)
    """)
    [v] = sb.run_tests("def f(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x\n",
                       [{"type": "assert", "code": test}])
    assert v.passed, v
    assert_still_works(sb)


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
            box.run_grader(ONE, "one.py", {}, {})
        assert "pid_rest" in str(e.value) and "pid_reset" in str(e.value), e.value
    finally:
        box.close()


# ---------------------------------------------------------------- RestrictedPython's guards, all ways round
GETTER_ESCAPES = {
    "attrgetter": "import operator\nWAY = operator.attrgetter('__class__.__base__')\n",
    "from operator import attrgetter": "from operator import attrgetter\nWAY = attrgetter('__class__.__base__')\n",
    "methodcaller": "import operator\nWAY = operator.methodcaller('__sizeof__')\n",
    "operator reached through typing": "import typing\nWAY = typing.operator.attrgetter('__class__.__base__')\n",
    "str.format through attrgetter": "import operator\nWAY = lambda x: operator.attrgetter('format')('{0}')\n",
}


@pytest.mark.parametrize("way", GETTER_ESCAPES.values(), ids=GETTER_ESCAPES.keys())
def test_operator_getters_go_through_the_guarded_getattr(sb, way):
    src = way + "def grade(sample, item):\n    WAY(())\n    return 1.0\n"
    from agentrl.sandbox import GraderCodeError
    with pytest.raises(GraderCodeError) as e:
        sb.run_grader(src, "getter.py", {}, {})
    assert any(w in str(e.value) for w in ("AttributeError", "not allowed", "not safe")), e.value
    ok = "from operator import attrgetter, methodcaller\ndef grade(sample, item):\n" \
         "    return attrgetter('real')(3) + methodcaller('count', 'a')('banana')\n"
    assert sb.run_grader(ok, "ok.py", {}, {}) == 6.0
