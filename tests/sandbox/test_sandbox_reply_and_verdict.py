"""What a call could get past the host other than through shared state, by class (test_sandbox_shared_state.py
has the kernel state and shared inodes):

3. a reply read by the wrong caller (a reward's own settings breaking the host's wait);
4. verdicts decided in the solution's process (`assert <expr> == <literal>` with a comparison inside);
5. control-flow exceptions carried across the two processes of an opaque test;
and RestrictedPython's guards reached through operator's getters.

Each test plays the attack for real against a running sandbox and asserts that it decides nothing.
"""

from __future__ import annotations

import textwrap

import pytest

from agentrl.rewards import load_reward
from agentrl.rewards.loading import RewardConfigError
from agentrl.sandbox import SandboxError
from agentrl.sandbox import pool as pool_mod

from .conftest import assert_still_works
from .test_sandbox_shared_state import stdio


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
