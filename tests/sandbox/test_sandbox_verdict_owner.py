"""Model output decides a test's verdict, never whether it can be scored.

Whatever the code prints, returns or puts in a tool call, the test passes or fails: an exception in the host's
comparison, a number the tolerance was not meant for, or a NaN in the sample are the output's, not the sandbox's.
"""

import json
import os
from decimal import Decimal

from agentrl.rewards.codelayouts import stdout_apps, stdout_decimal, value_equal

from .conftest import assert_still_works, templates_of_zygote


def stdio(expected: str, equal) -> dict:
    return {"type": "stdio", "stdin": "", "expected_stdout": expected, "equal": equal}


def test_a_signalling_nan_printed_fails_the_test(sb):
    """Decimal('sNaN') raises when compared: LiveCodeBench / rLLM's decimal comparison must fail it."""
    for printed in ("sNaN", "NaN", "-sNaN123", "Infinity", "1 sNaN"):
        [v] = sb.run_tests(f"print({printed!r})", [stdio("1\n" if " " not in printed else "1 2\n", stdout_decimal)])
        assert (v.passed, v.kind) == (False, "fail"), (printed, v)
    [v] = sb.run_tests("print('2.50')", [stdio("2.5\n", stdout_decimal)])
    assert v.passed, v
    assert_still_works(sb)


def test_an_exception_in_the_hosts_comparison_is_the_outputs_failure(sb):
    def raising(got, expected):
        return Decimal(str(got)) == Decimal("sNaN")  # InvalidOperation on every output

    [a, b] = sb.run_tests("def f():\n    return 3\nprint(3)\n",
                          [{"type": "assert", "code": "assert f() == 3", "equal": raising}, stdio("3\n", raising)])
    for v in (a, b):
        assert (v.passed, v.kind) == (False, "fail") and "InvalidOperation" in v.detail, v
    [v] = sb.run_tests("def f():\n    return [3]\n", [{"type": "assert", "code": "assert f() == [3]", "equal": value_equal}])
    assert v.passed, v


def test_integers_are_compared_exactly_under_the_apps_tolerance(sb):
    """TACO/APPS stdin: n*n//2 against n*(n+1)//2 differs by n/2, within 1e-5 of the answer for n = 10**5."""
    n = 10**5
    want = f"{n * (n + 1) // 2}\n"
    wrong, right = f"n = {n}\nprint(n * n // 2)", f"n = {n}\nprint(n * (n + 1) // 2)"
    [bad, good] = sb.run_tests(wrong, [stdio(want, stdout_apps)]) + sb.run_tests(right, [stdio(want, stdout_apps)])
    assert (bad.passed, good.passed) == (False, True), (bad, good)
    assert stdout_apps("7.0\n", "7") and stdout_apps("007", "7") and not stdout_apps("1e9", "1000000001")
    assert stdout_apps("0.3333333333", "0.333333") and not stdout_apps("9" * 5000, "9" * 4999 + "8")


def test_a_nan_in_a_tool_call_argument_leaves_graders_scorable(sb):
    """`json.loads` accepts NaN in a tool call's arguments; the grader gets the sample as the host has it."""
    arguments = json.loads('{"x": NaN, "y": Infinity}')
    sample = {"final_answer": "4", "trajectory": [{"name": "calc", "arguments": arguments}]}
    grader = ("def grade(sample, item):\n    x = sample['trajectory'][0]['arguments']['x']\n"
              "    return 1.0 if x != x and sample.final_answer == item['answer'] else 0.0\n")
    assert sb.run_grader(grader, "nan.py", sample, {"answer": "4"}) == 1.0


# Pages written into a memfd are charged to the memory cgroup but show in no process's RSS: the OOM killer
# would choose the largest RSS in the cgroup, which was the template's when it shared the calls' cgroup.
FILL_MEMFD = """import os
block = b"x" * (1 << 20)
fds = [os.memfd_create("fill") for _ in range(8)]  # 8 x 32 MiB: each under the file-size limit
for fd in fds:
    for _ in range(32):
        os.write(fd, block)
print("survived")
"""


def test_an_oom_the_call_causes_is_its_failure_and_the_template_lives(sb):
    if not sb.isolation_report().cgroups.ok:
        import pytest
        pytest.skip("no memory cgroup here (not root, or no cgroup v1 memory controller)")
    for _ in range(2):  # the second call is served as well: the template survived the first
        [v] = sb.run_tests(FILL_MEMFD, [{"type": "stdio", "stdin": "", "expected_stdout": "survived\n"}],
                           memory_mb=128)
        assert (v.passed, v.kind) == (False, "error") and "memory limit" in v.detail, v
    [v] = sb.run_tests("print('survived')", [{"type": "stdio", "stdin": "", "expected_stdout": "survived\n"}],
                       memory_mb=128)
    assert v.passed, v
    assert_still_works(sb)



def _memory_cgroup(pid: int | str) -> str:
    text = open(f"/proc/{pid}/cgroup").read()
    return next(line.split(":", 2)[2] for line in text.splitlines() if "memory" in line.split(":")[1].split(","))


def test_the_oom_kill_happens_in_a_cgroup_the_template_is_not_in(sb):
    """The OOM killer chooses among the processes of the cgroup that reached its limit: the call's only."""
    from agentrl.sandbox import cgroup

    base, why = cgroup.find_base()
    if base is None or not sb.isolation_report().cgroups.ok:
        import pytest
        pytest.skip(f"no memory cgroup here: {why}")
    mount = base[: len(base) - len(_memory_cgroup("self"))]
    [v] = sb.run_tests(FILL_MEMFD, [stdio("survived\n", None)], memory_mb=128)
    assert "memory limit" in v.detail, v
    zygotes = {w.proc.pid for pool in sb._pools.values() for w in pool.workers if w.alive()}
    killed_in = []
    for template in (t for z in zygotes for t in templates_of_zygote(z)):
        top = mount + _memory_cgroup(template)
        for below in (d for d, _, _ in os.walk(top) if d != top):
            kills = dict(line.split() for line in open(f"{below}/memory.oom_control")).get("oom_kill", "0")
            procs = open(f"{below}/cgroup.procs").read().split()
            if int(kills) > 0 and str(template) not in procs:
                killed_in.append(below)
    assert killed_in, "no OOM kill in a cgroup below a template's"
