"""The coding reward on other trainers' published rows, as users download them.

tests/rewards/data/coding_peer_rows.jsonl holds rows from the peers' own repositories and published sets (the
`source` of each line names where), each with a correct and a wrong solution. Each row goes the user's way:
`agentrl data convert`'s row conversion, then the `coding` reward in the sandbox.
"""

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest
from reward_rows import sample

from agentrl.rewards import load_reward
from agentrl.rewards.errors import Unscorable
from agentrl.rewards.codelayouts import (TestLayoutError, read_suite, stdout_apps, stdout_decimal, value_equal,
                                         value_equal_apps)
from agentrl.workflow.convert import convert_row

ROWS = [json.loads(line) for line in (Path(__file__).parent / "data" / "coding_peer_rows.jsonl").open()]


def fenced(code):
    return f"Here is my solution.\n```python\n{code}\n```"


def grade(code, metadata, **options):
    reward = load_reward("coding", timeout=120, **options)
    return reward(sample(fenced(code)), {"messages": [{"role": "user", "content": "q"}], "metadata": metadata})


@pytest.mark.parametrize("case", ROWS, ids=[f"{c['layout']}: {c['name']}" for c in ROWS])
def test_peer_row_scores_its_correct_solution_1_and_its_wrong_one_below(case):
    row = convert_row(case["row"])
    assert read_suite(row["metadata"]).layout == case["layout"]
    assert row["messages"][-1]["content"].strip()
    assert grade(case["correct"], row["metadata"]) == 1.0
    assert grade(case["wrong"], row["metadata"]) < 1.0


def test_every_layout_has_peer_rows():
    from agentrl.rewards.codelayouts import LAYOUTS

    known = {name for layout in LAYOUTS for name in layout.name.split(" / ")}
    assert {c["layout"] for c in ROWS} == known


# ---------------------------------------------------------------- JSON text is never a test
TACO_JSON = json.dumps({"inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]})
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
IMPORTS_ONLY = "import sys\n"  # runs fine, prints nothing


@pytest.mark.parametrize("metadata", [{"tests": TACO_JSON}, {"input_output": TACO_JSON},
                                      {"tests": [TACO_JSON]}, {"reward_model": {"ground_truth": TACO_JSON}}],
                         ids=["deepcoder tests", "taco input_output", "json string in a list", "verl ground_truth"])
def test_json_tests_are_read_as_json_not_run_as_an_assert(metadata):
    if metadata.get("tests") == [TACO_JSON]:  # a list of strings is agentrl's assert list: JSON text is refused
        with pytest.raises(TestLayoutError, match="not Python test code"):
            read_suite(metadata)
        return
    assert grade(ADD, metadata) == 1.0
    assert grade(IMPORTS_ONLY, metadata) == 0.0  # the JSON-as-assert bug scored this 1.0


def test_unknown_layout_is_an_error_naming_the_known_ones():
    with pytest.raises(TestLayoutError, match=r"metadata.unit_tests .*Known layouts: open-r1.*taco.*mbpp"):
        read_suite({"unit_tests": [{"in": "1", "out": "2"}]})
    with pytest.raises(TestLayoutError, match="DeepCoder"):
        read_suite({"tests": {"cases": []}})
    assert read_suite({"expected_answer": "4"}) is None  # a math row: not applicable
    assert read_suite({"expected_answer": "4", "test_id": "t-7", "is_test": True}) is None
    assert read_suite({"reward_model": {"ground_truth": "42"}}) is None  # a verl math row


# ---------------------------------------------------------------- the harnesses' rules, one by one
def test_the_harness_imports_are_given_and_the_sandbox_flags_are_not():
    """TACO/APPS and LiveCodeBench give the code `defaultdict`, `List`; agentrl's own layout gives nothing, and
    the sandbox module's `from __future__ import annotations` does not leak into the code."""
    code = "def f(xs: List[int]) -> int:\n    d = defaultdict(int)\n    for x in xs:\n        d[x] += 1\n    return len(d)\n"
    taco = {"input_output": json.dumps({"fn_name": "f", "inputs": [[[1, 1, 2]]], "outputs": [[2]]})}
    assert grade(code, taco) == 1.0
    assert grade(code, {"tests": [{"type": "assert", "code": "assert f([1, 1, 2]) == 2"}]}) == 0.0  # NameError: List


def test_a_tuple_equals_the_json_list():
    code = "def pair(a, b):\n    return (b, a)\n"
    assert grade(code, {"input_output": json.dumps({"fn_name": "pair", "inputs": [[1, 2]], "outputs": [[[2, 1]]]})}) == 1.0
    assert value_equal((1, [2, (3,)]), [1, [2, [3]]]) and not value_equal((1, 2), [2, 1])
    assert value_equal_apps(5, [5]) and not value_equal_apps(5, [5, 5])


def test_floats_within_apps_tolerance_and_lcb_decimals():
    apps = {"input_output": json.dumps({"inputs": ["3\n"], "outputs": ["0.333333\n"]})}
    assert grade("print(1 / int(input()))", apps) == 1.0  # 0.3333333333333333 against 0.333333
    assert grade("print(0.3334)", apps) == 0.0
    assert stdout_apps("1.0000001 2\n", "1.0 2") and not stdout_apps("1.1 2", "1 2") and not stdout_apps("1 2\n3", "1 2")
    assert not stdout_apps("1.0000001 2\n", "1 2")  # an expected integer is matched exactly
    assert stdout_decimal("2.50\n", "2.5") and not stdout_decimal("0.3333333", "0.333333")


def test_mbpp_setup_code_runs_in_the_solutions_process():
    """The setup defines a name the solution reads when the test calls it. (A test that builds objects of the
    setup's or the code's classes, `area(Square(3))`, is not a plain call with literal arguments: the sandbox
    runs it in a process of its own, where those classes do not exist; see the README's coding section.)"""
    row = {"test_list": ["assert area(3) == 9", "assert area(2) == 4"],
           "test_setup_code": "SIDES_PER_SQUARE = 4\n", "text": "area of a square"}
    ok = "def area(side):\n    return side * side * SIDES_PER_SQUARE // 4\n"
    assert grade(ok, row) == 1.0
    assert grade(ok.replace("side * side", "4 * side"), row) == 0.0


def test_a_leetcode_solution_method_is_called():
    tests = {"livecodebench": {"public_test_cases": json.dumps([{"input": "[1, 2]\n3", "output": "true",
                                                                  "testtype": "functional"}]),
                               "metadata": json.dumps({"func_name": "hasSum"})},
             "humaneval": {"test": "def check(candidate):\n    assert candidate([1, 2], 3) is True\n",
                           "entry_point": "Solution().hasSum"}}
    code = "class Solution:\n    def hasSum(self, nums, target):\n        return sum(nums) == target\n"
    for metadata in tests.values():
        assert grade(code, metadata) == 1.0
        assert grade(code.replace("==", "!="), metadata) == 0.0


def test_the_time_limit_is_per_test():
    slow = "import time\ntime.sleep(float(input()))\nprint('ok')\n"
    rows = {"open-r1": {"verification_info": {"language": "python", "test_cases": [
        {"input": "0", "output": "ok", "type": "stdin_stdout"}, {"input": "30", "output": "ok", "type": "stdin_stdout"}]}}}
    assert read_suite(rows["open-r1"]).timeout == 5.0
    assert grade(slow, rows["open-r1"], timeout_per_test=1.0) == 0.5


def test_lcb_private_tests_never_unpickle_code():
    class Evil:
        def __reduce__(self):
            return (print, ("ran",))
    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(TestLayoutError, match="refusing to load builtins.print"):
        read_suite({"private_test_cases": blob})


def test_kodcode_fixture_tests_are_refused_and_parametrize_is_expanded():
    with pytest.raises(TestLayoutError, match="fixtures"):
        read_suite({"test": "from solution import f\n\ndef test_f(tmp_path):\n    assert f(tmp_path)\n"})
    test = ("import pytest\nfrom solution import double\n\n@pytest.mark.parametrize('x, y', [(1, 2), (3, 6)])\n"
            "def test_double(x, y):\n    assert double(x) == y\n\ndef test_raises():\n    with pytest.raises(TypeError):\n"
            "        double(None)\n")
    assert len(read_suite({"test": test}).tests) == 2
    assert grade("def double(x):\n    return 2 * x\n", {"test": test}) == 1.0
    assert grade("def double(x):\n    return x + 1 if x else 2 * x\n", {"test": test}) == 0.5


def test_the_codes_own_future_import_stays_first_before_the_harness_imports():
    code = "from __future__ import annotations\n\ndef f(x: Undefined) -> int:\n    return x + 1\n"
    taco = {"input_output": json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [[2]]})}
    assert read_suite(taco).program(code).startswith("from __future__ import annotations\n")
    assert grade(code, taco) == 1.0  # its own __future__ import: the annotation is never evaluated


def test_only_the_harness_imports_the_code_names_reach_its_process():
    """Each import of a harness costs time in every test's process: one that binds no name of the code is left
    out (it cannot change what the code does)."""
    suite = read_suite({"public_test_cases": json.dumps([{"input": "1", "output": "1", "testtype": "stdin"}])})
    program = suite.program("d = defaultdict(int)\nprint(sqrt(4))\n")
    assert "from collections import *" in program and "from math import *" in program
    assert "from statistics import *" not in program and "import numpy" not in program
    taco = read_suite({"input_output": json.dumps({"inputs": ["1"], "outputs": ["1"]})})
    assert "import numpy as np" in taco.program("print(np.zeros(1))") and "numpy" not in taco.program("print(1)")


def test_leetcodedataset_and_mbpp_plus_rows_are_read_by_their_test_and_entry_point():
    """LeetCodeDataset rows also hold `input_output` as a list of strings ("nums = [...]"), MBPP+ rows also
    hold `test_list`: their harnesses run `test` with `entry_point`."""
    leet = {"entry_point": "Solution().twoSum", "prompt": "from typing import *\n\nclass ListNode:\n    pass\n",
            "input_output": [{"input": "nums = [2,7,11,15], target = 9", "output": "[0, 1]"}],
            "test": "def check(candidate):\n    assert candidate(nums = [2,7,11,15], target = 9) == [0, 1]\n"
                    "    assert candidate(nums = [3,3], target = 6) == [0, 1]\n"}
    two_sum = ("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        seen = {}\n"
               "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
               "                return [seen[target - x], i]\n            seen[x] = i\n")
    assert read_suite(leet).layout == "humaneval"
    assert grade(two_sum, leet) == 1.0 and grade(two_sum.replace("[seen[target - x], i]", "[i, seen[target - x]]"), leet) == 0.0
    plus = {"entry_point": "area", "test_imports": ["import math"], "test_list": ["assert area(2) == 4"],
            "test": "inputs = [[2], [3]]\nresults = [4, 9]\nfor inp, exp in zip(inputs, results):\n"
                    "    assert math.isclose(area(*inp), exp)\n"}
    assert read_suite(plus).layout == "humaneval"
    assert grade("def area(x):\n    return math.pow(x, 2)\n", plus) == 1.0
    assert grade("def area(x):\n    return 2 * x\n", plus) == 0.0


def test_a_test_with_its_own_comparison_must_be_a_plain_call():
    """A test's `equal` is applied on the trusted side to the value a plain call returned; a test the sandbox
    would judge in its two-process form could not honour it, so it is refused rather than judged with `==`."""
    from agentrl.sandbox import Sandbox, SandboxError

    box = Sandbox(size=1)
    try:
        with pytest.raises(SandboxError, match="its own `equal`"):
            box.run_tests("def f(x):\n    return x\n", [{"type": "assert", "code": "assert f(g(1)) == 1",
                                                           "equal": lambda a, b: True}])
        ok = box.run_tests("def f(x):\n    return (x,)\n", [{"type": "assert", "code": "assert f(1) == [1]",
                                                             "equal": lambda a, b: list(a) == b}])
        assert [v.passed for v in ok] == [True]
    finally:
        box.close()


# ---------------------------------------------------------------- peer layouts read as their harness reads them
KODCODE = next(c for c in ROWS if c["layout"] == "kodcode")


@pytest.mark.parametrize("key", ["tests", "ground_truth", "reward_model"])
def test_rllm_kodcode_rows_run_their_pytest_file_test_by_test(key):
    """rLLM keeps a KodCode row's pytest file as its ground truth (or `tests`): each test function is a test, so
    the correct solution scores 1 (read as one opaque assert it scored 0, or the row went unscored)."""
    src = KODCODE["row"]["test"]
    metadata = {"reward_model": {"ground_truth": src}} if key == "reward_model" else {key: src, "data_source": "kodcode"}
    suite = read_suite(metadata)
    assert suite.layout == "kodcode" and len(suite.tests) == src.count("\ndef test"), suite
    assert grade(KODCODE["correct"], metadata) == 1.0
    assert grade(KODCODE["wrong"], metadata) < 1.0


def test_evalplus_rows_with_base_and_plus_inputs_are_refused_naming_the_known_layouts():
    """EvalPlus computes expected outputs from the canonical solution; a row that only has the inputs is never
    silently unscored (None): the error says what the row has and which layouts are known."""
    row = {"task_id": "HumanEval/0", "prompt": "def double(x):\n", "entry_point": "double",
           "canonical_solution": "    return 2 * x\n", "base_input": [[1], [2]], "plus_input": [[10**6]], "atol": 0}
    with pytest.raises(TestLayoutError, match=r"base_input/plus_input.*Known layouts: open-r1"):
        read_suite(row)
    with pytest.raises(Unscorable, match="base_input/plus_input"):  # the reward says why, for every rollout
        grade("def double(x):\n    return 2 * x\n", row)
