"""Compare two expressions by evaluating them at a few points, without sympy: the math preset's fast path.

    >>> same_expression("(x+1)^2", "x^2+2x+1")
    True
    >>> same_expression("\\\\frac{t^2-1}{t-1}", "t+2")
    False
    >>> same_expression("x \\\\le 3", "3 \\\\ge x")   # inequalities too
    True
    >>> same_expression("\\\\sum_{k=1}^{n} k", "n(n+1)/2") is None   # not read here: math_verify decides
    True

``read(text)`` reads a small part of LaTeX / plain notation: integers, letters (``a``, ``x_1``, Greek),
``\\pi``, ``e``, ``i`` (the imaginary unit), ``+ - * / ^``, ``\\cdot``, ``\\times``, implicit products,
parentheses and braces, ``\\frac``, ``\\sqrt``, ``\\sqrt[n]``, ``|x|`` and the functions sin ... ln, exp; one
equation or inequality of them; matrices of them. Anything else (decimals, commas, words, sums, ``\\infty``
...) is not read (None) and is left to math_verify.

Two readable expressions are equal when they agree at points where every letter takes a value of either
sign (complex arithmetic, principal branches): agreeing at several such points by chance is practically
impossible. Two equations are equal when one's difference of sides is a constant multiple of the other's
(a positive multiple for inequalities); otherwise math_verify decides. A disagreement is final unless a branch (a root, a logarithm, an absolute value, a fractional or
symbolic power) is involved, where sympy may assume positive letters: then it is left to math_verify too.
"""

from __future__ import annotations

import cmath
import re
from functools import lru_cache

MAX_LEN = 200
_TOKEN = re.compile(
    r"\s+|\\[,;:! ]|~|\\left|\\right|\\displaystyle"  # spacing and sizing: dropped
    r"|(?P<num>\d+(?:\.\d+)?)"
    r"|(?P<cmd>\\[A-Za-z]+)"
    r"|(?P<word>[A-Za-z]+)"
    r"|(?P<sym>[-+*/^(){}\[\]|_])"
)
_FUNCS = {"sin": cmath.sin, "cos": cmath.cos, "tan": cmath.tan, "cot": lambda z: 1 / cmath.tan(z),
          "sec": lambda z: 1 / cmath.cos(z), "csc": lambda z: 1 / cmath.sin(z), "ln": cmath.log, "log": cmath.log,
          "exp": cmath.exp, "sinh": cmath.sinh, "cosh": cmath.cosh, "tanh": cmath.tanh, "sqrt": cmath.sqrt}
_BRANCHY = {"sqrt", "root", "abs", "ln", "log", "pow"}
_GREEK = {"alpha", "beta", "gamma", "delta", "theta", "phi", "varphi", "omega", "lambda", "mu", "sigma", "tau", "rho",
          "psi", "eta", "zeta", "kappa", "nu", "xi", "chi", "epsilon", "varepsilon", "vartheta"}
_OPS = {"\\cdot": "*", "\\times": "*", "\\div": "/", "\\dfrac": "\\frac", "\\tfrac": "\\frac", "\\cfrac": "\\frac"}


class _Unread(Exception):
    pass


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise _Unread(text[pos])
        pos = m.end()
        if m.group("num"):
            if "." in m.group("num"):
                raise _Unread("decimal")  # rounded decimals: math_verify's precision rules decide
            out.append(m.group("num"))
        elif m.group("cmd"):
            out.append(_OPS.get(m.group("cmd"), m.group("cmd")))
        elif m.group("word"):
            w = m.group("word")
            if w in _FUNCS:
                out.append(w)
            elif w == "pi":
                out.append("\\pi")
            elif len(w) <= 2:
                out.extend(w)  # "ab" is a times b
            else:
                raise _Unread(w)  # a word
        elif m.group("sym"):
            out.append(m.group("sym"))
    return out


class _Parser:
    """Recursive descent over the tokens; builds nested tuples evaluated by ``_eval``."""

    def __init__(self, tokens: list[str]):
        self.t, self.i, self.branchy = tokens, 0, False

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want=None):
        tok = self.peek()
        if tok is None or want is not None and tok != want:
            raise _Unread(f"expected {want}")
        self.i += 1
        return tok

    def expr(self):
        node = self.term()
        while self.peek() in ("+", "-"):
            node = (self.take(), node, self.term())
        return node

    def term(self):
        node = self.unary()
        while True:
            tok = self.peek()
            if tok in ("*", "/"):
                node = (self.take(), node, self.unary())
            elif tok is not None and self.starts_factor(tok):
                node = ("*", node, self.power())
            else:
                return node

    def starts_factor(self, tok: str) -> bool:
        return (tok.isdigit() or tok.isalpha() or tok in ("(", "{", "\\frac", "\\sqrt", "\\pi")
                or tok[1:] in _FUNCS or tok[1:] in _GREEK)

    def unary(self):
        if self.peek() in ("-", "+"):
            sign = self.take()
            inner = self.unary()
            return ("neg", inner) if sign == "-" else inner
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek() == "^":
            self.take()
            exponent = self.exponent()
            if not (isinstance(exponent, tuple) and exponent[0] == "num"):
                self.branchy = True  # a symbolic or fractional power
            return ("^", base, exponent)
        return base

    def exponent(self):
        tok = self.peek()
        if tok == "{":
            return self.group("{", "}")
        if tok == "(":
            return self.group("(", ")")
        if tok == "-":
            self.take()
            return ("neg", self.exponent())
        tok = self.take()
        if tok.isdigit():
            return ("num", int(tok[0])) if len(tok) == 1 else _raise("x^23")
        if tok.isalpha() and len(tok) == 1:
            return ("var", tok)
        raise _Unread("exponent")

    def group(self, open_, close):
        self.take(open_)
        node = self.expr()
        self.take(close)
        return node

    def atom(self):
        tok = self.peek()
        if tok is None:
            raise _Unread("end")
        if tok.isdigit():
            self.take()
            return ("num", int(tok))
        if tok in ("(", "{"):
            return self.group(tok, ")" if tok == "(" else "}")
        if tok == "|":
            self.branchy = True
            return ("abs", self.group("|", "|"))
        if tok == "\\frac":
            self.take()
            nxt = self.peek()
            if nxt is not None and nxt.isdigit() and len(nxt) == 2:  # \frac94 is 9/4
                self.take()
                return ("/", ("num", int(nxt[0])), ("num", int(nxt[1])))
            return ("/", self.argument(), self.argument())
        if tok == "\\sqrt":
            self.take()
            self.branchy = True
            if self.peek() == "[":
                index = self.group("[", "]")
                return ("^", self.argument(), ("/", ("num", 1), index))
            return ("sqrt", self.argument())
        if tok == "\\pi":
            self.take()
            return ("const", cmath.pi)
        name = tok[1:] if tok.startswith("\\") else tok
        if name in _FUNCS:
            self.take()
            power = None
            if self.peek() == "^":  # \sin^2(x)
                self.take()
                power = self.exponent()
            if self.peek() not in ("(", "{"):
                raise _Unread("function without parentheses")
            self.branchy |= name in _BRANCHY
            node = ("fn", name, self.group(self.peek(), ")" if self.peek() == "(" else "}"))
            return ("^", node, power) if power is not None else node
        if tok.startswith("\\") and name in _GREEK or tok.isalpha() and len(tok) == 1:
            self.take()
            if tok == "e":
                return ("const", cmath.e)
            if tok == "i":
                return ("const", 1j)
            if self.peek() == "_":  # x_1, a_{n}: one name
                self.take()
                sub = self.take()
                if sub == "{":
                    parts = []
                    while self.peek() not in ("}", None):
                        parts.append(self.take())
                    self.take("}")
                    sub = "".join(parts)
                name = f"{name}_{sub}"
            return ("var", name)
        raise _Unread(tok)

    def argument(self):
        if self.peek() == "{":
            return self.group("{", "}")
        tok = self.take()  # \frac12
        if tok.isdigit():
            return ("num", int(tok[0])) if len(tok) == 1 else _raise("\\frac123")
        if tok.isalpha() and len(tok) == 1:
            return ("var", tok)
        raise _Unread("argument")


def _raise(what):
    raise _Unread(what)


def _eval(node, env):
    op = node[0]
    if op == "num" or op == "const":
        return node[1]
    if op == "var":
        return env[node[1]]
    if op == "neg":
        return -_eval(node[1], env)
    if op == "abs":
        return abs(_eval(node[1], env))
    if op == "sqrt":
        return cmath.sqrt(_eval(node[1], env))
    if op == "fn":
        return _FUNCS[node[1]](_eval(node[2], env))
    a, b = _eval(node[1], env), _eval(node[2], env)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    if isinstance(b, complex) and b.imag == 0 and b.real == int(b.real) and abs(b.real) <= 64:
        b = int(b.real)
    if isinstance(b, int) and isinstance(a, int) and abs(b) <= 64 and abs(a) < 10**6:
        return a**b if b >= 0 else 1 / a**-b
    return complex(a) ** complex(b)  # 2^{9^9} overflows here (and that point is skipped), never hangs


def _names(node, out):
    if node[0] == "var":
        out.add(node[1])
    for child in node[1:]:
        if isinstance(child, tuple):
            _names(child, out)
    return out


@lru_cache(maxsize=4096)
def read(text: str):
    """(tree, letters, branchy) for an expression this module reads, else None."""
    s = str(text).strip().strip("$").strip()
    if not s or len(s) > MAX_LEN or sum(s.count(c) for c in "({[|") > 40:  # bounded depth
        return None
    try:
        p = _Parser(_tokens(s))
        tree = p.expr()
        if p.i != len(p.t):
            return None
    except (_Unread, IndexError):
        return None
    return tree, frozenset(_names(tree, set())), p.branchy


def _points(names, count: int = 4):
    ordered = sorted(names)
    for n in range(count):  # every letter takes both signs across the points; values far from small integers
        yield {v: (-1) ** (n + j) * (0.6180339887 + 0.4142135623 * ((n * 7 + j * 3) % 5)) for j, v in enumerate(ordered)}


def _values(ra, rb):
    """Both sides' values at each point where both are defined and finite."""
    for env in _points(ra[1] | rb[1]):
        try:
            va, vb = complex(_eval(ra[0], env)), complex(_eval(rb[0], env))
        except (ZeroDivisionError, OverflowError, ValueError):
            continue
        if abs(va) < 1e12 and abs(vb) < 1e12:
            yield va, vb


def _close(va: complex, vb: complex) -> bool:
    return abs(va - vb) <= 1e-9 * max(1.0, abs(va), abs(vb))


def _same(a: str, b: str) -> bool | None:
    ra, rb = read(a), read(b)
    if ra is None or rb is None:
        return None
    agreed = 0
    for va, vb in _values(ra, rb):
        if not _close(va, vb):
            return None if ra[2] or rb[2] else False
        agreed += 1
    return True if agreed >= 3 else None


_MATRIX = re.compile(r"^\(?\s*\\begin\{([pbB]?matrix)\}(.*)\\end\{\1\}\s*\)?$", re.S)
_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mathit|mathcal|mathscr|boldsymbol|bm|operatorname)\s*\{([^{}]*)\}")


def _entries(text: str) -> list[list[str]] | None:
    m = _MATRIX.match(text.strip())
    if not m:
        return None
    rows = [r for r in re.split(r"\\\\", m.group(2)) if r.strip()]
    return [[c.strip() for c in r.split("&")] for r in rows]


def _multiple(da, db, positive: bool = False) -> bool | None:
    """True when one read difference is a constant multiple of the other (a positive real one with ``positive``)
    at 3 points or more; None when it is not, or too few points settle it: left to math_verify."""
    ratio, agreed = None, 0
    for va, vb in _values(da, db):
        if abs(vb) < 1e-12 or abs(va) < 1e-12:
            continue
        ratio = ratio if ratio is not None else va / vb
        if not _close(va, ratio * vb) or positive and (ratio.real <= 0 or abs(ratio.imag) > 1e-12):
            return None
        agreed += 1
    return True if agreed >= 3 else None


def _same_equation(a: str, b: str) -> bool | None:
    """Two equations with the same solutions: one's two sides differ by a constant multiple of the other's."""
    la, _, ra_ = a.partition("=")
    lb, _, rb_ = b.partition("=")
    da, db = read(f"({la})-({ra_})"), read(f"({lb})-({rb_})")
    if da is None or db is None or not (da[1] | db[1]):
        return None
    return _multiple(da, db)


_RELATION = re.compile(r"(<=|>=|\\leq?(?![a-z])|\\geq?(?![a-z])|\\[lg]t(?![a-z])|<|>)")
_CANON = {"<=": "<=", ">=": ">=", "\\le": "<=", "\\leq": "<=", "\\ge": ">=", "\\geq": ">=", "\\lt": "<", "\\gt": ">",
          "<": "<", ">": ">"}


def _same_relation(a: str, b: str) -> bool | None:
    """Two inequalities with the same solutions: written as "d > 0" or "d >= 0", one's d is a positive
    multiple of the other's. Only ever says True; anything else is left to math_verify."""
    sides = []
    for text in (a, b):
        parts = _RELATION.split(text)
        if len(parts) != 3:
            return None
        left, op, right = parts[0], _CANON[parts[1]], parts[2]
        d = f"({left})-({right})" if op in (">", ">=") else f"({right})-({left})"
        sides.append((op.replace("<", ">"), read(d)))
    (op_a, da), (op_b, db) = sides
    if op_a != op_b or da is None or db is None or not (da[1] | db[1]):
        return None
    return _multiple(da, db, positive=True)


def same_expression(a: str, b: str) -> bool | None:
    """True / False when both are expressions (or matrices of them, or equations) read here and the points
    settle it; None to ask math_verify."""
    a, b = (_WRAP.sub(r"\1", x.split("\\approx")[0]) for x in (a, b))  # 1/\sqrt{3} \approx 0.577: the exact value
    if "\\begin" in a and "\\begin" in b:
        ma, mb = _entries(a), _entries(b)
        if ma is None or mb is None or [len(r) for r in ma] != [len(r) for r in mb]:
            return None
        verdicts = [_same(x, y) for ra, rb in zip(ma, mb) for x, y in zip(ra, rb)]
        return False if False in verdicts else None if None in verdicts else True
    a, b = (x.strip()[1:-1] if re.fullmatch(r"\s*\[[^\[\],]*\]\s*", x) else x for x in (a, b))  # [5]: one value
    if a.count("=") == 1 and b.count("=") == 1 and not re.search(r"[<>]|\\(?:[lgn]e|leq|geq)(?![a-z])", a + b):
        return _same_equation(a, b)
    if _RELATION.search(a) and _RELATION.search(b) and "=" not in (a + b).replace("<=", "").replace(">=", ""):
        return _same_relation(a, b)
    return _same(a, b)
