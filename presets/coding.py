"""Coding reward: the fraction of ``item.metadata.tests`` that the response's code passes.

Start from this file with ``agentrl reward new --preset coding > reward.py`` and edit it.

    item.metadata = {"tests": [
        {"type": "assert", "code": "assert add(2, 3) == 5"},
        {"type": "stdio", "stdin": "2 3\\n", "expected_stdout": "5\\n"},
    ]}

The code is the last ```python fenced block of the final answer (else the whole answer). Tests run in
the sandbox and each verdict is decided outside it: printing "PASSED" or calling exit() early fails.
Rows without tests are not applicable. A sandbox failure makes the sample unscorable, not wrong.
"""

from agentrl.rewards.codecheck import extract_code, normalise_tests, pass_fraction

TIMEOUT_PER_TEST = 5.0  # seconds
RUNS_MODEL_CODE = True  # `agentrl train` refuses to start if the sandbox's isolation here is too weak for it


def grade(sample, item, timeout_per_test=TIMEOUT_PER_TEST):
    tests = item["metadata"].get("tests")
    if not tests:
        return None  # not a coding row
    code = extract_code(sample["final_answer"])
    return pass_fraction(code, normalise_tests(tests), timeout_per_test)
