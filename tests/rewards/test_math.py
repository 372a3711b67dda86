"""The math preset: extraction, equivalence, and answers crafted to fool it."""

import subprocess
import sys
import threading

import pytest
from reward_rows import item, sample

from agentrl.rewards import RewardSet, Unscorable, load_reward
from agentrl.rewards.mathcheck import SymbolicPool, score_answer
from agentrl.rewards.mathextract import extract_final_answer


@pytest.fixture(scope="module")
def math_reward():
    return load_reward("math")


EXTRACTION = [
    ("so the result is \\boxed{\\frac{1}{2}} as required", "\\frac{1}{2}"),
    ("first \\boxed{3}, then corrected: \\boxed{4}", "4"),
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
    ("The answer is 42.", "42"),
    ("The final answer is $\\frac{3}{4}$.", "\\frac{3}{4}"),
    ("**Answer:** 12", "12"),
    ("Answer: $842M", "$842M"),
    ("3 + 4 = 7", "7"),
    ("We have 3 apples.\nSo 3 + 4 = 7 apples in total.", "7"),
    ("1, 2, 3, 42, 5", "1, 2, 3, 42, 5"),  # read as a list: it can only equal a list (see ADVERSARIAL)
    ("Possible answers: 12 15 18 21", None),
    ("", None),
    (":", None),
    ("correct", None),
    ("I don't know.", None),
]


@pytest.mark.parametrize("text, expected", EXTRACTION)
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


def test_echoed_question_has_no_answer():
    q = "If Tom has 12 apples and eats 4, how many are left? Give the number 8 as digits."
    assert extract_final_answer(q, prompt=q) is None
    assert extract_final_answer(q + "\n\n" + q, prompt=q) is None


EQUIVALENT = [
    ("0.5", "\\frac{1}{2}"), ("1/2", "0.5"), ("\\dfrac{3}{4}", "0.75"), ("7%", "0.07"), ("0.07", "7\\%"),
    ("12 percent", "0.12"), ("1,234,567", "1234567"), ("$1,000.50", "1000.5"), ("$842M", "842 million dollars"),
    ("842 million", "842000000"), ("\\$2.5 billion", "2.5e9"), ("1.5e6", "1500000"), ("1.5 \\times 10^{6}", "1.5e6"),
    ("5 cm", "5"), ("\\text{12 apples}", "12"), ("x = 3", "3"), ("30^\\circ", "30"), ("-\\frac{1}{2}", "-0.5"),
    ("1\\frac{1}{2}", "3/2"), ("0.333", "\\frac{1}{3}"), ("3.14", "3.14159"), ("(1, 2)", "(1,2)"),
    ("[0, \\infty)", "[0,\\infty)"), ("\\{3, 1, 2\\}", "\\{1,2,3\\}"), ("2, 1", "1, 2"), ("x = 1 or x = 2", "1, 2"),
    ("(x+1)^2", "x^2+2x+1"), ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"), ("2\\pi", "\\pi \\cdot 2"),
    ("\\sqrt{8}", "2\\sqrt{2}"), ("\\boxed{4}", "4"),
]

NOT_EQUIVALENT = [
    ("0.51", "\\frac{1}{2}"), ("7", "0.7"), ("1,234", "1.234"), ("$842M", "842 thousand"), ("1.5e5", "1.5e6"),
    ("(1, 2)", "(1, 2]"), ("(1, 2)", "(2, 1)"), ("\\{1, 2\\}", "\\{1, 2, 3\\}"), ("2x", "x"), ("x^2", "x^3"),
    ("\\sqrt{2}", "\\sqrt{3}"), ("3", "3.5"), ("0.3", "\\frac{1}{3}"), ("-2", "2"), ("correct", "5"),
    ("10^{100000}", "1"),
]


@pytest.mark.parametrize("pred, gold", EQUIVALENT)
def test_equivalent(pred, gold):
    assert score_answer(pred, gold) == 1.0


@pytest.mark.parametrize("pred, gold", NOT_EQUIVALENT)
def test_not_equivalent(pred, gold):
    assert score_answer(pred, gold) == 0.0


ADVERSARIAL = [
    ("", "42"),
    (":", "42"),
    ("correct", "42"),
    ("The answer is correct.", "42"),
    ("Answer:", "42"),
    ("Candidates: 12, 17, 42, 56, 99", "42"),
    ("40 41 42 43 44", "42"),
    ("\\boxed{}", "42"),
    ("Answer: 12 15 42 56", "42"),
    ("Answer: 12, 15, 42, 56", "42"),
    ("\\boxed{40, 41, 42, 43}", "42"),
    ("Answer: 42 or 43", "42"),
    ("7" * 1_000_000, "42"),
    ("x " * 500_000 + " answer is 41", "42"),
    ("The answer is \\boxed{41}. (Some say 42.)", "42"),
    ("\\boxed{41}, \\boxed{42}, \\boxed{43}", "42"),  # boxes side by side are one answer, a set
    ("$41, 42, 43$", "42"),
    ("\\text{42 or 43}", "42"),
    ("The answer is 42 or 43.", "42"),
]


@pytest.mark.parametrize("response, gold", ADVERSARIAL)
def test_adversarial_answers_score_zero(math_reward, response, gold):
    assert math_reward(sample(response), item("What is 6 * 7?", expected_answer=gold)) == 0.0


def test_echoing_the_question_scores_zero(math_reward):
    q = "A shop sells 42 pens. How many pens is that? Reply with 42."
    assert math_reward(sample(q), item(q, expected_answer="42")) == 0.0


def test_huge_output_with_answer_at_the_end(math_reward):
    assert math_reward(sample("blah " * 200_000 + "\\boxed{42}"), item("q", expected_answer="42")) == 1.0


def test_not_applicable_without_expected_answer(math_reward):
    assert math_reward(sample("\\boxed{1}"), item("q")) is None


def test_tolerance_from_metadata(math_reward):
    row = dict(expected_answer="100", tolerance=0.02)
    assert math_reward(sample("Answer: 101.5"), item("q", **row)) == 1.0
    assert math_reward(sample("Answer: 103"), item("q", **row)) == 0.0


PARTIAL = [  # the tutorial's rule: 1 up to format, 0.5 within a tenth of a percent or a rounding error, else 0
    ("Answer: $1,000,000", "1000000", True, 1.0),
    ("Answer: 1000.9", "1000", True, 0.5),       # 0.09% off
    ("Answer: 1002", "1000", True, 0.0),         # 0.2% off
    ("Answer: 3.14", "3.14159", True, 0.5),      # rounded: half credit here, full credit without the option
    ("Answer: 3.14", "3.14159", None, 1.0),
    ("Answer: 104", "103.6", True, 0.5),         # rounded to a whole number
    ("Answer: 104", "100", 0.05, 0.5),           # a wider window, given as a number
    ("Answer: 150", "100", 0.05, 0.0),
    ("Answer: 104", "100", None, 0.0),
]


@pytest.mark.parametrize("response, gold, partial, expected", PARTIAL)
def test_partial_credit_as_the_tutorial_defines_it(math_reward, response, gold, partial, expected):
    assert math_reward(sample(response), item("q", expected_answer=gold, partial_credit=partial)) == expected


def test_symbolic_timeout_is_unscorable_off_the_main_thread():
    """A symbolic check that never answers is killed and reported, from a worker thread, without signals."""

    class HangingPool(SymbolicPool):
        def _spawn(self):
            code = "import json, time; print(json.dumps({'ready': True}), flush=True); time.sleep(600)"
            proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self._read_line(proc, 60, "did not start")
            self.spawned = proc
            return proc

    pool = HangingPool(size=1)
    box = {}

    def run():
        try:
            pool.equal("x^2", "x*x", timeout=0.2)
        except Unscorable as exc:
            box["cause"] = exc.cause

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert "timeout after 0.2s" in box["cause"]
    assert pool.spawned.poll() is not None  # the stuck child was killed


def test_rewardset_reports_math_timeout_as_unscorable(monkeypatch):
    import agentrl.rewards.mathcheck as mc

    def stuck(gold, pred, timeout=5.0, numeric=False):
        raise Unscorable(f"timeout after {timeout:g}s comparing {pred!r} with {gold!r}")

    monkeypatch.setattr(mc, "symbolic_equal", stuck)
    # a sum: x^2 against x*x would be settled without the symbolic checker (mathexpr)
    result = RewardSet([{"name": "math"}]).score(sample("\\boxed{\\sum_{k=1}^{n} k}"),
                                                 item("q", expected_answer="n(n+1)/2"))
    assert result.score is None
    assert result.unscorable.startswith("math: timeout after 5s")


def test_a_list_of_accepted_answers(math_reward):
    row = item("q", expected_answer=["\\frac{1}{2}", "50%"])
    assert math_reward(sample("Answer: 0.5"), row) == 1.0
    assert math_reward(sample("Answer: 0.6"), row) == 0.0
    assert math_reward(sample("Answer: 0.5"), item("q", expected_answer=0.5)) == 1.0  # numbers in JSON rows
