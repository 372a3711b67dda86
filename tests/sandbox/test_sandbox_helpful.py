"""Ordinary Python that grader authors write: it works, or the error names line, construct and the fix."""

import pytest

from agentrl.sandbox import GraderCodeError

SAMPLE = {"final_answer": "b a b", "trajectories": [{"response": "hi", "tool_calls": []}]}
ITEM = {"answer": "a b b", "metadata": {"weights": [1, 2, 3]}}

WORKS = [
    ("dict item +=", "counts = {}\n    for w in sample.final_answer.split():\n        counts[w] = counts.get(w, 0)\n"
     "        counts[w] += 1\n    return float(counts['b'])", 2.0),
    ("list item *=", "xs = [1, 2]\n    xs[1] *= 3\n    return float(xs[1])", 6.0),
    ("name +=", "n = 0\n    n += 2\n    return float(n)", 2.0),
    ("annotated assignment", "score: float = 0.5\n    total: int\n    return score", 0.5),
    ("sorted", "return 1.0 if sorted(sample.final_answer.split()) == sorted(item.answer.split()) else 0.0", 1.0),
    ("zip, min, max, sum", "w = item.metadata.weights\n    return float(sum(a * b for a, b in zip(w, reversed(w))) "
     "+ min(w) + max(w))", 14.0),
    ("set, enumerate, any, all", "s = set(sample.final_answer.split())\n    e = [i for i, _ in enumerate(s)]\n"
     "    return 1.0 if any(e) and all(x in s for x in 'ab') else 0.0", 1.0),
    ("attribute and key access", "return 1.0 if sample.trajectories[0].response == sample['trajectories'][0]['response'] "
     "else 0.0", 1.0),
    ("allowed imports", "import re, json, fractions, collections, itertools, functools, difflib, unicodedata\n"
     "    return float(fractions.Fraction(1, 4) + len(re.findall('b', sample.final_answer)))", 2.25),
    ("f-strings and %", "return 1.0 if f'{len(item.answer)}' == '%d' % 5 else 0.0", 1.0),
    ("attribute +=", "class A:\n        n = 0\n    a = A()\n    a.n += 2\n    return float(a.n)", 2.0),
    ("classes without dunders", "class Acc:\n        total = 0.0\n    a = Acc()\n    a.total = 1.5\n    return a.total", 1.5),
]


@pytest.mark.parametrize("body,expected", [w[1:] for w in WORKS], ids=[w[0] for w in WORKS])
def test_ordinary_python_works(sb, body, expected):
    src = f"def grade(sample, item):\n    {body}\n"
    assert sb.run_grader(src, "author.py", SAMPLE, ITEM) == expected


REJECTED = [
    ("match", "def grade(sample, item):\n    match item.answer:\n        case 'x':\n            return 1.0\n"
     "    return 0.0\n", 2, "if/elif"),
    ("nonlocal", "def grade(sample, item):\n    n = 0\n    def inc():\n        nonlocal n\n        n = n + 1\n"
     "    inc()\n    return 1.0\n", 4, "dict or list"),
    ("async", "async def grade(sample, item):\n    return 1.0\n", 1, "synchronous"),
    ("underscore name", "def grade(sample, item):\n    _tmp = 1\n    return 1.0\n", 2, "rename it"),
    ("dunder attribute", "def grade(sample, item):\n    return sample.__class__\n", 2, "rename it"),
    ("star import", "from math import *\ndef grade(sample, item):\n    return 1.0\n", 1, "explicitly"),
    ("eval", "def grade(sample, item):\n    return eval(sample.final_answer)\n", 2, "ast.literal_eval"),
]


@pytest.mark.parametrize("src,line,advice", [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED])
def test_rejections_say_line_construct_and_fix(sb, src, line, advice):
    with pytest.raises(GraderCodeError) as err:
        sb.run_grader(src, "author.py", SAMPLE, ITEM)
    text = str(err.value)
    assert err.value.cause == "compile"
    assert f"author.py, line {line}" in text, text
    assert "`" in text  # the offending source line is quoted
    assert advice in text, text


def test_forbidden_import_lists_what_is_allowed(sb):
    with pytest.raises(GraderCodeError) as err:
        sb.run_grader("import os\ndef grade(sample, item):\n    return 1.0\n", "author.py", SAMPLE, ITEM)
    assert "allowed:" in str(err.value) and "sympy" in str(err.value) and "line 1" in str(err.value)
