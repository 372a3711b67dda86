"""Coding reward: the fraction of the row's tests that the response's code passes.

Start from this file with ``agentrl reward new --preset coding > reward.py`` and edit it.

    item.metadata = {"tests": [
        {"type": "assert", "code": "assert add(2, 3) == 5"},
        {"type": "stdio", "stdin": "2 3\\n", "expected_stdout": "5\\n"},
    ]}

Rows from other trainers' datasets are read as they come, in their own layout, with their own harness's
rules (agentrl/rewards/codelayouts.py): DeepCoder's ``tests`` (JSON text), TACO/APPS ``input_output``,
LiveCodeBench ``public_test_cases``/``private_test_cases``, verl's ``reward_model.ground_truth``, MBPP
``test_list``, HumanEval/EvalPlus ``test`` + ``entry_point``, AceCoder ``test_cases``, KodCode's pytest ``test``,
open-r1 ``verification_info``. A row with test fields in no known layout is an error that lists them.

The code is the last ```python fenced block of the final answer (else the whole answer). Tests run in
the sandbox and each verdict is decided outside it: printing "PASSED" or calling exit() early fails.
Rows without tests are not applicable. A sandbox failure makes the sample unscorable, not wrong.
"""

from agentrl.rewards.codecheck import extract_code, pass_fraction
from agentrl.rewards.codelayouts import read_suite

RUNS_MODEL_CODE = True  # `agentrl train` refuses to start if the sandbox's isolation here is too weak for it


def grade(sample, item, timeout_per_test=None):
    suite = read_suite(item["metadata"])  # which layout, its tests, the imports and time limit its harness gives
    if suite is None:
        return None  # not a coding row
    code = extract_code(sample["final_answer"])
    if not code.strip():
        return 0.0
    return pass_fraction(suite.program(code), suite.tests, timeout_per_test or suite.timeout)
