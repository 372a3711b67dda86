"""Math reward: 1.0 when the final answer equals ``item.metadata.expected_answer``, else 0.0.

Start from this file with ``agentrl reward new --preset math > reward.py`` and edit it.

    item.metadata = {"expected_answer": "842 million", "tolerance": 1e-4, "partial_credit": true}
    (expected_answer may also be a list of accepted answers)
    sample.final_answer = "... so revenue was \\boxed{\\$842M}"   ->  1.0

The final answer is the last \\boxed{} (boxes side by side are one answer, a set), else what follows the last
"answer is" / "Answer:" / "####" (or "Réponse :", "答案是" ...), else the later of the last $...$ and the last
number of the last sentence that has one (agentrl/rewards/mathextract.py states the whole policy). Equal means
equal as numbers (fractions, decimals, 7% = 0.07, 1,234 = 1234 (and 10{,}000, 10,\\!000, 12,34,567), $842M =
842 million dollars, forty-two, 1.5e6, units (1.5 km = 1500 m, 12days, [45 degrees]), 8:34 P.M. = 20:34,
decimals that round the other side), as tuples, intervals, sets, vectors and matrices, as expressions or
equations that agree at signed points (i(2-i) = 1+2i), or as math_verify decides (relations, sums, the rest;
in a child process with a deadline: a timeout makes the sample unscorable, not wrong). A gold that is an option
letter ("C", "(D) Alina") is matched by the letter the response chooses, or the option's text. Rows without an
expected_answer are not applicable.

Options (keyword arguments in the config, or per row in item.metadata):
    tolerance        relative tolerance for numbers (default 1e-6)
    partial_credit   true: 0.5 for a number within a tenth of a percent or a rounding error; or the window (0.01)
    decimal_comma    true: "2,5" is 2.5 and "1.234,5" is 1234.5; false: a comma is never a decimal point;
                     unset: "2,74" and "0,111" are decimals, "1,234" is a thousand and more
    final_answer_only  true: only a \\boxed{} or an "answer is" counts; other responses have no answer
    strict_units     true: a bare number must equal the value ("842" is not "$842 million", "13.4" not "13.4%",
                     "5" not "5 cm"); default false: a bare number is read in the gold's scale, percent or unit
"""

from agentrl.rewards.mathcheck import extract_final_answer, score_answer

TOLERANCE = 1e-6  # relative; item.metadata.tolerance overrides it
SYMBOLIC_TIMEOUT = 5.0  # seconds for one symbolic comparison; past it the sample is unscorable
TIMEOUT = 30.0  # seconds for the whole grade() call


def grade(sample, item, tolerance=None, partial_credit=None, symbolic_timeout=SYMBOLIC_TIMEOUT,
          decimal_comma=None, final_answer_only=None, strict_units=None):
    metadata = item["metadata"]
    expected = metadata.get("expected_answer")
    if expected is None or expected == [] or str(expected).strip() == "":
        return None  # not a math row
    if final_answer_only is None:
        final_answer_only = metadata.get("final_answer_only", False)
    response = sample["final_answer"]
    answer = extract_final_answer(response, prompt=item.get("prompt") or "", final_only=bool(final_answer_only))
    # no answer at all is a wrong answer (unless the gold is an option letter the prose names: "B, not A")
    if tolerance is None:
        tolerance = metadata.get("tolerance", TOLERANCE)
    if partial_credit is None:
        partial_credit = metadata.get("partial_credit")
    if decimal_comma is None:
        decimal_comma = metadata.get("decimal_comma")
    if strict_units is None:
        strict_units = metadata.get("strict_units", False)
    golds = expected if isinstance(expected, list) else [expected]  # a list means "any of these"
    return max(score_answer(answer, str(gold), tolerance=tolerance, partial_credit=partial_credit,
                            timeout=symbolic_timeout, decimal_comma=decimal_comma, strict_units=bool(strict_units),
                            response=None if final_answer_only else response) for gold in golds)
