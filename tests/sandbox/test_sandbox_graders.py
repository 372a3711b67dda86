"""Catalogue of hostile or broken graders, each with its expected outcome (RestrictedPython + OS isolation)."""

import math
import os
import sys

import pytest

from agentrl.sandbox import GraderCodeError, SandboxError

from .conftest import NORMAL_GRADER, REPO, assert_still_works, templates_of_zygote


def g(body: str, header: str = "") -> str:
    """A grader whose grade() body is `body` (indented here)."""
    lines = "\n".join("    " + line for line in body.splitlines())
    return f"{header}\ndef grade(sample, item):\n{lines}\n"


# (id, source, kwargs, expected) where expected is ("value", x) | ("compile", text) | ("exception", text)
# | ("sandbox", cause or tuple of causes)
CASES = [
    # --- escapes through the policy layer
    ("subclasses walk", g("return len(().__class__.__bases__[0].__subclasses__())"), {}, ("compile", "starts with \"_\"")),
    ("underscore name", g("_secret = 1\nreturn 1.0"), {}, ("compile", "line 3")),
    ("getattr underscore", g("return getattr(sample, '__class__')"), {}, ("exception", "")),
    ("format string leak", g("return '{0.__class__}'.format(sample)"), {}, ("exception", "format")),
    ("import os", g("import os\nreturn 1.0"), {}, ("exception", "import of 'os' is not allowed")),
    ("import subprocess", g("import subprocess\nreturn 1.0"), {}, ("exception", "not allowed")),
    ("module attribute to sys", g("import typing\nreturn typing.sys.modules"), {}, ("exception", "not available")),
    ("eval", g("return eval('1')"), {}, ("compile", "Eval calls")),
    ("exec", g("exec('x=1')\nreturn 1.0"), {}, ("compile", "Exec calls")),
    ("write mode open", g("open('/tmp/x', 'w')\nreturn 1.0"), {}, ("exception", "only open files for reading")),
    # --- reading secrets and files
    ("read /etc/shadow", g("return len(open('/etc/shadow').read())"), {}, ("exception", "PermissionError")),
    # the checkout may sit under /tmp (covered: not found) or elsewhere (Landlock: permission denied)
    ("read repo file", g(f"try:\n    open({str(REPO / 'pyproject.toml')!r}).read()\n    return 1.0\nexcept OSError:\n"
                         "    return 0.0"), {}, ("value", 0.0)),
    ("read root home", g("return len(open('/root/.bashrc').read())"), {}, ("exception", "Error")),
    ("parent env var invisible", g("return 1.0 if getenv('OPENAI_API_KEY') is None else 0.0"), {}, ("value", 1.0)),
    ("declared env var visible", g("return 1.0 if getenv('MY_TOKEN') == 'abc' else 0.0"),
     {"env": {"MY_TOKEN": "abc"}}, ("value", 1.0)),
    # --- resource exhaustion
    ("infinite loop", g("while True:\n    pass"), {"timeout": 1.0}, ("sandbox", "timeout")),
    ("C-level loop", g("import itertools\nreturn sum(itertools.repeat(1, 10**12))"), {"timeout": 1.0},
     ("sandbox", "timeout")),
    ("memory bomb", g("x = 'a' * (8 * 1024 ** 3)\nreturn 1.0"), {"memory_mb": 256}, ("sandbox", "memory")),
    ("list memory bomb", g("x = [1] * (10 ** 10)\nreturn 1.0"), {"memory_mb": 256}, ("sandbox", "memory")),
    # bounded by a count, not a clock: the same outcome on an idle and on a busy machine
    ("print spam", g("while True:\n    print('x' * 100000)"), {"timeout": 2.0, "memory_mb": 256},
     ("exception", "printed more than")),
    ("10**7 printed lines", g("for n in range(10 ** 7):\n    print(n)\nreturn 1.0"), {"timeout": 30.0},
     ("exception", "printed more than")),
    ("print spam that catches everything", g("for n in range(10 ** 7):\n    try:\n        print(n)\n"
                                             "    except BaseException:\n        pass\nreturn 1.0"), {"timeout": 30.0},
     ("exception", "printed more than")),
    ("deep recursion", g("return grade(sample, item)"), {}, ("exception", "RecursionError")),
    # --- hostile return values
    ("nan", g("return float('nan')"), {}, ("sandbox", "invalid_result")),
    ("inf", g("return float('inf')"), {}, ("sandbox", "invalid_result")),
    ("-inf", g("return -float('inf')"), {}, ("sandbox", "invalid_result")),
    ("huge float", g("return 1e308"), {}, ("sandbox", "invalid_result")),
    ("huge int", g("return 10 ** 400"), {}, ("sandbox", "invalid_result")),
    ("string number", g("return '1.0'"), {}, ("sandbox", "invalid_result")),
    ("list", g("return [1.0]"), {}, ("sandbox", "invalid_result")),
    ("dict", g("return {'score': 1.0}"), {}, ("sandbox", "invalid_result")),
    ("dunder methods refused", g("return Score()", "class Score:\n    def __float__(self):\n        return 1.0\n"), {},
     ("compile", "line 2")),
    ("plain object", g("return Score()", "class Score:\n    value = 1.0\n"), {}, ("sandbox", "invalid_result")),
    ("float subclass", g("return F(0.5)", "class F(float):\n    pass\n"), {}, ("sandbox", "invalid_result")),
    ("sympy expression", g("return sympy.Symbol('x')", "import sympy"), {}, ("sandbox", "invalid_result")),
    ("sympy rational", g("return sympy.Rational(1, 2)", "import sympy"), {}, ("value", 0.5)),
    ("numpy float64", g("return numpy.float64(0.25)", "import numpy"), {}, ("value", 0.25)),
    ("numpy nan", g("return numpy.float64('nan')", "import numpy"), {}, ("sandbox", "invalid_result")),
    ("True counts as 1", g("return True"), {}, ("value", 1.0)),
    ("False counts as 0", g("return 1 == 2"), {}, ("value", 0.0)),
    ("int", g("return 3"), {}, ("value", 3.0)),
    ("negative float", g("return -0.5"), {}, ("value", -0.5)),
    ("None = not applicable", g("return None"), {}, ("value", None)),
    # --- broken graders
    ("exception in grade", g("x = 1\nreturn x / 0"), {}, ("exception", "ZeroDivisionError")),
    ("SystemExit", g("raise SystemExit(0)"), {}, ("exception", "SystemExit")),
    ("no grade function", "def score(sample, item):\n    return 1.0\n", {}, ("exception", "defines no function `grade`")),
    ("syntax error", "def grade(sample, item)\n    return 1.0\n", {}, ("compile", "line 1")),
    ("too large", "x = 1\n" * 60000 + g("return 1.0"), {}, ("compile", "larger than")),
]


@pytest.mark.parametrize("source,kwargs,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_grader_catalogue(sb, source, kwargs, expected):
    kind, want = expected
    sample, item = {"final_answer": "4"}, {"answer": "4"}
    if kind == "value":
        got = sb.run_grader(source, "attack.py", sample, item, **kwargs)
        if want is None:
            assert got is None
        else:
            assert isinstance(got, float) and math.isfinite(got) and got == want
    elif kind in ("compile", "exception"):
        with pytest.raises(GraderCodeError) as err:
            sb.run_grader(source, "attack.py", sample, item, **kwargs)
        assert err.value.cause == kind, err.value
        assert want in str(err.value)
        assert "attack.py" in str(err.value)
    else:
        with pytest.raises(SandboxError) as err:
            sb.run_grader(source, "attack.py", sample, item, **kwargs)
        assert not isinstance(err.value, GraderCodeError), err.value
        causes = want if isinstance(want, tuple) else (want,)
        assert err.value.cause in causes, err.value
    assert_still_works(sb)


def test_exception_names_user_line(sb):
    src = "def helper(x):\n    return x['missing']\n\ndef grade(sample, item):\n    return helper(item)\n"
    with pytest.raises(GraderCodeError) as err:
        sb.run_grader(src, "my_reward.py", {}, {})
    text = str(err.value)
    assert 'my_reward.py", line 5, in grade: return helper(item)' in text
    assert 'line 2, in helper' in text and "KeyError" in text


def test_declared_read_path(sb, tmp_path):
    ref = tmp_path / "answers.txt"
    ref.write_text("42")
    tmp_path.chmod(0o755)  # declared paths must be readable by others; their parents need not be
    src = g(f"return float(open({str(ref)!r}).read())")
    with pytest.raises(GraderCodeError):  # not declared: denied
        sb.run_grader(src, "r.py", {}, {})
    assert sb.run_grader(src, "r.py", {}, {}, read_paths=[str(tmp_path)]) == 42.0


def test_state_does_not_leak_between_calls(sb):
    poison = g("import math\nmath.pi = 3\nreturn 1.0")
    try:
        sb.run_grader(poison, "p.py", {}, {})
    except GraderCodeError:
        pass  # the write guard may refuse it; either way the next call must see the real value
    assert sb.run_grader(g("import math\nreturn math.pi"), "q.py", {}, {}) == math.pi


def test_mutating_inputs_is_private(sb):
    src = g("item['answer'] = 'changed'\nsample.final_answer = 'x'\nreturn 1.0")
    item = {"answer": "4"}
    assert sb.run_grader(src, "m.py", {"final_answer": "4"}, item) == 1.0
    assert item == {"answer": "4"}


def test_heavy_modules_available(sb):
    src = ("import sympy\nfrom math_verify import parse, verify\n"
           "def grade(sample, item):\n"
           "    ok = verify(parse(item['answer']), parse(sample.final_answer))\n"
           "    return 1.0 if ok and sympy.simplify('x - x') == 0 else 0.0\n")
    assert sb.run_grader(src, "mv.py", {"final_answer": "$\\frac{1}{2}$"}, {"answer": "$0.5$"}) == 1.0


NET_GRADER = ("import urllib.request\n"
              "def grade(sample, item):\n"
              "    try:\n"
              "        urllib.request.urlopen('http://127.0.0.1:%d/', timeout=2)\n"
              "    except Exception as e:\n"
              "        return 0.0 if 'refused' in str(e) or 'unreachable' in str(e) else 0.5\n"
              "    return 1.0\n")


def test_network_off_by_default(sb, listener):
    with pytest.raises(GraderCodeError) as err:
        sb.run_grader(NET_GRADER % listener.port, "net.py", {}, {})
    assert "network=True" in str(err.value)
    assert listener.connections == 0


def test_network_when_declared_goes_through_the_proxy_that_refuses_the_host(sb, listener):
    """A network grader's namespace has only its own loopback and the proxy: the host's 127.0.0.1 and its other
    addresses are refused (403), whether asked for by address or by name."""
    src = ("import urllib.request\n"
           "def grade(sample, item):\n"
           "    codes = []\n"
           "    for host in ('127.0.0.1', 'localhost'):\n"
           "        try:\n"
           "            urllib.request.urlopen('http://%s:%d/' % (host, item['port']), timeout=5)\n"
           "            codes.append(200)\n"
           "        except Exception as e:\n"
           "            codes.append(403 if '403' in str(e) else 0)\n"
           "    return 1.0 if codes == [403, 403] and getenv('X') is None else 0.0\n")
    assert sb.run_grader(src, "net.py", {}, {"port": listener.port}, network=True, timeout=20) == 1.0
    assert listener.connections == 0
    assert_still_works(sb)


def test_the_proxy_relays_to_allowed_addresses(monkeypatch, listener):
    """The relay itself, in this process over real sockets (no public address can be reached from here, so
    the policy is widened for this test only): CONNECT to the listener, bytes both ways."""
    import socket
    import threading
    from agentrl.sandbox import netproxy

    monkeypatch.setattr(netproxy, "allowed", lambda address, own: True)
    client, server = socket.socketpair()
    t = threading.Thread(target=netproxy._handle, args=(server, set()), daemon=True)
    t.start()
    client.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n" % listener.port)
    assert client.recv(100).startswith(b"HTTP/1.1 200")
    client.close()
    t.join(5)
    import time
    deadline = time.monotonic() + 5
    while listener.connections < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert listener.connections == 1


def test_the_proxy_policy():
    from agentrl.sandbox.netproxy import allowed, host_addresses

    own = host_addresses()
    assert "127.0.0.1" in own
    for bad in ["127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
                "0.0.0.0", "::", "::ffff:127.0.0.1", "fe80::1", "224.0.0.1", "not an address", *own]:
        assert not allowed(bad, own), bad
    for good in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"]:
        assert allowed(good, own - {good}), good


def _agentrl_pkg() -> list[str]:
    import agentrl
    return [os.path.dirname(os.path.realpath(agentrl.__file__))]


def test_reward_helpers_importable_other_agentrl_modules_not(sb):
    ok = ("from agentrl.rewards.mathcheck import extract_final_answer\n"
          "def grade(sample, item):\n"
          "    return 1.0 if extract_final_answer(sample.final_answer) == '7' else 0.0\n")
    assert sb.run_grader(ok, "helpers.py", {"final_answer": "\\boxed{7}"}, {}, read_paths=_agentrl_pkg()) == 1.0
    for bad in ("import agentrl.sandbox", "from agentrl import sandbox", "import agentrl.plugins"):
        with pytest.raises(GraderCodeError) as err:
            sb.run_grader(bad + "\ndef grade(sample, item):\n    return 1.0\n", "bad.py", {}, {},
                          read_paths=_agentrl_pkg())
        assert "not allowed" in str(err.value)


def test_math_preset_file_runs_in_the_sandbox(sb):
    src = open(os.path.join(os.path.dirname(os.path.realpath(__import__("agentrl").__file__)), "..", "presets",
                            "math.py")).read()
    sample, item = {"final_answer": "so \\boxed{\\frac{1}{2}}"}, {"metadata": {"expected_answer": "0.5"}}
    assert sb.run_grader(src, "math.py", sample, item, read_paths=_agentrl_pkg(), timeout=30) == 1.0


def test_nested_sandbox_is_a_clear_error(sb):
    src = ("from agentrl.rewards.codecheck import run_tests\n"
           "def grade(sample, item):\n"
           "    return float(len(run_tests('x = 1', [{'type': 'stdio', 'stdin': '', 'expected_stdout': ''}])))\n")
    with pytest.raises(GraderCodeError) as err:
        sb.run_grader(src, "nested.py", {}, {}, read_paths=_agentrl_pkg())
    assert "nested" in str(err.value)


def test_declaring_an_already_readable_path_reuses_the_first_template(tmp_path):
    """The template without declared paths starts before any call's data is read. Declaring paths that the
    base allow-list already grants (agentrl's own folders, the interpreter's) must not fork another one;
    a path it does not grant must."""
    import agentrl
    from agentrl.sandbox import Sandbox

    box = Sandbox(size=1)
    try:
        sample, item = {"final_answer": "4"}, {"answer": "4"}
        assert box.run_grader(NORMAL_GRADER, "k.py", sample, item) == 1.0
        [zygote] = [w.proc.pid for w in box._pools[("grader", False)].workers]

        def templates() -> list[int]:
            return templates_of_zygote(zygote)

        first = templates()
        assert len(first) == 1
        covered = [os.path.dirname(agentrl.__file__), os.path.join(sys.prefix, "lib")]
        assert box.run_grader(NORMAL_GRADER, "k.py", sample, item, read_paths=covered) == 1.0
        assert box.run_grader(NORMAL_GRADER, "k.py", sample, item, read_paths=covered[::-1]) == 1.0
        assert templates() == first
        tmp_path.chmod(0o755)
        assert box.run_grader(NORMAL_GRADER, "k.py", sample, item, read_paths=[str(tmp_path)]) == 1.0
        assert len(templates()) == 2 and first[0] in templates()
    finally:
        box.close()
