"""Numbers written in words: ``words_value("forty-two") == 42``, ``words_value("two hundred and five") == 205``.

    >>> words_value("three million")
    Fraction(3000000, 1)
    >>> words_value("a dozen") is None      # only plain cardinal numbers are read
    True

Used by ``mathnorm`` so that "forty-two", "42" and "\\boxed{42}" are the same answer. Anything that is not
entirely number words (and "and", "a", hyphens) gives None.
"""

from __future__ import annotations

import re
from fractions import Fraction

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_WORD = re.compile(r"[a-z]+")


def words_value(text: str) -> Fraction | None:
    """The value of a cardinal number written in English words, or None."""
    s = text.strip().lower().replace("-", " ").replace(",", " ")
    sign = 1
    if s.startswith(("minus ", "negative ")):
        sign, s = -1, s.split(" ", 1)[1]
    words = s.split()
    if not words or len(words) > 12 or any(not _WORD.fullmatch(w) for w in words):
        return None
    total = current = 0
    seen = False
    for i, w in enumerate(words):
        if w == "and" and 0 < i < len(words) - 1:
            continue
        if w == "a" and i == 0 and len(words) > 1:
            current, seen = 1, True
            continue
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = (current or 1) * 100
        elif w in _SCALES:
            total += (current or 1) * _SCALES[w]
            current = 0
        else:
            return None
        seen = True
    return Fraction(sign * (total + current)) if seen else None
