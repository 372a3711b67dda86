"""Math reward: 1.0 when the final answer equals ``item.metadata.expected_answer``, else 0.0.

Start from this file with ``agentrl reward new --preset math > reward.py`` and edit it.

    item.metadata = {"expected_answer": "842 million", "tolerance": 1e-4, "partial_credit": 0.1}
    (expected_answer may also be a list of accepted answers)
    sample.final_answer = "... so revenue was \\boxed{\\$842M}"   ->  1.0

The final answer is the last \\boxed{}, else what follows "answer is" / "Answer:", else the last number
of the last line (a bare list of numbers counts as no answer). Equal means equal as numbers (fractions,
decimals, 7% = 0.07, 1,234 = 1234, $842M = 842 million dollars, 1.5e6, units dropped), as tuples,
intervals and sets, or symbolically via math_verify + sympy (checked in a child process with a deadline;
a timeout makes the sample unscorable, not wrong). Rows without an expected_answer are not applicable.
"""

from agentrl.rewards.mathcheck import extract_final_answer, score_answer

TOLERANCE = 1e-6  # relative; item.metadata.tolerance overrides it
SYMBOLIC_TIMEOUT = 5.0  # seconds for one symbolic comparison; past it the sample is unscorable
TIMEOUT = 30.0  # seconds for the whole grade() call


def grade(sample, item, tolerance=None, partial_credit=None, symbolic_timeout=SYMBOLIC_TIMEOUT):
    metadata = item["metadata"]
    expected = metadata.get("expected_answer")
    if expected is None or expected == [] or str(expected).strip() == "":
        return None  # not a math row
    answer = extract_final_answer(sample["final_answer"], prompt=item.get("prompt") or "")
    if answer is None:
        return 0.0  # no answer at all is a wrong answer
    if tolerance is None:
        tolerance = metadata.get("tolerance", TOLERANCE)
    if partial_credit is None:
        # partial_credit: true (within 10%) or a relative window such as 0.05; a near miss earns up to 0.5
        partial_credit = metadata.get("partial_credit")
    golds = expected if isinstance(expected, list) else [expected]  # a list means "any of these"
    return max(score_answer(answer, str(gold), tolerance=tolerance, partial_credit=partial_credit,
                            timeout=symbolic_timeout) for gold in golds)
