"""Catalogue, by class of the attacks in the sandbox's issue list, each with its expected outcome:
nothing crosses from one call to the next, no call reaches its template, another reward's secrets and
an earlier item's data stay out of reach, a grader that escapes RestrictedPython gains nothing the OS layer
does not deny to model code anyway, opaque test verdicts cannot be forged, and a broken worker makes a
call unscorable, never a failure.

The grader escape used here is real: `typing.get_type_hints` evaluates a string annotation with the
unrestricted compiler, and that expression walks to the real `__import__`. From there the attack code runs
as plain Python (`ESCAPED`), with `os`, `ctypes` and `gc` at hand, exactly like model code.
"""

import os
import secrets
import signal
import threading

import pytest

from agentrl.sandbox import SandboxError

from .conftest import assert_still_works, calls_of, gone, templates_of_zygote, wait_until


def stdio(expected: str) -> dict:
    return {"type": "stdio", "stdin": "", "expected_stdout": expected}


ESCAPE = '''import typing
def imp(x: "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0].__init__.__globals__['__builtins__']"):
    return x
ATTACK = {attack!r}
def grade(sample, item):
    real = typing.get_type_hints(imp)['x']
    ns = {{'item': item, 'NEKOT': {token!r}, '__builtins__': real}}
    real['exec'](ATTACK, ns)
    return float(ns['result'])
'''


def escaped(attack: str, token: str = "") -> str:
    """A grader that escapes RestrictedPython and runs `attack` (plain Python that sets `result`). The token
    to search for is written backwards, so that the grader's own source does not count as a find."""
    return ESCAPE.format(attack=PRELUDE + attack, token=token[::-1])


PRELUDE = "TOKEN = ''.join(reversed(NEKOT))\n"


# Raw memory: every page of the brk heap (where malloc puts strings over 512 bytes, freed or not), found by
# writing it to a pipe page by page (EFAULT ends the heap without a crash), then searched for TOKEN.
HEAP_SCAN = '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.sbrk.restype = ctypes.c_void_p
libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
end = libc.sbrk(0) // 4096 * 4096
r, w = os.pipe()
addr = end
while libc.write(w, addr - 4096, 4096) == 4096:
    os.read(r, 4096)
    addr -= 4096
result = 1 if TOKEN.encode() in ctypes.string_at(addr, end - addr) else 0
'''

# Live objects and the frames this call inherited from its template.
FRAME_SCAN = '''
import gc, sys
hits = 0
def look(v):
    global hits
    if v is TOKEN or v is NEKOT:
        return
    if type(v) in (str, bytes) and (TOKEN if type(v) is str else TOKEN.encode()) in v:
        hits += 1
    elif type(v) in (tuple, list):
        for e in v:
            look(e) if type(e) in (str, bytes) else None
f = sys._getframe()
while f is not None:
    for v in list(f.f_locals.values()):
        look(v)
        if type(v) in (tuple, list):
            for e in v:
                look(e)
    f = f.f_back
for o in gc.get_objects():
    if type(o) in (tuple, list):
        look(o)
    elif type(o) is dict:
        for v in list(o.values()):
            look(v)
result = hits
'''


# ---------------------------------------------------------------- 1. RestrictedPython escaped
def test_the_escape_is_real(sb):
    """The escape works (so the tests below are meaningful): the grader gets the real os module."""
    assert sb.run_grader(escaped("import os\nresult = 7 if hasattr(os, 'fork') else 0"), "esc.py", {}, {}) == 7.0


ESCAPED_ATTACKS = {
    # (attack setting `result`, expected result)
    "read /etc/shadow": ("try:\n    open('/etc/shadow').read()\n    result = 1\nexcept OSError:\n    result = 0", 0),
    "host pids by stat(/proc/N)": ("import os\nresult = 0\nfor n in range(1, 40000):\n    try:\n"
                                   "        os.stat(f'/proc/{n}')\n        result += 1\n    except OSError:\n"
                                   "        pass\nresult = 0 if result <= 2 else result", 0),
    "ptrace the template": ("import ctypes\nresult = 1 if ctypes.CDLL(None).ptrace(16, 1, 0, 0) == 0 else 0", 0),
    "setuid(0)": ("import os\ntry:\n    os.setuid(0)\n    result = 1\nexcept OSError:\n    result = 0", 0),
    "write outside scratch": ("try:\n    open('/var/tmp/x', 'w').write('x')\n    result = 1\nexcept OSError:\n"
                              "    result = 0", 0),
}


@pytest.mark.parametrize("attack,expected", ESCAPED_ATTACKS.values(), ids=ESCAPED_ATTACKS.keys())
def test_an_escaped_grader_gains_nothing_the_os_layer_denies(sb, attack, expected):
    assert sb.run_grader(escaped(attack), "esc.py", {}, {}) == expected
    assert_still_works(sb)


def test_an_escaped_grader_finds_no_earlier_item_in_raw_memory(sb, tmp_path):
    """An earlier call's item (a reference answer) went through the worker; a grader with declared read paths
    gets a template started after it. Raw memory of the later call holds no trace of it."""
    token = "REF-" + secrets.token_hex(8)
    big = {"answer": (token + " ") * 400}  # over 512 bytes: malloc'd, in the brk heap
    for _ in range(4):
        sb.run_grader("def grade(sample, item):\n    return 1.0\n", "plain.py", {}, big)
    tmp_path.chmod(0o755)
    got = [sb.run_grader(escaped(HEAP_SCAN, token), "scan.py", {}, {}, read_paths=[str(tmp_path)]) for _ in range(4)]
    assert got == [0.0] * 4


# ---------------------------------------------------------------- 2. state crossing calls on a worker
CROSS_CALL = {
    # (writer, reader printing 'clean' when nothing of the writer is found)
    "SysV shared memory": (
        "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.shmat.restype = ctypes.c_void_p\n"
        "i = libc.shmget(4242, 4096, 0o1666)\nif i >= 0:\n    p = libc.shmat(i, None, 0)\n"
        "    ctypes.memmove(p, b'SECRET', 6)\nprint('done')",
        "import ctypes\nlibc = ctypes.CDLL(None)\nprint('clean' if libc.shmget(4242, 0, 0o666) < 0 else 'found')"),
    "SysV message queue": (
        "import ctypes\nlibc = ctypes.CDLL(None)\nq = libc.msgget(4243, 0o1666)\n"
        "buf = ctypes.create_string_buffer(b'\\x01\\0\\0\\0\\0\\0\\0\\0SECRET')\nlibc.msgsnd(q, buf, 6, 0)\nprint('done')",
        "import ctypes\nlibc = ctypes.CDLL(None)\nprint('clean' if libc.msgget(4243, 0o666) < 0 else 'found')"),
    "SysV semaphore": (
        "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.semget(4244, 1, 0o1666)\nprint('done')",
        "import ctypes\nlibc = ctypes.CDLL(None)\nprint('clean' if libc.semget(4244, 1, 0o666) < 0 else 'found')"),
    "extended attribute on scratch": (
        "import os\ntry:\n    os.setxattr('.', 'user.secret', b'SECRET')\nexcept OSError:\n    pass\nprint('done')",
        "import os\ntry:\n    os.getxattr('.', 'user.secret')\n    print('found')\nexcept OSError:\n    print('clean')"),
    "mode of scratch": (
        "import os\nos.chmod('.', 0o777)\nprint('done')",
        "import os, stat\nprint('clean' if stat.S_IMODE(os.stat('.').st_mode) == 0o700 else 'found')"),
    "a file in scratch": (
        "open('left.txt', 'w').write('SECRET')\nprint('done')",
        "import os\nprint('found' if os.listdir('.') else 'clean')"),
}


@pytest.mark.parametrize("writer,reader", CROSS_CALL.values(), ids=CROSS_CALL.keys())
def test_nothing_crosses_from_one_call_to_the_next(sb, writer, reader):
    for _ in range(2):  # each of the two workers gets writers and readers (run_tests spreads over them)
        sb.run_tests(writer, [stdio("done")] * 2)
        assert [v.kind for v in sb.run_tests(reader, [stdio("clean")] * 2)] == ["pass", "pass"]


def test_a_deep_tree_in_scratch_does_not_break_later_calls(sb):
    deep = "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\nprint('done')"
    verdicts = sb.run_tests(deep, [stdio("done")] * 2, timeout_per_test=20)
    assert [v.kind for v in verdicts] == ["pass", "pass"], verdicts
    fresh = "import os\nprint(len(os.listdir('.')))\nopen('f', 'w').write('x')"
    assert [v.kind for v in sb.run_tests(fresh, [stdio("0")] * 4)] == ["pass"] * 4
    assert_still_works(sb)


# ---------------------------------------------------------------- 3. the template out of its calls' reach
TEMPLATE_TAMPERING = {  # each prints 'ok' when refused
    "prlimit on the template": "import resource\ntry:\n    resource.prlimit(1, resource.RLIMIT_NOFILE, (3, 3))\n"
                               "    print('changed')\nexcept OSError:\n    print('ok')",
    "renice the template": "import os\ntry:\n    os.setpriority(os.PRIO_PROCESS, 1, 19)\n    print('changed')\n"
                           "except OSError:\n    print('ok')",
    "renice every process of the uid": "import os\ntry:\n    os.setpriority(os.PRIO_USER, 0, 19)\n"
                                       "    print('changed')\nexcept OSError:\n    print('ok')",
    "pin the template to one CPU": "import os\ntry:\n    os.sched_setaffinity(1, {0})\n    print('changed')\n"
                                   "except OSError:\n    print('ok')",
    "see the template in /proc": "import os\ntry:\n    os.stat('/proc/%d' % os.getppid())\n    print('seen')\n"
                                 "except OSError:\n    print('ok')",
}


@pytest.mark.parametrize("code", TEMPLATE_TAMPERING.values(), ids=TEMPLATE_TAMPERING.keys())
def test_a_call_cannot_tamper_with_its_template(sb, code):
    verdicts = sb.run_tests(code, [stdio("ok")] * 4)
    assert [v.kind for v in verdicts] == ["pass"] * 4, verdicts
    timing = "import os\nprint(os.getpriority(os.PRIO_PROCESS, 0), len(os.sched_getaffinity(0)) == os.cpu_count())"
    # not niced past the host's own niceness (the tests may run under `nice`), not pinned
    host_nice = os.getpriority(os.PRIO_PROCESS, 0)
    assert [v.kind for v in sb.run_tests(timing, [stdio(f"{host_nice} True")] * 4)] == ["pass"] * 4
    assert_still_works(sb)


def test_a_replaced_template_holds_no_earlier_test(sb):
    """Tests went through the worker, then its templates were killed: the new ones hold none of them."""
    token = "TEST-" + secrets.token_hex(8)
    stdin = (token + " ") * 400
    sb.run_tests("print(input()[:3])", [{"type": "stdio", "stdin": stdin, "expected_stdout": "TES"}] * 4)
    zygotes = [w.proc.pid for w in sb._pool("code").workers if w.alive()]
    killed = [t for z in zygotes for t in templates_of_zygote(z)]
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: gone(killed), "the killed templates gone")
    scan = f"NEKOT = {token[::-1]!r}\n" + PRELUDE + HEAP_SCAN + "print(result)"
    assert [v.kind for v in sb.run_tests(scan, [stdio("0")] * 4)] == ["pass"] * 4


# ---------------------------------------------------------------- 4. another reward's secrets
def test_another_rewards_variable_never_reaches_a_grader(sb):
    token = "KEY-" + secrets.token_hex(8)
    other = "def grade(sample, item):\n    return 1.0 if getenv('JUDGE_KEY') else 0.0\n"
    scan = escaped(FRAME_SCAN, token)
    heap = escaped(HEAP_SCAN, token)
    for _ in range(2):
        sb.run_grader(scan, "scan.py", {}, {})  # compiled first: the other reward's request comes after
        assert sb.run_grader(other, "judge.py", {}, {}, env={"JUDGE_KEY": token * 30}) == 1.0
    assert [sb.run_grader(scan, "scan.py", {}, {}) for _ in range(4)] == [0.0] * 4
    assert [sb.run_grader(heap, "heap.py", {}, {}) for _ in range(4)] == [0.0] * 4


# ---------------------------------------------------------------- 5. network graders
NET = ("import socket\ndef grade(sample, item):\n    try:\n        socket.create_connection(('127.0.0.1', %d), "
       "timeout=2).close()\n        return 1.0\n    except OSError:\n        return 0.0\n")


def test_a_network_grader_cannot_reach_host_loopback(sb, listener):
    assert sb.run_grader(NET % listener.port, "net.py", {}, {}, network=True) == 0.0
    assert listener.connections == 0


# ---------------------------------------------------------------- 6. forged verdicts on opaque tests
HUMANEVAL_LIKE = {"type": "assert", "code": "def check(candidate):\n    assert abs(candidate(2) - 4) < 1e-9\n"
                                            "    assert len([candidate(5)]) == 1 and candidate(5) == 10\n"
                                            "\ncheck(double)\n"}
WRONG = "def double(x):\n    return 0\n"
FORGERIES = {
    "replace exec in builtins": "import builtins\nbuiltins.exec = lambda *a, **k: None\n" + WRONG,
    "replace compile in builtins": "import builtins\n_c = builtins.compile\n"
                                   "builtins.compile = lambda s, f, m, *a, **k: _c('pass', f, m)\n" + WRONG,
    "walk frames to the nonce": "import sys, os\nf = sys._getframe()\nwhile f:\n    for v in list(f.f_locals.values()):\n"
                                "        if isinstance(v, str) and len(v) == 32:\n"
                                "            try:\n                os.write(3, v.encode())\n                os._exit(0)\n"
                                "            except OSError:\n                pass\n    f = f.f_back\n" + WRONG,
    "sys.settrace skips the assert": "import sys\ndef t(frame, event, arg):\n    if frame.f_code.co_filename == '<test>':\n"
                                     "        frame.f_lineno\n        raise SystemExit(0)\n    return t\nsys.settrace(t)\n"
                                     "sys._getframe(1).f_trace = t\n" + WRONG,
    "patch the harness module": "import sys\nfor m in list(sys.modules.values()):\n"
                                "    if getattr(m, '__name__', '').startswith('agentrl.sandbox'):\n"
                                "        for k in dir(m):\n            if k.startswith('run_') or k == '_exit_like_python':\n"
                                "                setattr(m, k, lambda *a, **kw: None)\n" + WRONG,
    "nonce from memory": "import ctypes, os, gc\nfor o in gc.get_objects():\n    if isinstance(o, dict):\n"
                         "        for v in list(o.values()):\n            if isinstance(v, str) and len(v) == 32:\n"
                         "                try:\n                    os.write(3, v.encode())\n"
                         "                except OSError:\n                    pass\n" + WRONG,
    "shadow a builtin the test uses": "def abs(x):\n    return 0\n"
                                      "def double(x):\n    return 10 if x == 5 else 0\n",
    "object that equals everything": "class E:\n    def __eq__(self, o):\n        return True\n"
                                     "def double(x):\n    return E()\n",
}


@pytest.mark.parametrize("code", FORGERIES.values(), ids=FORGERIES.keys())
def test_opaque_verdicts_cannot_be_forged(sb, code):
    [v] = sb.run_tests(code, [HUMANEVAL_LIKE])
    assert not v.passed, v
    [v] = sb.run_tests("def double(x):\n    return 2 * x\n", [HUMANEVAL_LIKE])
    assert v.passed, v


# ---------------------------------------------------------------- 7. worker errors are unscorable
def _busy_call(sb, result: dict) -> threading.Thread:
    def call():
        try:
            result["verdicts"] = sb.run_tests("import time\ntime.sleep(3)\ndef double(x):\n    return 2 * x\n",
                                              [HUMANEVAL_LIKE], timeout_per_test=10)
        except SandboxError as e:
            result["error"] = e
    t = threading.Thread(target=call)
    t.start()
    wait_until(lambda: calls_of(sb._pool("code")), "the call running in its template")
    return t


@pytest.mark.parametrize("victim", ["template", "zygote"])
def test_a_broken_worker_makes_the_call_unscorable_not_failed(sb, victim):
    from agentrl.rewards.codecheck import pass_fraction  # noqa: F401  (the coding reward maps this to Unscorable)
    pool = sb._pool("code")
    pool.ensure_started()
    result = {}
    t = _busy_call(sb, result)
    zygotes = [w.proc.pid for w in pool.workers if w.alive()]
    victims = [t_ for z in zygotes for t_ in templates_of_zygote(z)] if victim == "template" else zygotes
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    wait_until(lambda: gone(victims), "the killed processes gone")  # the idle worker's too, before the next call
    t.join()
    assert "verdicts" not in result, result
    assert result["error"].cause in ("killed", "worker_died"), result["error"]
    assert_still_works(sb)  # the broken worker was replaced


# ---------------------------------------------------------------- 8. smaller
def test_the_python_loop_is_really_the_python_loop(sb):
    """The fixture runs every test against both loops; the call's own stack says which one forked it."""
    code = ("import sys\nf = sys._getframe()\nloop = '?'\nwhile f:\n    if f.f_code.co_name == 'serve':\n"
            "        loop = 'C' if 'what' in f.f_locals else 'Python'\n    f = f.f_back\nprint(loop)")
    want = sb.isolation_report().fork_loop.reason.split(" in ", 1)[1].split()[0]
    [v] = sb.run_tests(code, [stdio(want)])
    assert v.passed, v
