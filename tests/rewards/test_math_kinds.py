"""The math preset, one table row per kind of answer it must read: what math_verify reads, and what it lacks.

Rows marked "math_verify" are shapes from math_verify's published tests (huggingface/Math-Verify, the same
source as benchmarks/data/math_verify_cases.jsonl); the rest are this project's own.
"""

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from reward_rows import item, sample

from agentrl.rewards import load_reward
from agentrl.rewards.mathextract import extract_final_answer, gold_answer


@pytest.fixture(scope="module")
def math_reward():
    return load_reward("math")


# (kind, response, gold, expected score)
KINDS = [
    # several \boxed{}: side by side they are one answer, a set; a later box after prose supersedes
    ("boxes", "\\boxed{1} and \\boxed{2} and \\boxed{3}", "{1,2,3}", 1.0),  # math_verify
    ("boxes", "the roots: \\[ \\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}. \\]", "1, -2", 1.0),
    ("boxes", "$$\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}$$", "(2, 2), (6, 2)", 1.0),  # math_verify
    ("boxes", "$$\\boxed{k = 45} \\quad \\text{and} \\quad \\boxed{n = 2}$$", "k = 45, n = 2", 1.0),  # math_verify
    ("boxes", "first \\boxed{3}, then corrected: \\boxed{4}", "4", 1.0),
    ("boxes", "first \\boxed{3}, then corrected: \\boxed{4}", "3", 0.0),
    ("boxes", "\\boxed{1} and \\boxed{2}", "1", 0.0),  # a set is not one of its members
    ("gold boxes", "$\\boxed{1,2}$", "$\\boxed{1}\\boxed{2}$", 1.0),  # math_verify: a gold's boxes are a set
    ("gold boxes", "$\\boxed{-2,1}$.", "\\(\\boxed{1}\\) and \\(\\boxed{-2}\\).", 1.0),  # math_verify
    ("gold boxes", "$\\boxed{1,2}$", "\\boxed{1} no no no no no \\boxed{2}", 0.0),  # math_verify: prose between
    ("box then marker", "so \\boxed{255} of interest. Final Answer: The final answer is $10,455$.", "10455", 1.0),
    ("marker then box", "The answer is 41. Checking again: \\boxed{42}", "42", 1.0),
    # equations and relations
    ("relation", "Therefore $x \\geq 5$ is the solution.", "$x >= 5$", 1.0),  # math_verify
    ("relation", "We find that $x \\neq 3$.", "$x != 3$", 1.0),  # math_verify
    ("relation", "We find that $x \\lt 3$.", "$x < 3$", 1.0),  # math_verify
    ("relation", "$-x >= -1$", "$x <= 1$", 1.0),  # math_verify
    ("relation", "Therefore $x \\geq 5$ is the solution.", "$x > 5$", 0.0),
    ("approx", "$x=1/3\\approx1.3$", "$1/3$", 1.0),  # math_verify: \approx is cut
    ("approx", "$x = 5+5+1 = 1/3 \\approx 11$", "$x = 1/3$", 1.0),  # math_verify
    ("equation", "$y=-\\frac{1}{2}x+\\frac{3}{4}$", "$2x+4y-3=0$", 1.0),  # math_verify: both sides count
    ("equation", "$x^2/16 + y^2/12 = 1/4$", "$x^2/4 + y^2/3 = 1$", 1.0),  # math_verify
    ("equation", "$y = x + 1$", "$y = x - 1$", 0.0),
    # matrices in prose or $...$
    ("matrix", "The identity matrix is $ \\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix} $.",
     "$\\begin{pmatrix}1 & 0 \\\\ 0 & 1\\end{pmatrix}$", 1.0),  # math_verify
    ("matrix", "Here is a zero matrix: $ \\begin{pmatrix}0 & 0 \\\\0 & 0\\end{pmatrix} $",
     "$\\begin{bmatrix}0 & 0 \\\\0 & 0\\end{bmatrix}$", 1.0),  # math_verify
    ("matrix", "So $\\begin{pmatrix}1 & 2 \\\\ 3 & 4\\end{pmatrix}$", "$\\begin{pmatrix}1 & 2 \\\\ 3 & 5\\end{pmatrix}$", 0.0),
    # number formats
    ("decimal comma", "Soucis : 2,74 $ a..", "2.74", 1.0),  # math_verify
    ("decimal comma", "1000,99", "1000.99", 1.0),  # math_verify
    ("decimal comma", "0.111", "0,111", 1.0),  # math_verify
    ("thousands", "$\\boxed{32,\\! 349}$", "32349", 1.0),  # math_verify: the MATH dataset's format
    ("thousands", "Answer: 10000", "10,\\!000", 1.0),
    ("thousands", "Answer: 10{,}000", "10000", 1.0),
    ("thousands", "Answer: 1 000 000", "10^6", 1.0),
    ("thousands", "7,425,000", "7425000", 1.0),  # math_verify
    ("thousands", "18 9", "27", 0.0),  # not a grouping: the operands of "18 + 9" side by side are no answer
    ("thousands", "9 18", "27", 0.0),
    ("thousands", "2.5 1.5", "4", 0.0),
    ("thousands", "Answer: 1,234", "1.234", 0.0),
    # text answers, and digits inside words
    ("text", "$odd$", "$\\text{odd}$", 1.0),  # math_verify
    ("text", "$Even$", "$\\text{Even}$", 1.0),  # math_verify
    ("text", "$Odd$", "$\\text{Even}$", 0.0),
    ("text", "AZYUK2A", "2", 0.0),  # math_verify: not a number
    # the gold itself, as written, is accepted
    ("gold echoed", "$$f(y) = y$$", "$$f(y) = y$$", 1.0),  # math_verify
    ("gold echoed", "$$\\text{The midpoints form a regular hexagon}$$",
     "$$\\text{The midpoints form a regular hexagon}$$", 1.0),  # math_verify
    ("gold echoed", "\\boxed{\n\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}\n}.\n\\end{align*}",
     "\\boxed{\n\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}\n}.\n\\end{align*}", 1.0),  # math_verify
    ("gold echoed", "\\boxed{4}   ", "\\boxed{4}", 1.0),
    ("gold echoed", "x^2 + 1", "$x^2 + 1$", 1.0),
    # the numeric reading never vetoes a symbolic equality
    ("no veto", "$\\boxed{(3, 37, 3, 13), (3, 17, 3, 7), (3,17,3,7), (37,3,3,13)}$",
     "$(37,3,3,13),(3,37,3,13),(3,17,3,7)$", 1.0),  # math_verify: a repeated member
    ("no veto", "$\\boxed{1}\\boxed{2}$", "$\\boxed{1,2}$", 1.0),  # "1,2" could be 1.2: math_verify decides
    ("no veto", "$(1,4.5)$", "$(1,\\frac{9}{2})$", 1.0),  # math_verify
    # prose with several numbers: an answer marker wins, then the last sentence; years are not answers
    ("prose", "The operating margin was 13.4% in 2023.", "13.4%", 1.0),
    ("prose", "In 2023 revenue grew. The answer is 42, up from 17 in 2022.", "42", 1.0),
    ("prose", "There are 90 divisors to try. So there are 12 sequences.", "12", 1.0),
    ("prose", "The largest $n$ is 34.", "34", 1.0),  # math_verify: a lone letter in $...$ is not an answer
    ("prose", "Answer $ \n 9 \n $", "$9$", 0.0),  # math_verify: inline math broken across lines
    ("prose", "So the pair is $(7, 6)$. <|im_start|>user\nNow solve 2+2. The answer is 4.", "$(7,6)$", 1.0),
    # currency, magnitude words, percent, number words, units
    ("currency", "Revenue was \\boxed{\\$842M}", "842 million dollars", 1.0),
    ("currency", "Answer: €1,000.50", "1000.5", 1.0),
    ("magnitude", "about 2.5 billion", "2,500,000,000", 1.0),
    ("magnitude", "Answer: 842 thousand", "$842M", 0.0),
    ("percent", "Answer: 28 percent", "0.28", 1.0),
    ("percent", "$\\boxed{28 pct}", "$28\\%$", 1.0),  # math_verify
    ("percent", "Answer: 7%", "7", 1.0),
    ("percent", "Answer: 25%", "\\frac{1}{4}", 1.0),  # percent <-> fraction
    ("percent", "Answer: \\frac{1}{4}", "25\\%", 1.0),
    ("percent", "Answer: 25%", "\\frac{1}{3}", 0.0),
    ("number words", "The answer is forty-two.", "42", 1.0),
    ("number words", "Answer: three million", "3,000,000", 1.0),
    ("number words", "Answer: forty-one", "42", 0.0),
    ("units", "1,000.99m²", "1000.99", 1.0),  # math_verify
    ("units", "$\\frac{1}{3} \\text{meters}$", "$1/3$", 1.0),  # math_verify
    ("units", "Answer: 1500 m", "1.5 \\text{ km}", 1.0),  # both with units of one kind: converted
    ("units", "Answer: 90 min", "1.5 hours", 1.0),
    ("units", "Answer: 5 cm", "5 m", 0.0),
    ("units", "Answer: 5 cm", "5", 1.0),  # a bare gold: the unit is dropped
]


@pytest.mark.parametrize("kind, response, gold, expected", KINDS, ids=[f"{k[0]}-{i}" for i, k in enumerate(KINDS)])
def test_kinds(math_reward, kind, response, gold, expected):
    assert math_reward(sample(response), item("q", expected_answer=gold)) == expected


OPTIONS = [
    # decimal_comma: true reads commas as decimal points, false never does, unset guesses only where unambiguous
    ("Answer: 1,234", "1.234", {"decimal_comma": True}, 1.0),
    ("Answer: 1.234,5", "1234.5", {"decimal_comma": True}, 1.0),
    ("Answer: 1,234", "1234", {"decimal_comma": True}, 0.0),
    ("Answer: 1,234", "1234", {}, 1.0),
    ("Answer: 2,5", "2.5", {"decimal_comma": False}, 0.0),
    # relative tolerance
    ("Answer: 101.5", "100", {"tolerance": 0.02}, 1.0),
    ("Answer: 103", "100", {"tolerance": 0.02}, 0.0),
    # final answer only: no box and no marker is no answer
    ("So it is 42.", "42", {"final_answer_only": True}, 0.0),
    ("So it is $42$.", "42", {"final_answer_only": True}, 0.0),
    ("So it is \\boxed{42}.", "42", {"final_answer_only": True}, 1.0),
    ("The answer is 42.", "42", {"final_answer_only": True}, 1.0),
    ("So it is 42.", "42", {}, 1.0),
]


@pytest.mark.parametrize("response, gold, options, expected", OPTIONS)
def test_options_per_row(math_reward, response, gold, options, expected):
    assert math_reward(sample(response), item("q", expected_answer=gold, **options)) == expected


def test_options_from_the_config():
    strict = load_reward("math", final_answer_only=True, decimal_comma=True)
    assert strict(sample("So it is 2,5."), item("q", expected_answer="2.5")) == 0.0
    assert strict(sample("Answer: 2,5"), item("q", expected_answer="2.5")) == 1.0


@pytest.mark.parametrize("gold, expected", [
    ("\\boxed{1} papers and \\boxed{2} bins", "1, 2"),
    ("\\boxed{\n4\n}", "4"),
    ("$x \\in [-2,7]$", "x \\in [-2,7]"),
    ("Final Answer: The final answer is $28 \\%$. I hope it is correct.", "28 \\%"),
    ("forty-two", "forty-two"),
])
def test_gold_answer(gold, expected):
    assert gold_answer(gold) == expected


def test_extraction_policy_in_the_docstring():
    assert extract_final_answer("so $x = 3$, and the answer is \\boxed{3} \\text{ or } \\boxed{-3}.") == "3, -3"
    assert extract_final_answer("The operating margin was 13.4% in 2023.") == "13.4%"


def test_symbolic_answers_scored_right_from_many_threads(math_reward):
    """math_verify's own timeouts use signals, which fail off the main thread (a peer's runs scored every
    math reward 0 that way). Here every comparison, symbolic ones included, is right from worker threads."""
    rows = [("$y=-\\frac{1}{2}x+\\frac{3}{4}$", "$2x+4y-3=0$", 1.0), ("\\boxed{(x+1)^2}", "x^2+2x+1", 1.0),
            ("\\boxed{x^3}", "x^2", 0.0), ("We find that $x \\neq 3$.", "$x != 3$", 1.0)] * 4
    assert threading.current_thread() is threading.main_thread()
    with ThreadPoolExecutor(8) as pool:
        scores = list(pool.map(lambda r: math_reward(sample(r[0]), item("q", expected_answer=r[1])), rows))
    assert scores == [r[2] for r in rows]


DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"


def _golds() -> list[str]:
    golds = []
    for name in ("math_pairs.jsonl", "math_verify_cases.jsonl", "peer_suites.jsonl"):
        for line in (DATA / name).read_text().splitlines():
            row = json.loads(line)
            if row.get("split") == "heldout":
                continue  # the peers' held-out split is only measured, never tuned on
            gold = row["gold"]
            # three of math_verify's golds were garbled in its own source ("\f" and "\t" read as control
            # characters, a \boxed{ never closed): they cannot be answered as written
            if not re.search(r"[\x00-\x09\x0b-\x1f]", gold) and gold.count("{") == gold.count("}") and gold not in golds:
                golds.append(gold)
    return golds


def test_every_gold_echoed_back_is_right(math_reward):
    """Each gold of the benchmark files, answered as written, without its $ or box, and boxed, scores 1.0."""
    wrong = []
    for gold in _golds():
        for response in (gold, gold_answer(gold), f"\\boxed{{{gold_answer(gold)}}}"):
            if math_reward(sample(response), item("q", expected_answer=gold)) != 1.0:
                wrong.append((gold, response))
    assert wrong == []


def test_one_gold_reading_per_item(monkeypatch, math_reward):
    """A GRPO group scores one gold against many samples: the gold is read once, then reused."""
    from agentrl.rewards import mathcheck

    calls = []
    real = mathcheck.gold_answer
    monkeypatch.setattr(mathcheck, "gold_answer", lambda g: calls.append(g) or real(g))
    mathcheck.clear_caches()
    row = item("q", expected_answer="$2x+4y-3=0$")
    answers = ["$y=-\\frac{1}{2}x+\\frac{3}{4}$", "$y = x$", "\\boxed{4y = 3 - 2x}", "7", "no idea"] * 2
    assert [math_reward(sample(a), row) for a in answers] == [1.0, 0.0, 1.0, 0.0, 0.0] * 2
    assert calls == ["$2x+4y-3=0$"]
