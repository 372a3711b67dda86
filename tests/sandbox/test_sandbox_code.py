"""Catalogue of hostile model-written code run by run_tests: verdicts decided on the trusted side."""

import os
import subprocess

import pytest

from agentrl.sandbox.pool import UID_BASE, UID_BLOCK, UID_BLOCKS

from .conftest import REPO, assert_still_works, children, templates_of_zygote

EQ = {"type": "assert", "code": "assert f(2) == 4"}            # judged outside: only `f(2)` enters the sandbox
OPAQUE = {"type": "assert", "code": "assert f(2) > 3 and f(3) > 5"}  # judged by a nonce written after the assert


def stdio(stdin: str, expected: str) -> dict:
    return {"type": "stdio", "stdin": stdin, "expected_stdout": expected}


# (id, code, test, kwargs, expected kinds)  -- a tuple of kinds means any of them is acceptable
CASES = [
    ("correct solution, eq assert", "def f(x):\n    return 2 * x\n", EQ, {}, ("pass",)),
    ("correct solution, opaque assert", "def f(x):\n    return 2 * x\n", OPAQUE, {}, ("pass",)),
    ("correct solution, stdio", "print(int(input()) * 2)", stdio("3\n", "6\n"), {}, ("pass",)),
    ("wrong answer", "def f(x):\n    return x + 3\n", EQ, {}, ("fail",)),
    ("raises", "def f(x):\n    raise ValueError('no')\n", EQ, {}, ("error",)),
    # --- forging results
    ("prints PASSED", "print('PASSED')\nprint('{\"ok\": true, \"score\": 1.0}')", EQ, {}, ("error",)),
    ("sys.exit(0) before the test", "import sys\nsys.exit(0)\ndef f(x):\n    return 0\n", EQ, {}, ("fail",)),
    # opaque tests run the model's code in a process of its own: its exit makes the test raise
    ("os._exit(0) before the test", "import os\nos._exit(0)", OPAQUE, {}, ("fail", "error")),
    ("exit inside the function", "import os\ndef f(x):\n    os._exit(0)\n", OPAQUE, {}, ("fail", "error")),
    ("writes forged results on every fd",
     "import os\nfor fd in range(0, 64):\n    try:\n        os.write(fd, b'{\"ok\": true, \"score\": 1.0}\\n')\n"
     "    except OSError:\n        pass\nos._exit(0)", OPAQUE, {}, ("fail", "error")),
    ("forges a probe value without knowing it",
     "import os\nos.write(3, b'{\"value\": {\"i\": \"5\"}}')\nos._exit(0)", EQ, {}, ("fail",)),
    ("always-equal object", "class E:\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return E()\n",
     EQ, {}, ("fail",)),
    ("int subclass with odd __eq__", "class I(int):\n    def __eq__(self, o):\n        return True\ndef f(x):\n    return I(5)\n",
     EQ, {}, ("fail",)),
    ("patches builtins for the assert", "import builtins\nbuiltins.AssertionError = SystemExit\ndef f(x):\n    return 0\n",
     EQ, {}, ("fail",)),
    # --- escapes of the plain path
    ("os.system", "import os\nprint(os.system('cat /etc/shadow'))", stdio("", "0"), {}, ("fail", "error")),
    ("subprocess", "import subprocess\nprint(subprocess.run(['id'], capture_output=True).stdout)", stdio("", "x"),
     {}, ("error",)),
    ("ctypes unshare", "import ctypes\nprint(ctypes.CDLL(None).unshare(0x40000000))", stdio("", "-1"), {}, ("pass",)),
    ("ctypes mount", "import ctypes\nprint(ctypes.CDLL(None).mount(b'none', b'/tmp', b'tmpfs', 0, None))",
     stdio("", "-1"), {}, ("pass",)),
    ("ptrace", "import ctypes\nprint(ctypes.CDLL(None).ptrace(16, 1, 0, 0))", stdio("", "-1"), {}, ("pass",)),
    # --- reading secrets
    ("read /etc/shadow", "print(open('/etc/shadow').read())", stdio("", ""), {}, ("error",)),
    ("read /etc/passwd", "print(open('/etc/passwd').read())", stdio("", ""), {}, ("error",)),
    ("read the repo", f"print(open({str(REPO / 'pyproject.toml')!r}).read())", stdio("", ""), {}, ("error",)),
    ("list /root", "import os\nprint(os.listdir('/root'))", stdio("", ""), {}, ("error",)),
    ("read /proc of the host", "print(open('/proc/1/environ').read())", stdio("", ""), {}, ("error",)),
    ("parent env var", "import os\nprint(os.environ.get('OPENAI_API_KEY'))", stdio("", "None"), {}, ("pass",)),
    ("environment is empty", "import os\nprint(sorted(os.environ))", stdio("", "['HOME', 'TMPDIR']"), {}, ("pass",)),
    # --- writing files
    ("write into the repo", f"open({str(REPO / 'PWNED')!r}, 'w').write('x')", stdio("", ""), {}, ("error",)),
    ("write /tmp", "open('/tmp/pwned', 'w').write('x')", stdio("", ""), {}, ("error",)),
    ("write /dev/shm", "open('/dev/shm/pwned', 'w').write('x')", stdio("", ""), {}, ("error",)),
    ("write scratch is fine", "open('f.txt', 'w').write('hi')\nprint(open('f.txt').read())", stdio("", "hi"), {},
     ("pass",)),
    # --- resource exhaustion
    ("infinite loop", "while True:\n    pass", stdio("", ""), {"timeout_per_test": 1.0}, ("timeout",)),
    ("sleep forever", "import time\ntime.sleep(1000)", stdio("", ""), {"timeout_per_test": 1.0}, ("timeout",)),
    ("memory bomb", "x = bytearray(8 * 1024 ** 3)", stdio("", ""), {"memory_mb": 256}, ("error", "crash")),
    ("fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
     stdio("", ""), {"timeout_per_test": 1.5}, ("timeout", "crash", "error")),
    ("huge print", "while True:\n    print('x' * 10000)", stdio("", ""), {"max_output": 1 << 16}, ("error",)),
    ("huge file", "f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * (1 << 20))", stdio("", ""), {},
     ("error", "crash")),
    ("garbage bytes on stdout", "import sys\nsys.stdout.buffer.write(bytes(range(256)) * 100)", stdio("", "x"), {},
     ("fail",)),
    ("deeply nested return value", "def f(x):\n    a = []\n    for _ in range(100000):\n        a = [a]\n    return a\n",
     EQ, {}, ("fail",)),
    ("huge return value", "def f(x):\n    return 'x' * (50 << 20)\n", EQ, {}, ("fail", "error", "crash")),
    # --- killing the supervisor
    # the template runs under another uid than its calls: the kill is refused (PermissionError)
    ("kill parent", "import os\nos.kill(os.getppid(), 9)\ndef f(x):\n    return 4\n", EQ, {}, ("error",)),
    ("kill -9 -1", "import os\ntry:\n    os.kill(-1, 9)\nexcept OSError:\n    pass\ndef f(x):\n    return 4\n", EQ, {},
     ("pass", "crash")),
    ("signal every pid", "import os\nfor p in range(1, 5000):\n    try:\n        os.kill(p, 9)\n    except OSError:\n"
     "        pass\ndef f(x):\n    return 4\n", EQ, {}, ("pass", "crash")),
]


@pytest.mark.parametrize("code,test,kwargs,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_code_catalogue(sb, code, test, kwargs, expected):
    [verdict] = sb.run_tests(code, [test], **kwargs)
    assert verdict.kind in expected, verdict
    assert verdict.passed == (verdict.kind == "pass")
    assert "sk-fake" not in verdict.detail and "root:" not in verdict.detail
    assert_still_works(sb)


def test_network_is_unreachable(sb, listener):
    code = ("import socket\ntry:\n    socket.create_connection(('127.0.0.1', %d), timeout=1)\n    print('connected')\n"
            "except OSError:\n    print('blocked')\n" % listener.port)
    [v] = sb.run_tests(code, [stdio("", "blocked")])
    assert v.passed, v
    assert listener.connections == 0


def test_no_files_written_outside(sb):
    sb.run_tests(f"open({str(REPO / 'PWNED')!r}, 'w').write('x')", [stdio("", "")])
    assert not (REPO / "PWNED").exists()


def test_no_process_survives_the_call(sb):
    code = "import os, time\nfor _ in range(5):\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(300)\n"
    [verdict] = sb.run_tests(code + "print('done')", [stdio("", "done")])
    assert verdict.kind == "pass", verdict
    out = subprocess.run(["ps", "-ww", "-eo", "uid=,pid=,ppid=,args="], capture_output=True, text=True).stdout
    rows = [line.split(None, 3) for line in out.splitlines() if line.strip()]
    # Every zygote and template factory on the machine (other tests' sandboxes too: they run as root with the
    # zygote's command line); each one's forking templates run as a slot uid.
    zygotes = {int(r[1]) for r in rows if len(r) == 4 and "agentrl.sandbox.zygote" in r[3] and r[0] == "0"}
    ours = {w.proc.pid for pool in sb._pools.values() for w in pool.workers if w.alive()}
    sandboxed = [r for r in rows if UID_BASE <= int(r[0]) < UID_BASE + UID_BLOCKS * UID_BLOCK]
    templates = [r for r in sandboxed if int(r[2]) in {f for z in ours for f in children(z)}]
    leftovers = [r for r in sandboxed if int(r[2]) not in zygotes]  # anything else is left over from a call
    assert ours <= zygotes and templates and leftovers == []


def test_many_tests_each_isolated(sb):
    code = "import os\nif os.path.exists('flag'):\n    print('leaked')\nopen('flag', 'w').close()\nprint(input())"
    verdicts = sb.run_tests(code, [stdio(str(i), str(i)) for i in range(3)])
    assert [v.kind for v in verdicts] == ["pass"] * 3


def test_bad_test_dicts(sb):
    from agentrl.sandbox import SandboxError
    for bad in ({"type": "nope"}, {"type": "stdio"}, {"type": "assert", "code": "assert ("}, "str"):
        with pytest.raises(SandboxError) as err:
            sb.run_tests("x = 1", [bad])
        assert err.value.cause == "bad_input"


@pytest.mark.parametrize("where", ["/tmp", os.path.dirname(__file__)])
def test_host_unix_sockets_unreachable(sb, where):
    """/tmp is covered by an empty tmpfs; elsewhere (here: the repo) seccomp denies connect()."""
    import socket
    import tempfile
    d = tempfile.mkdtemp(prefix="agentrl-sock-", dir=where)
    os.chmod(d, 0o777)
    path = os.path.join(d, "service.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(1)
    try:
        code = ("import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(%r)\n    print('connected')\n"
                "except OSError:\n    print('blocked')\n" % path)
        [v] = sb.run_tests(code, [stdio("", "blocked")])
        assert v.passed, v
        code = "import socket\na, b = socket.socketpair()\na.send(b'ok')\nprint(b.recv(2).decode())"
        [v] = sb.run_tests(code, [stdio("", "ok")])  # socket pairs still work
        assert v.passed, v
    finally:
        server.close()
        os.unlink(path)
        os.rmdir(d)


# Model code runs as a child of its worker's template (pid 1 of the call's pid namespace, same uid, same
# Landlock domain). Each attack prints "ok" when it was refused; the template must still be the same process.
TEMPLATE_ATTACKS = {
    "every signal to the template": "import os\nfor s in range(1, 65):\n    try:\n        os.kill(1, s)\n"
                                    "    except OSError:\n        pass\nprint('ok' if os.getppid() == 1 else 'no init')",
    "ptrace attach": "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                     "print('ok' if libc.ptrace(16, 1, 0, 0) != 0 else 'attached')",
    "read its memory through /proc": "try:\n    open('/proc/1/mem', 'rb').read(1)\n    print('read')\n"
                                     "except OSError:\n    print('ok')",
    "process_vm_readv": "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nbuf = ctypes.create_string_buffer(8)\n"
                        "iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)\n"
                        "print('ok' if libc.syscall(310, 1, iov, 1, iov, 1, 0) < 0 else 'read')",
}


def _templates(sb) -> set[int]:
    zygotes = {w.proc.pid for pool in sb._pools.values() for w in pool.workers if w.alive()}
    return {t for z in zygotes for t in templates_of_zygote(z)}


@pytest.mark.parametrize("code", TEMPLATE_ATTACKS.values(), ids=TEMPLATE_ATTACKS.keys())
def test_the_template_survives_its_children(sb, code):
    sb.run_tests("print('warm')", [stdio("", "warm")] * 2)  # every worker has its template
    before = _templates(sb)
    verdicts = sb.run_tests(code, [stdio("", "ok")] * 4)  # spread over the workers
    assert [v.kind for v in verdicts] == ["pass"] * 4, verdicts
    assert before and _templates(sb) == before


def test_memory_limit_covers_all_of_a_calls_processes(sb):
    """Each of 6 processes stays under RLIMIT_AS (memory_mb each), but together they need 3x memory_mb: the
    call's memory cgroup stops them. The isolation report must say cgroups are in use on this machine."""
    assert sb.isolation_report().cgroups.ok, sb.isolation_report().cgroups
    # Each child reports (its index on a pipe) once it holds its 100 MiB; the parent counts the living only
    # when every child has reported or died, so a slow machine cannot make the count early.
    code = """
import os, time
r, w = os.pipe()
kids = {}
for n in range(6):
    pid = os.fork()
    if pid == 0:
        block = bytearray(100 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        os.write(w, bytes([n]))
        time.sleep(60)
        os._exit(0)
    kids[pid] = n
os.close(w)
os.set_blocking(r, False)
held, dead = set(), set()
while len(held | dead) < 6:
    try:
        held |= set(os.read(r, 64))
    except BlockingIOError:
        pass
    for pid, n in kids.items():
        if n not in dead and os.waitpid(pid, os.WNOHANG) != (0, 0):
            dead.add(n)
    time.sleep(0.05)
print(6 - len(dead))
"""
    [verdict] = sb.run_tests(code, [stdio("", "6")], memory_mb=200, timeout_per_test=30)
    assert verdict.kind == "fail", verdict  # some children were killed: fewer than 6 alive
    assert int(verdict.detail.rsplit("got ", 1)[1].strip("'\\n")) < 6, verdict
    assert_still_works(sb)
