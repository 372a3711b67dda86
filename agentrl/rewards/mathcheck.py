"""Is a math answer equal to the expected one?

    >>> score_answer("$842M", "842 million dollars")               # agentrl's numeric reading
    1.0
    >>> score_answer(r"y=-\\frac{1}{2}x+\\frac{3}{4}", "2x+4y-3=0")  # math_verify's
    1.0

``score_answer(pred, gold)``, with ``pred`` already extracted (``mathextract``) and the gold read once per
item and cached (``gold_answer``): a gold that names an option letter is matched by the response's choice;
1.0 when both are written the same way (up to spacing, ``$``, ``\\text``, case of a word); else both are read
by ``mathnorm`` (exact fractions, relative tolerance, percents, currency, magnitude words, units, times of
day, thousands, decimal commas, tuples/sets/intervals/vectors/matrices) and a match is 1.0. A numeric mismatch
is final only when both readings are unambiguous (plain numbers, or collections of the same kind of them).
Expressions and equations are then evaluated at signed points by ``mathexpr`` (no sympy); anything it cannot
read or settle is asked of math_verify (each side parsed once with its LaTeX and expression extraction
configs, then ``verify``, then a check at random points for identities it cannot simplify) in a child
process with a hard deadline (``mathsymbolic``): the numeric path never overrides a symbolic equality. A comparison that runs out of time raises ``Unscorable`` ("could not
score"), never returns 0. Safe off the main thread and inside Ray workers: no signal.alarm anywhere.

``partial_credit`` is the tutorial's rule: 0.5 within a tenth of a percent (or the given window) or a
rounding error. Without it, a decimal of two or more places that is the other side rounded counts as equal.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from agentrl.rewards.mathexpr import read as read_expression
from agentrl.rewards.mathexpr import same_expression
from agentrl.rewards.mathextract import extract_final_answer, gold_answer, gold_choice, response_choice
from agentrl.rewards.mathnorm import Num, Seq, parse_value, same_text_key
from agentrl.rewards.mathsymbolic import SymbolicPool, clear_pool_caches, symbolic_equal

__all__ = ["extract_final_answer", "score_answer", "numbers_match", "SymbolicPool", "symbolic_equal", "clear_caches"]

DEFAULT_TOLERANCE = 1e-6


def _close(a, b, tol: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):  # infinities
        return a == b
    if a == b:
        return True
    return abs(a - b) <= Fraction(tol) * max(abs(b), abs(a)) if tol else False


def _rounds_to(exact, shown: Num, min_places: int = 2) -> bool:
    """``shown`` is a decimal with >= ``min_places`` places and ``exact`` rounds to it."""
    d = shown.decimals
    if d is None or d < min_places or isinstance(exact, float) or isinstance(shown.value, float):
        return False
    gap, half = abs(exact - shown.value), Fraction(1, 2 * 10**d)
    return gap < half or gap == half and abs(shown.value) > abs(exact)  # a tie rounds half away from zero


def _rounded(pred: Num, gold: Num, min_places: int = 2) -> bool:
    """The less precise side (a decimal with >= ``min_places`` places) is the other side rounded."""
    if pred.decimals is not None and (gold.decimals is None or gold.decimals > pred.decimals):
        if _rounds_to(gold.value, pred, min_places):
            return True
    if gold.decimals is not None and (pred.decimals is None or pred.decimals > gold.decimals):
        return _rounds_to(pred.value, gold, min_places)
    return False


def numbers_match(pred: Num, gold: Num, tol: float, rounding: bool = True, strict_units: bool = False) -> bool:
    """Equal values; and unless ``strict_units``, a bare number equals the number written before the other
    side's percent sign, scale word or unit ("13.4" = "13.4%", "842" = "$842 million", "5" = "5 cm")."""
    if pred.base and gold.base and pred.base[0] == gold.base[0]:  # both with units of one kind: 1.5 km = 1500 m
        return _close(pred.base[1], gold.base[1], tol)
    if (pred.mark == "clock") != (gold.mark == "clock"):
        return False  # a time of day is no number
    if strict_units and (pred.mark == "unit") != (gold.mark == "unit"):
        return False
    preds, golds = [pred.value], [gold.value]
    if not strict_units:
        if pred.alt is not None and gold.mark is None:
            preds.append(pred.alt)
        if gold.alt is not None and pred.mark is None:
            golds.append(gold.alt)
    if any(_close(p, g, tol) for p in preds for g in golds):
        return True
    return rounding and _rounded(pred, gold)


def _vector_and_tuple(pred: Seq, gold: Seq) -> bool:
    """A one-row or one-column matrix against a tuple or list of its entries: compared in order."""
    kinds = {pred.kind, gold.kind}
    return "vector" in kinds and kinds <= {"vector", "()", "[]", "list"}


def values_match(pred, gold, tol: float, rounding: bool = True, strict_units: bool = False) -> bool:
    if isinstance(pred, Num) and isinstance(gold, Num):
        return numbers_match(pred, gold, tol, rounding, strict_units)
    if not (isinstance(pred, Seq) and isinstance(gold, Seq)) or len(pred.items) != len(gold.items):
        return False
    unordered = {pred.kind, gold.kind} <= {"set", "list"}
    if not unordered:
        if pred.kind != gold.kind and not _vector_and_tuple(pred, gold):
            return False
        return all(values_match(p, g, tol, rounding, strict_units) for p, g in zip(pred.items, gold.items))
    left = list(pred.items)
    for g in gold.items:
        hit = next((i for i, p in enumerate(left) if values_match(p, g, tol, rounding, strict_units)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


def _no_dollars(s: str) -> str:
    s = s.replace("\\$", " ").replace("$", " ")
    return re.sub(r"\\q?quad\b", " ", s).strip()


@lru_cache(maxsize=4096)
def _gold(gold: str, decimal_comma: bool | None):
    """One reading of a gold string per item and option, kept: (answer, numeric value, text key, latex, choice)."""
    answer = gold_answer(gold)
    return (answer, parse_value(answer, decimal_comma), same_text_key(answer), f"${_no_dollars(answer)}$",
            gold_choice(gold))


def _decisive(pv, gv) -> bool:
    """True when the numeric reading alone settles a mismatch: both sides unambiguous numbers, or
    tuples/sets/intervals of the same kind made of them. Anything else is asked of the symbolic checker."""
    if isinstance(pv, Num) and isinstance(gv, Num):
        return _plain(pv) and _plain(gv)
    if isinstance(pv, Num) != isinstance(gv, Num):  # one number against two or more: never equal
        seq = gv if isinstance(pv, Num) else pv
        return len(seq.items) >= 2 and _plain(pv) and _plain(gv)
    if pv.kind in _INTERVALS and gv.kind in _INTERVALS and pv.kind != gv.kind:
        return _plain(pv) and _plain(gv) and all(isinstance(v, Num) and not isinstance(v.value, float)
                                                 for v in pv.items + gv.items)  # [0, 1) is not (0, 1)
    if isinstance(pv, Seq) and isinstance(gv, Seq) and _vector_and_tuple(pv, gv):
        return _plain(pv) and _plain(gv)
    if not (isinstance(pv, Seq) and isinstance(gv, Seq) and pv.kind == gv.kind and _plain(pv) and _plain(gv)):
        return False
    return len(pv.items) == len(gv.items) or pv.kind == "set"  # a bare list may repeat an answer


_INTERVALS = ("()", "[]", "[)", "(]")


def _plain(v) -> bool:
    return not v.ambiguous if isinstance(v, Num) else all(_plain(i) for i in v.items)


def _near(pv, gv, window: float) -> bool:
    """The tutorial's half credit: within ``window`` relative error, or one side the other rounded."""
    if not (isinstance(pv, Num) and isinstance(gv, Num)) or isinstance(pv.value, float) or isinstance(gv.value, float):
        return False
    if gv.value != 0 and abs(pv.value - gv.value) / abs(gv.value) <= Fraction(window):
        return True
    return (_rounds_to(gv.value, Num(pv.value, pv.decimals or 0), 0)
            or _rounds_to(pv.value, Num(gv.value, gv.decimals or 0), 0))


def clear_caches() -> None:
    """Forget every gold read and every comparison made so far (in this process and the symbolic workers)."""
    _gold.cache_clear()
    read_expression.cache_clear()
    clear_pool_caches()


_PRIME = re.compile(r"\^\s*\{\s*\\prime\s*\}|\^\s*\\prime|\\prime|’")
_PRIMES = re.compile(r"(?<=[A-Za-z}])('+)(?![A-Za-z])")


_FN_ARG = re.compile(r"\\(sin|cos|tan|cot|sec|csc|sinh|cosh|tanh|ln|log)\s*(\^\s*(?:\{[^{}]*\}|\d))?\s*"
                     r"(\d*(?:[A-Za-z]|\\(?:theta|alpha|beta|gamma|phi|varphi|omega|pi))|\d+)(?![\w(^])")


def _for_symbolic(latex: str) -> str:
    """What math_verify misreads, written its way: f'(x) is read as f(x) and E' as E, so a prime becomes part
    of the name; ``\\cos 2t`` and ``\\cot^2 t`` get the parentheses it needs to read them as cos(2t), cot(t)^2."""
    if "\\" in latex:
        latex = _FN_ARG.sub(lambda m: f"\\{m.group(1)}{m.group(2) or ''}({m.group(3)})", latex)
    if "'" not in latex and "prime" not in latex and "’" not in latex:
        return latex
    return _PRIMES.sub(lambda m: f"_{{p{len(m.group(1))}}}", _PRIME.sub("'", latex))


# "y = ...", "f(x) = ...", "g(t) = ...": a left side that only names the function being given
_LABEL = re.compile(r"^\s*([A-Za-z])(?:\s*\(\s*([A-Za-z](?:\s*,\s*[A-Za-z])*)\s*\))?\s*=\s*([^=<>]+)$")


def _same_function(gold: str, pred: str) -> tuple[str, str] | None:
    """The right sides of two equations whose left sides name one function another way ("y" and "f(x)",
    "f(x)" and "g(x)"); None if either is not such an equation. Two plain variables ("x", "y") differ."""
    g, p = _LABEL.match(_no_dollars(gold)), _LABEL.match(_no_dollars(pred))
    if not (g and p) or g.group(1) == p.group(1) and g.group(2) == p.group(2):
        return None
    gargs, pargs = (re.sub(r"\s", "", x.group(2) or "") for x in (g, p))
    if gargs and pargs and gargs != pargs or not gargs and not pargs:
        return None
    if not gargs and g.group(1) != "y" or not pargs and p.group(1) != "y":
        return None
    return g.group(3), p.group(3)


def _equation_result(pred: str) -> Num | None:
    """The plain number a one-answer equation ends on ("\\sqrt{4} = 2"), else None ("x = 1 or x = 2")."""
    if "=" not in pred or re.search(r"[,;<>]|\\(?:pm|mp|le|ge|leq|geq|neq|text)(?![a-z])|\b(?:or|and)\b", pred):
        return None
    value = parse_value(pred.rsplit("=", 1)[1])
    return value if isinstance(value, Num) and not value.ambiguous else None


_TIMES_VARIABLES = re.compile(r"\s*[-+]?\d+(?:\.\d+)?\s*\*?\s*[a-df-hj-zA-Z]{1,3}\s*")
_BARE_NUMBERS = re.compile(r"\s*-?\d+(?:\.\d+)?(?:\s+-?\d+(?:\.\d+)?)+\s*")


def score_answer(pred: str | None, gold: str, tolerance: float | None = None, partial_credit=None,
                 timeout: float = 5.0, decimal_comma: bool | None = None, strict_units: bool = False,
                 response: str | None = None) -> float:
    """1.0 if the answer ``pred`` equals the gold; 0.5 for a near miss with ``partial_credit``; else 0.0.

    ``pred`` is an extracted answer (see ``extract_final_answer``); ``gold`` is read by ``gold_answer``;
    ``response`` is the whole response, read for the letter it chooses when the gold is an option letter.
    Raises Unscorable when the symbolic check runs out of time.
    """
    answer, gv, gkey, glatex, choice = _gold(str(gold).strip(), decimal_comma)
    pred = str(pred or "").strip()
    if choice is not None:
        letter = response_choice(pred if response is None else response, pred)
        if letter is not None:
            return 1.0 if letter == choice[0] else 0.0
        said = pred or (response or "").strip()
        if choice[1] is not None and said and len(said) <= 100 and "\n" not in said:  # no letter: the option's text
            return score_answer(said, choice[1], tolerance, partial_credit, timeout, decimal_comma, strict_units)
    if not pred:
        return 0.0
    if same_text_key(pred) == gkey:
        return 1.0
    tol = DEFAULT_TOLERANCE if tolerance is None else float(tolerance)
    half = partial_credit is not None and partial_credit is not False
    window = 0.001 if partial_credit is True or not half else float(partial_credit)
    pv = parse_value(pred, decimal_comma)
    if pv is not None and gv is not None:
        if values_match(pv, gv, tol, rounding=not half, strict_units=strict_units):
            return 1.0
        if _decisive(pv, gv):
            return 0.5 if half and _near(pv, gv, window) else 0.0
    if isinstance(gv, Num) and pv is None and not any(c.isdigit() or c == "\\" for c in pred):
        if not re.search(r"[A-Za-z]", pred) or re.fullmatch(r"[A-Za-z ,.!'-]{4,}", pred):
            return 0.0  # a numeric gold and an answer without a single digit ("correct")
    if isinstance(gv, Num) and pv is None and _TIMES_VARIABLES.fullmatch(pred):
        return 0.0  # "3ab" is no number (math_verify reads it as 3)
    if pv is None and _BARE_NUMBERS.fullmatch(pred):
        # numbers side by side ("18 9") that are no thousands grouping: a list of candidates, not an
        # answer; math_verify would read "$18 9$" as their sum and pay the prompt's operands back
        return 0.0
    result = _equation_result(pred) if isinstance(gv, Num) else None
    if result is not None:  # "\\sqrt{16} = 4", "\\binom{5}{2} = 10" against a number: what the "=" gives
        return 1.0 if numbers_match(result, gv, tol, rounding=not half, strict_units=strict_units) else 0.0
    same = same_expression(_no_dollars(answer), _no_dollars(pred))  # most expressions, without sympy
    if same is not None:
        return 1.0 if same else 0.0
    sides = _same_function(answer, pred)
    if sides and symbolic_equal(f"${_for_symbolic(sides[0])}$", f"${_for_symbolic(sides[1])}$", timeout):
        return 1.0
    if symbolic_equal(_for_symbolic(glatex), f"${_for_symbolic(_no_dollars(pred))}$", timeout):
        return 1.0
    # "1.732" for \sqrt{3}: a decimal with >= 2 places that is the symbolic gold rounded
    if isinstance(pv, Num) and (pv.decimals or 0) >= 2 and gv is None and not isinstance(pv.value, float):
        value = symbolic_equal(glatex, "", timeout, numeric=True)
        if value is not None and _rounds_to(Fraction(value), pv):
            return 0.5 if half else 1.0
    if half and pv is not None and gv is not None and _near(pv, gv, window):
        return 0.5
    return 0.0
