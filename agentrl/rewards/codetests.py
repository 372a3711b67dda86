"""The tests of a coding row as ``agentrl.sandbox`` runs them, and the imports each harness gives the code.

    suite = Suite("mbpp", [assert_test("assert add(1, 2) == 3", "test_list[0]")], prelude=APPS_PRELUDE)
    suite.program(code)                 # the code as the harness runs it: its imports, the code, setup, entries
    call_test("add", [1, 2], 3, value_equal, "tests[0]")   # a call-based test, compared on the trusted side
    stdio_test("1 2\n", "3\n", stdout_lines, "tests[1]")   # a stdin/stdout test

:mod:`agentrl.rewards.codelayouts` reads a row's fields in its dataset's layout into these; a field that
cannot be a test raises :class:`TestLayoutError` naming it.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import re
from dataclasses import dataclass
from typing import Any, Callable


class TestLayoutError(ValueError):
    """A row's tests cannot be read: the message says which field, what is wrong, and the known layouts."""

    __test__ = False  # not a pytest test class


@dataclass
class Suite:
    layout: str
    tests: list[dict]  # sandbox tests: {"type": "assert", "code"} / {"type": "stdio", ...}, each maybe with "equal"
    prelude: str = ""  # what the layout's harness puts before the code (its imports)
    setup: str = ""  # what it runs after the code, in the code's process (MBPP's test_setup_code)
    timeout: float = 5.0  # seconds per test

    def program(self, code: str) -> str:
        """The code as the harness runs it. A `from __future__` import of the code stays first; after the
        code come the harness's setup and, for call-based tests, the entry each test calls."""
        entries = "".join(_entry(fn) for fn in sorted({t["entry"] for t in self.tests if t.get("entry")}))
        if not self.prelude and not self.setup and not entries:
            return code
        future = [line for line in code.splitlines() if _FUTURE.match(line)]
        body = "\n".join(line for line in code.splitlines() if not _FUTURE.match(line)) if future else code
        return "\n".join([*future, _needed(self.prelude, code), body, self.setup, entries])


_FUTURE = re.compile(r"^from\s+__future__\s+import\b")
_WORD = re.compile(r"[A-Za-z_]\w*")


@functools.lru_cache(maxsize=32)
def _bindings(prelude: str) -> tuple[tuple[str, frozenset[str] | None], ...] | None:
    """Each line of a harness's imports with the names it binds (a star import: the module's public names);
    None for a prelude that is not one statement a line (a HumanEval prompt's helpers: kept whole)."""
    out = []
    for line in prelude.splitlines():
        try:
            node = ast.parse(line).body[0] if line.strip() else None
        except SyntaxError:
            return None
        if isinstance(node, ast.Import):
            names = {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.names[0].name == "*" and node.module in _STAR:
            module = importlib.import_module(node.module)  # the standard library's modules only, here
            names = set(getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")])
        elif isinstance(node, ast.ImportFrom) and node.names[0].name == "*":
            names = None
        elif isinstance(node, ast.ImportFrom):
            names = {a.asname or a.name for a in node.names}
        else:
            names = None  # a statement (sys.setrecursionlimit): always kept
        out.append((line, frozenset(names) if names is not None else None))
    return tuple(out)


def _needed(prelude: str, code: str) -> str:
    """The harness's import lines that bind a name the code (or a kept statement) mentions. A line binding no
    name of the code cannot change what it does, and each import costs time in every test's process (the
    star imports of LiveCodeBench's harness about 25 ms, numpy 100 ms and more)."""
    lines = _bindings(prelude)
    if lines is None:
        return prelude
    words = set(_WORD.findall(code))
    for line, names in lines:
        if names is None:
            words |= set(_WORD.findall(line))
    return "\n".join(line for line, names in lines if names is None or names & words)


# ---------------------------------------------------------------- the imports each harness gives the code
_STAR = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
         "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")
# LiveCodeBench, verl prime_code and sandbox_fusion: every name of these modules, and the modules
STAR_PRELUDE = "\n".join([f"from {m} import *" for m in _STAR] + [f"import {m}" for m in _STAR])
VERL_PRELUDE = STAR_PRELUDE + "\nsys.setrecursionlimit(6 * 10**5)"
# APPS / TACO testing_util
APPS_PRELUDE = """import sys
import time
import itertools
from itertools import accumulate, product, permutations, combinations
import collections
from collections import Counter, OrderedDict, deque, defaultdict, ChainMap
from functools import lru_cache
import math
from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2
import fractions
from typing import List, Tuple
import random
import heapq
from heapq import *
import numpy as np
"""
# rLLM's code reward (DeepCoder)
RLLM_PRELUDE = """from itertools import accumulate, chain, combinations, count, permutations, product, groupby, islice, repeat
from copy import deepcopy
from string import ascii_lowercase, ascii_uppercase
from math import floor, log2, log10, sqrt, comb, gcd, ceil, inf, isqrt, factorial, atan2, pi
from collections import defaultdict, deque, Counter
from bisect import bisect, bisect_left, bisect_right, insort
from heapq import heappush, heappop, heapify, merge, nlargest, nsmallest, heapreplace
from functools import reduce, cache, lru_cache, cmp_to_key
from random import randrange, shuffle
from operator import itemgetter, sub, xor, or_
from re import search as re_search
from os.path import commonprefix
from typing import List, Tuple, Dict, Set, Optional, Union, Any, Callable, Iterable, Iterator, Generator, Deque
import copy, string, math, collections, bisect, heapq, functools, random, itertools, operator, re, datetime
from time import time
from math import log, prod
from collections import OrderedDict
from itertools import zip_longest, cycle, pairwise
from functools import partial
from operator import iand
import sys
import io, os
import numpy as np
import pandas as pd
"""


# ---------------------------------------------------------------- building sandbox tests
def json_field(value: Any, where: str) -> Any:
    """A field that holds JSON text (as most published rows do) or the parsed value."""
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise TestLayoutError(f"{where} is text but not JSON ({exc}); it should hold the tests as JSON") from None
    return value


def _literal(value: Any, where: str) -> str:
    text = repr(value)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        raise TestLayoutError(f"{where}: {text[:80]} cannot be passed as a Python value") from None
    return text


def _callee(fn_name: Any, where: str) -> str:
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise TestLayoutError(f"{where}: fn_name {fn_name!r} is not a Python function name")
    # the harnesses call a method of a LeetCode-style `class Solution` when the code defines one
    return f'(Solution().{fn_name} if hasattr(globals().get("Solution"), "{fn_name}") else {fn_name})'


def _entry(fn_name: str) -> str:
    """What a call-based test calls: the code's function, or a method of its LeetCode-style `class Solution`
    as the harnesses do. Defined after the code, so the test itself is a plain call with literal arguments,
    which the sandbox evaluates alone in the code's process and compares here (with the test's `equal`)."""
    return (f"\n\ndef {ENTRY}{fn_name}(*args):\n"
            f"    return {_callee(fn_name, 'fn_name')}(*args)\n")


ENTRY = "agentrl_entry_"


def call_test(fn_name: str, args: Any, gold: Any, equal: Callable, where: str) -> dict:
    """`fn_name(*args)` evaluated in the code's process; its value is compared here with `equal`."""
    if not isinstance(args, (list, tuple)):
        args = [args]
    _callee(fn_name, where)  # a Python name, or an error that says where
    call = ", ".join(_literal(a, where) for a in args)
    code = f"assert {ENTRY}{fn_name}({call}) == {_literal(gold, where)}"
    return {"type": "assert", "code": code, "equal": equal, "entry": fn_name}


def stdio_test(stdin: Any, stdout: Any, equal: Callable, where: str) -> dict:
    stdin = "" if stdin is None else stdin  # sandbox_fusion: no input is empty input
    stdin = "\n".join(map(str, stdin)) if isinstance(stdin, list) else stdin
    stdout = "\n".join(map(str, stdout)) if isinstance(stdout, list) else stdout
    if not isinstance(stdin, str) or not isinstance(stdout, str):
        raise TestLayoutError(f"{where}: stdin and expected output must be text, got {type(stdin).__name__} and "
                              f"{type(stdout).__name__}")
    return {"type": "stdio", "stdin": stdin, "expected_stdout": stdout, "equal": equal}


def python_test(src: Any, where: str) -> str:
    """`src` if it is Python test code: it parses and asserts or calls something. JSON text (a list or an
    object) is valid Python too, but tests nothing: it is refused, never run as an assert."""
    if not isinstance(src, str) or not src.strip():
        raise TestLayoutError(f"{where} is {type(src).__name__}, not Python test code")
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise TestLayoutError(f"{where} is not Python test code ({type(exc).__name__}: {exc}): {src[:80]!r}") from None
    if not any(isinstance(node, (ast.Assert, ast.Call)) for node in ast.walk(tree)):
        raise TestLayoutError(f"{where} is not Python test code (no assert, no call): {src[:80]!r}. A test "
                              "written as JSON belongs in a layout that reads JSON (e.g. tests: [{\"input\": ..., "
                              "\"output\": ...}])")
    return src


def _simple_assert(src: str) -> bool:
    """`assert <expr> == <literal>`: the sandbox evaluates the expression in the code's own process."""
    try:
        body = ast.parse(src).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if len(body) != 1 or not isinstance(body[0], ast.Assert) or not isinstance(body[0].test, ast.Compare):
        return False
    test = body[0].test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    for node in (test.left, test.comparators[0]):
        try:
            ast.literal_eval(node)
            return True
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
    return False


def assert_test(src: str, where: str, imports: str = "") -> dict:
    """A Python assert test; `imports` (the harness's, e.g. MBPP's test_imports) go before one that runs in the
    test's own process (anything but `expr == literal`)."""
    src = python_test(src, where)
    if imports and not _simple_assert(src):
        src = imports + "\n" + src
    return {"type": "assert", "code": src}


def strings_field(value: Any, where: str) -> list[str]:
    """A field of Python test strings: a list of them, JSON text of one, or one string."""
    value = json_field(value, where) if isinstance(value, str) and value.lstrip().startswith("[") else value
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TestLayoutError(f"{where} must be a list of Python assert statements")
    return value
