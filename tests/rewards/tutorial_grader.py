"""The Agent RFT tutorial's grader rule, as a python grader's source and as the fake judge's brain.

Rule (from the tutorial): 1 if the value matches the reference up to format (percent forms, commas, currency,
magnitude suffixes), 0.5 if within a tenth of a percent (a rounding error), else 0.
Cases (the tutorial's): reference 13.4%; answers 13.4%, 0.134, 13.41%, 12.0% -> 1, 1, 0.5, 0.
"""

SOURCE = r'''
import re

SUFFIXES = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "b": 1e9, "billion": 1e9}


def parse_value(text):
    t = str(text).strip().lower().replace(",", "").replace("$", "")
    m = re.search(r"-?\d+(?:\.\d+)?", t)
    if not m:
        return None, False
    value, rest = float(m.group(0)), t[m.end():].strip()
    percent = rest.startswith("%") or rest.startswith("percent")
    word = re.match(r"[a-z]+", rest)
    if word and word.group(0) in SUFFIXES:
        value *= SUFFIXES[word.group(0)]
    return value, percent


def grade(sample, item):
    ref, ref_pct = parse_value(item["reference_answer"])
    ans, ans_pct = parse_value(sample["output_text"])
    if ref is None or ans is None:
        return 0.0
    ref = ref / 100 if ref_pct else ref
    candidates = [ans / 100] if ans_pct else [ans, ans / 100]
    best = min(abs(c - ref) / max(abs(ref), 1e-12) for c in candidates)
    if best < 1e-9:
        return 1.0
    if best <= 1e-3:
        return 0.5
    return 0.0
'''

CASES = [("13.4%", "13.4%", 1.0), ("13.4%", "0.134", 1.0), ("13.4%", "13.41%", 0.5), ("13.4%", "12.0%", 0.0)]


def rule(reference: str, answer: str) -> float:
    scope: dict = {}
    exec(compile(SOURCE, "tutorial_grader", "exec"), scope)  # the test's own fixed text, not user input
    return scope["grade"]({"output_text": answer}, {"reference_answer": reference})
