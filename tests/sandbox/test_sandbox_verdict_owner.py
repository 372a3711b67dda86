"""Model output decides a test's verdict, never whether it can be scored.

Whatever the code prints, returns or puts in a tool call, the test passes or fails: an exception in the host's
comparison, a number the tolerance was not meant for, or a NaN in the sample are the output's, not the sandbox's.
"""

import json
from decimal import Decimal

from agentrl.rewards.codelayouts import stdout_apps, stdout_decimal, value_equal

from .conftest import assert_still_works


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
