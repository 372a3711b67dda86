"""Turn an answer string into a value that can be compared without sympy.

``parse_value("$842M")`` and ``parse_value("842 million dollars")`` both give ``Num(842000000)``;
``"7%"`` gives a ``Num`` that also remembers its un-scaled reading (7) so "7%" matches both 0.07 and 7.
Intervals, tuples and sets give ``Seq``. Anything else (``\\sqrt{2}``, ``x^2+1``) gives ``None`` and is
left to the symbolic checker. Nothing here can hang: exponents are capped and strings are length-capped.

Thousands: ``1,234``, ``1 234``, ``10{,}000`` and the MATH dataset's ``10,\\!000`` are 1234 / 10000. A comma
followed by one, two or four or more digits (``2,74``) or after a lone zero (``0,111``) is a decimal comma;
such a reading is marked ``ambiguous`` (it could be a list), so a mismatch there is left to the symbolic
checker. ``decimal_comma=True`` reads every comma between digits as a decimal point (``1.234,5`` = 1234.5),
``False`` never does. Numbers in words ("forty-two", "three million") are read by ``mathwords``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from agentrl.rewards.mathwords import words_value

MAX_LEN = 300  # longer answers are not parsed numerically
MAX_EXP = 400  # 10**400 is fine; 10**(10**9) would hang

_MAG = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12, "mn": 6, "bn": 9, "k": 3, "m": 6, "b": 9, "t": 12}
_CURRENCY = re.compile(r"(?:\\\$|\$|€|£|¥|₹|\b(?:usd|us dollars?|dollars?|euros?|eur|gbp|pounds?|yen|cents?)\b)", re.I)
_LATEX_DROP = re.compile(r"\\left|\\right|(?<!\\)\\[,;:! ]|\\quad|\\qquad|\\displaystyle|~")
# Wrappers that change how a letter looks, not what it is: \mathcal{F} is the answer F.
WRAPPERS = ("text|textbf|textit|textrm|textsf|texttt|textnormal|textup|emph|mbox|operatorname|mathrm|mathbf|mathit|"
            "mathsf|mathtt|mathcal|mathscr|mathfrak|boldsymbol|bm")
_TEXT = re.compile(rf"\\(?:{WRAPPERS})\s*\{{([^{{}}]*)\}}")
_DEGREE = re.compile(r"\^\s*\{?\\circ\}?|°|\\degree")
_NAME = r"[a-zA-Z](?:_\{?\w+\}?)?"
_ASSIGN = re.compile(rf"^(?:{_NAME}|\(\s*{_NAME}(?:\s*,\s*{_NAME})+\s*\))\s*(?:=|\\approx|≈|\\in|∈)\s*(.+)$", re.S)
_PERCENT = re.compile(r"\s*(?:%|percent|percentage|pct)$")
_THIN_COMMA = re.compile(r"(?<=\d),\s*\\!\s*(?=\d)|\{,\}")
_INDIAN = re.compile(r"^[-+]?\d{1,2}(?:,\d{2})+,\d{3}(?:\.\d+)?$")  # 12,34,567: lakh and crore grouping
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(?:([ap])\.?\s?m\.?)?$", re.I)
_MATRIX = re.compile(r"^\(?\s*\\begin\{(pmatrix|bmatrix|Bmatrix|matrix|smallmatrix|array)\}(?:\{[lcr|]*\})?(.*)"
                     r"\\end\{\1\}\s*\)?$", re.S)
_APPROX = re.compile(r"\\approx|≈|\\simeq")
_CHAIN_EQ = re.compile(r"(?<![<>!=\\])=(?!=)")
_DEC_COMMA = re.compile(r"^([-+]?\d+),(\d{1,2}|\d{4,})$|^([-+]?0),(\d+)$")
_EURO = re.compile(r"^[-+]?\d{1,3}(?:[. ]\d{3})*,\d+$|^[-+]?\d+,\d+$")
_PLAIN = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)$")
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_SPACED = re.compile(r"^[-+]?\d{1,3}(?: \d{3})+(?:\.\d+)?$")
_SCI = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+))\s*(?:[eE]\s*([-+]?\d+)|(?:\*|x|\\times|×)\s*10\s*(?:\^|\*\*)\s*\{?\s*([-+]?\d+)\s*\}?)$")
_POW10 = re.compile(r"^10\s*(?:\^|\*\*)\s*\{?\s*([-+]?\d+)\s*\}?$")
_SLASH = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)$")
_FRAC = re.compile(r"^([-+]?)\\frac\s*(?:\{([^{}]+)\}|(\d))\s*(?:\{([^{}]+)\}|(\d))$")
_MIXED = re.compile(r"^(\d+)\s*(?:\s(\d+)\s*/\s*(\d+)|\\frac\s*\{(\d+)\}\s*\{(\d+)\})$")
_MAGWORD = re.compile(r"^(.*?\d)\s*(thousand|million|billion|trillion|mn|bn)$", re.I)
_MAGLETTER = re.compile(r"^(.*?\d)([kKmMbBtT])$")
_UNIT = re.compile(r"^(.*?[\d}])\s+([a-zA-Z][a-zA-Z/^0-9. ]{0,30})$")
_GLUED_UNIT = re.compile(r"^(.*?\d)([a-zA-Z]+\.?)$")  # 12days, 3.5km: only units this module knows
def _unit_table() -> dict:
    table = {}
    for dim, base, units in (
        ("length", 1, {"mm": "1/1000", "cm": "1/100", "m": 1, "km": 1000, "meter": 1, "metre": 1, "kilometer": 1000,
                       "centimeter": "1/100", "millimeter": "1/1000"}),
        ("mass", 1, {"mg": "1/1000", "g": 1, "kg": 1000, "gram": 1, "kilogram": 1000, "milligram": "1/1000"}),
        ("time", 1, {"s": 1, "sec": 1, "second": 1, "min": 60, "minute": 60, "h": 3600, "hr": 3600, "hour": 3600,
                     "day": 86400, "week": 604800, "secs": 1, "mins": 60, "hrs": 3600}),
        ("volume", 1, {"ml": "1/1000", "l": 1, "L": 1, "liter": 1, "litre": 1, "milliliter": "1/1000"}),
    ):
        for name, factor in units.items():
            table[name] = (dim, Fraction(factor) * base)
            if len(name) > 3 or name == "day":
                table[name + "s"] = table[name]  # plurals of the written-out names
    return table


_UNITS = _unit_table()
# Words that name a unit without a conversion here: written glued to a number, they are still a unit.
_UNIT_WORDS = {"degree", "degrees", "deg", "year", "years", "month", "months", "yr", "yrs", "units", "unit", "rad",
               "radians", "people", "students", "inches", "inch", "feet", "ft", "miles", "mph", "dollars", "cents"}
_NOT_UNITS = {"x", "y", "z", "n", "a", "b", "c", "i", "j", "or", "and", "pi", "e"}
_INF = {"\\infty": float("inf"), "∞": float("inf"), "inf": float("inf"), "infinity": float("inf"), "oo": float("inf")}


@dataclass(frozen=True)
class Num:
    """A number; ``alt`` is its other reading (the bare number of a percent), if any."""

    value: Fraction | float
    decimals: int | None = None  # digits after the point when written as a decimal
    alt: Fraction | float | None = None
    ambiguous: bool = False  # read through a convention the writer may not have meant (a decimal comma)
    base: tuple | None = None  # (dimension, value in its base unit) when a known unit was written: 1.5 km = 1500 m
    mark: str | None = None  # written beside the number: "percent", "scale" (million, M), "unit" or "clock"


@dataclass(frozen=True)
class Seq:
    """A bracketed or comma-separated collection: ``kind`` is "set", "list" or the bracket pair."""

    kind: str
    items: tuple


def clean(text: str) -> str:
    """Strip LaTeX decoration, currency and a leading ``x =`` so only the answer is left."""
    s = str(text).strip()
    s = _THIN_COMMA.sub(",", s)
    s = _unwrap(s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\%", "%").replace("{,}", ",")
    s = s.replace("−", "-").replace("\\cdot", "*").replace("\\times", "*").replace("×", "*")
    s = s.replace("\\(", "").replace("\\)", "").replace("\\[", "").replace("\\]", "")
    s = _LATEX_DROP.sub(" ", s)
    s = _DEGREE.sub("", s)
    s = _CURRENCY.sub(" ", s)
    s = s.replace("$", " ").replace("**", "^") if "**" in s and "*10**" not in s.replace(" ", "") else s.replace("$", " ")
    s = re.sub(r"\s+", " ", s).strip().rstrip(".").strip()
    s = re.sub(r"(?<=\d)\\+$", "", s)  # "185\\": a stray backslash
    m = _ASSIGN.match(s) if s.count("=") < 2 or not re.search(r"[,;]|\bor\b|\band\b", s) else None  # not "a = 1, b = 2"
    if m:
        s = m.group(1).strip()
        s = _APPROX.split(s, 1)[0].strip() or s  # x = 1/3 \approx 0.33: the exact value is the answer
        if _CHAIN_EQ.search(s):  # x = 5 + 5 + 1 = 11: the value is what the last "=" gives
            s = _CHAIN_EQ.split(s)[-1].strip()
    while len(s) >= 2 and s[0] == "{" and s[-1] == "}" and _balanced(s[1:-1]) and "," not in s:
        s = s[1:-1].strip()
    return s


def _unwrap(s: str) -> str:
    """``\\text{\\textbf{C}}`` is ``C``: wrappers inside wrappers too."""
    for _ in range(4):
        t = _TEXT.sub(r"\1", s)
        if t == s:
            break
        s = t
    return s


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def _pow10(exp: str) -> Fraction:
    e = int(exp)
    if abs(e) > MAX_EXP:
        raise OverflowError(f"exponent {e} too large")
    return Fraction(10) ** e


def _decimals(s: str) -> int | None:
    s = s.lstrip("+-")
    return len(s.split(".", 1)[1]) if "." in s else None


def parse_scalar(s: str, decimal_comma: bool | None = None) -> Num | None:
    """A single number, or ``None`` if ``s`` is not plainly numeric."""
    s = s.strip()
    if not s or len(s) > MAX_LEN:
        return None
    low = s.lower()
    pct = _PERCENT.search(low)
    if pct:
        inner = parse_scalar(s[: pct.start()], decimal_comma)
        if inner is None or isinstance(inner.value, float):
            return None
        return Num(inner.value / 100, None, inner.value, inner.ambiguous, mark="percent")
    sign = -1 if low.startswith("-") else 1
    if low.lstrip("+-") in _INF:
        return Num(sign * _INF[low.lstrip("+-")])
    for pattern, letter in ((_MAGWORD, False), (_MAGLETTER, True)):
        m = pattern.match(s)
        if m and (not letter or m.group(2) in "KMBTk" or m.group(2) == "m" and "$" in s):
            base = parse_scalar(m.group(1), decimal_comma)
            if base is not None and not isinstance(base.value, float):
                return Num(base.value * _pow10(str(_MAG[m.group(2).lower()])), None, base.value, base.ambiguous,
                           mark="scale")
    words = words_value(s) if s[0].isalpha() else None
    if words is not None:
        return Num(words)
    return _parse_plain(s, decimal_comma)


def _parse_plain(s: str, decimal_comma: bool | None = None) -> Num | None:
    if decimal_comma and _EURO.match(s):
        t = s.replace(".", "").replace(" ", "").replace(",", ".")
        return Num(Fraction(t), _decimals(t))
    if decimal_comma is None:
        m = _DEC_COMMA.match(s)
        if m:
            t = f"{m.group(1) or m.group(3)}.{m.group(2) or m.group(4)}"
            return Num(Fraction(t), _decimals(t), None, True)
    if _PLAIN.match(s):
        return Num(Fraction(s), _decimals(s))
    if _INDIAN.match(s) and not decimal_comma:  # could be a list of numbers: a mismatch is not final
        t = s.replace(",", "")
        return Num(Fraction(t), _decimals(t), None, True)
    m = _CLOCK.match(s)
    if m:
        return _clock(m)
    if (_THOUSANDS.match(s) and not decimal_comma) or _SPACED.match(s):
        t = s.replace(",", "").replace(" ", "")
        return Num(Fraction(t), _decimals(t))
    m = _SCI.match(s)
    if m:
        return Num(Fraction(m.group(1)) * _pow10(m.group(2) or m.group(3)))
    m = _POW10.match(s)
    if m:
        return Num(_pow10(m.group(1)))
    m = _SLASH.match(s)
    if m and Fraction(m.group(2)) != 0:
        return Num(Fraction(m.group(1)) / Fraction(m.group(2)))
    m = _FRAC.match(s)
    if m:
        num, den = parse_scalar(m.group(2) or m.group(3), False), parse_scalar(m.group(4) or m.group(5), False)
        if num and den and not isinstance(num.value, float) and not isinstance(den.value, float) and den.value != 0:
            return Num((-1 if m.group(1) == "-" else 1) * num.value / den.value)
        return None
    m = _MIXED.match(s)
    if m:
        a, b = int(m.group(2) or m.group(4)), int(m.group(3) or m.group(5))
        return Num(int(m.group(1)) + Fraction(a, b)) if b else None
    m = _UNIT.match(s)
    if m and m.group(2).split()[0].lower() not in _NOT_UNITS:
        return _with_unit(m.group(1), m.group(2), decimal_comma)
    m = _GLUED_UNIT.match(s)
    if m and (m.group(2).rstrip(".") in _UNITS or m.group(2).rstrip(".").lower() in _UNIT_WORDS):
        return _with_unit(m.group(1), m.group(2), decimal_comma)
    if len(s) >= 2 and s[0] == "(" and s[-1] == ")" and _balanced(s[1:-1]) and "," not in s:
        return parse_scalar(s[1:-1], decimal_comma)
    return None


def _with_unit(number: str, unit_text: str, decimal_comma: bool | None) -> Num | None:
    num = parse_scalar(number, decimal_comma)
    if num is None or isinstance(num.value, float) or num.mark is not None:
        return num
    name = unit_text.strip().rstrip(".")
    unit = _UNITS.get(name) or _UNITS.get(name.lower())
    base = (unit[0], num.value * unit[1]) if unit else None
    return Num(num.value, num.decimals, num.alt, num.ambiguous, base, mark="unit")


def _clock(m: re.Match) -> Num | None:
    """20:34, 20:34:00 and 8:34 P.M. are one time of day (in seconds); "2:30" alone might be a ratio."""
    h, mins, secs, half = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), (m.group(4) or "").lower()
    if mins > 59 or secs > 59 or h > (12 if half else 23) or (half and h == 0):
        return None
    if half:
        h = h % 12 + (12 if half == "p" else 0)
    seconds = Fraction(h * 3600 + mins * 60 + secs)
    return Num(seconds, None, None, not (half or m.group(3)), ("clock", seconds), mark="clock")


def split_top(s: str, seps: str = ",;") -> list[str]:
    """Split on separators that are not inside brackets."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch in seps and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def parse_value(text: str, decimal_comma: bool | None = None) -> Num | Seq | None:
    """A ``Num``, a ``Seq`` of values, or ``None`` when the answer needs the symbolic checker."""
    s = clean(text)
    if not s or len(s) > MAX_LEN:
        return None
    try:
        num = parse_scalar(s, decimal_comma)
    except (OverflowError, ValueError, ZeroDivisionError):
        return None
    if num is not None:
        return num
    m = _MATRIX.match(s)
    if m:
        return _matrix(m.group(2))
    kind, body = _brackets(s)
    if kind == "[]" and len(split_top(body)) == 1:  # [45 degrees]: one value in brackets is that value
        return parse_value(body, decimal_comma)
    if kind is None:
        body = re.sub(r",?\s+(?:or|and)\s+", ",", s)  # "1, 2, and 3": an Oxford comma too
        if "," not in body and ";" not in body:
            return None
        kind = "list"
    parts = split_top(body)
    if kind == "list" and len(parts) < 2:
        return None  # the separator was inside brackets: not a list
    items = []
    for part in parts:
        v = parse_value(part, False if decimal_comma is None else decimal_comma)
        if v is None:
            return None
        items.append(v)
    return Seq(kind, tuple(items))


def _matrix(body: str) -> Seq | None:
    """A matrix of numbers; one row or one column is a vector, which equals the tuple of its entries."""
    rows = [r for r in re.split(r"\\\\(?:\[[^\]]*\])?", body) if r.strip() and r.strip() != "\\hline"]
    cells = [[c.strip() for c in r.split("&")] for r in rows]
    if not cells or len({len(r) for r in cells}) != 1:
        return None
    values = []
    for row in cells:
        parsed = [parse_value(c, False) for c in row]
        if any(v is None for v in parsed):
            return None
        values.append(tuple(parsed))
    if len(values) == 1 or len(values[0]) == 1:
        return Seq("vector", tuple(v for row in values for v in row))
    return Seq("matrix", tuple(Seq("row", row) for row in values))


def _brackets(s: str) -> tuple[str | None, str]:
    if s.startswith("\\{") and s.endswith("\\}"):
        return "set", s[2:-2]
    if len(s) >= 2 and s[0] in "([{" and s[-1] in ")]}" and _balanced(s[1:-1]):
        return ("set" if s[0] == "{" else s[0] + s[-1]), s[1:-1]
    return None, s


_KEY_DROP = re.compile(r"\\(?:left|right|displaystyle|[,;:! ]|quad|qquad)|\$|\s+|~")


def same_text_key(text: str) -> str:
    """A key under which two answers written the same way (up to spacing, ``$``, ``\\text{}``, ``\\left``,
    ``\\dfrac``, a final period, and the case of a word answer) are equal: "$\\text{Even}$" and "even"."""
    s = _unwrap(str(text)).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _KEY_DROP.sub("", s).rstrip(".")
    return s.lower() if s.isalpha() and len(s) > 1 else s
