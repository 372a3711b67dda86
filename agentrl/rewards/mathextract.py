"""Find the final answer in a model's response, and only the final answer.

Order: the last ``\\boxed{...}``; else the last "final answer is / answer is / Answer:"; else the whole
response when it is one short line of mathematics ("(x+1)^2", "[0, \\infty)"); else the last number of
the last line that has one -- unless that line holds three or more numbers and no "=" (a model spraying
candidates gets nothing; \\boxed{} or "Answer:" are always read). The prompt is cut out first, so echoing
the question yields no answer, and only the tail of a huge response is read.
"""

from __future__ import annotations

import re

TAIL = 4000  # characters of the response that are read
MAX_ANSWER = 300

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
_MARKER = re.compile(r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=|\*\*:?|:\*\*)\s*:?\s*", re.I)
_NUMBER = re.compile(
    r"[-−]?\$?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*/\s*\d+)?"
    r"(?:\s*(?:\\?%|percent\b|thousand\b|million\b|billion\b|trillion\b|[kKMB]\b))?"
    r"|[-−]?\\d?frac\{[^{}]*\}\{[^{}]*\}"
)
_LIST_RESIDUE = re.compile(r"^[\s,;/|and&\-–.\[\](){}]*$", re.I)


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces), or None."""
    matches = list(_BOX.finditer(text))
    for m in reversed(matches):
        i = m.end()
        if i < len(text) and text[i] == "{":
            depth, j = 0, i
            while j < len(text):
                depth += text[j] == "{"
                depth -= text[j] == "}"
                if depth == 0:
                    return text[i + 1 : j]
                j += 1
        elif i < len(text):
            tok = re.match(r"[^\s$]+", text[i:])
            if tok:
                return tok.group(0)
    return None


def _after_marker(text: str) -> str | None:
    found = list(_MARKER.finditer(text))
    if not found:
        return None
    rest = text[found[-1].end() :].strip()
    line = rest.split("\n", 1)[0]
    line = re.split(r"(?<!\d)\.(?:\s|$)|\.\s+(?=[A-Z])", line + " ", maxsplit=1)[0]
    line = line.strip().strip("*_`").strip().rstrip(".").strip()
    if len(line) > 80:  # a marker followed by more prose: take that prose's last number
        return _last_number(line)
    return line or None


def _last_number(text: str) -> str | None:
    for line in reversed(text.strip().splitlines()):
        nums = list(_NUMBER.finditer(line))
        if not nums:
            continue
        residue = _NUMBER.sub("", line)
        if len(nums) >= 3 and (_LIST_RESIDUE.match(residue) or "=" not in residue):
            return None  # several numbers and no "= result": a list of candidates is not an answer
        return nums[-1].group(0)
    return None


_LATEX_CMD = re.compile(r"\\[a-zA-Z]+")
_WORD = re.compile(r"[a-zA-Z]{3,}")
_MATH_WORDS = {"sin", "cos", "tan", "log", "exp", "sqrt", "inf", "and", "infty", "frac", "cot", "sec", "csc"}


def _whole_line(text: str) -> str | None:
    """A short one-line response that is itself the answer: "(x+1)^2", "1 234 567", "[0, \\infty)"."""
    from agentrl.rewards.mathnorm import parse_value

    line = text.strip()
    if not line or "\n" in line or len(line) > 100 or not any(c.isalnum() for c in line):
        return None
    if parse_value(line) is not None:
        return line
    if "=" in line:  # "3 + 4 = 7": the result is what the last "=" gives
        line = line.rsplit("=", 1)[1].strip()
        if not line:
            return None
    words = [w for w in _WORD.findall(_LATEX_CMD.sub(" ", line)) if w.lower() not in _MATH_WORDS]
    nums = _NUMBER.findall(line)
    if words or (len(nums) >= 3 and _LIST_RESIDUE.match(_NUMBER.sub("", line))):
        return None
    return line


def extract_final_answer(text: str | None, prompt: str = "") -> str | None:
    """The final answer in ``text``, or None if there is none."""
    if not text:
        return None
    text = str(text)
    prompt = str(prompt or "").strip()
    if len(text) > 4 * TAIL:
        text = text[-TAIL:]
    if len(prompt) >= 10:
        text = text.replace(prompt, "\n")
    text = text[-TAIL:]
    answer = last_boxed(text)
    if answer is None:
        answer = _after_marker(text)
    if answer is None:
        answer = _whole_line(text)
    if answer is None:
        answer = _last_number(text)
    if answer is None:
        return None
    answer = answer.strip()
    return answer[:MAX_ANSWER] if answer else None
