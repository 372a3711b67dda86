"""The tests of coding datasets as people download them, read the way each dataset's own harness reads them.

``read_suite(fields)`` looks at a row's fields (``item.metadata``, where ``agentrl data convert`` keeps a peer
row's columns under their own names) and returns a ``Suite``: the layout's name, the tests as
``agentrl.sandbox`` runs them, the imports that layout's harness gives the code, setup code run after the
solution in its own process, and the harness's time limit per test. Layouts, most specific first:

    open-r1        verification_info {language, test_cases: [{input, output, type: stdin_stdout}]}
    livecodebench  public_test_cases / private_test_cases (JSON, or the compressed private form), metadata.func_name
    taco           input_output {inputs, outputs, fn_name?} (TACO and APPS)
    verl           reward_model.ground_truth {inputs, outputs, fn_name?} or {assert_case} (prime_code, sandbox_fusion)
    mbpp           test_list (+ test_setup_code, test_imports)
    acecoder       test_cases: ["assert f(1) == 2", ...]
    humaneval      test with def check(candidate) + entry_point (HumanEval, EvalPlus, LeetCodeDataset "Solution().f")
    kodcode        test (or rLLM's tests): a pytest file, its functions importing from `solution`
    leetcode       tests {"functional": "def check(candidate): ... check(Solution().f)"} (rLLM)
    deepcoder      tests: JSON text or list of {input, output, testtype|type, fn_name?} or {inputs, outputs, fn_name?}
    agentrl        tests: [{"type": "assert", "code"}, {"type": "stdio", "stdin", "expected_stdout"}, "assert ..."]

Semantics follow each harness: stdin/stdout against call-based (``fn_name``, or a method of a LeetCode
``Solution`` class), a returned tuple equals a JSON list, APPS compares numbers in the output within its
tolerance (rtol 1e-5, atol 1e-8; an expected integer exactly) and LiveCodeBench/rLLM as decimals, MBPP's setup code runs in the solution's
process. Deliberate differences, so that wrong code never passes: APPS's order-insensitive set comparison of
output tokens and open-r1's comparison of only as many lines as both outputs have are not copied.
A string is only ever run as a test when it parses as Python test code (an assert or a call): JSON text is read
as JSON. A row whose test fields match no layout raises ``TestLayoutError`` naming the known ones.
"""

from __future__ import annotations

import ast
import base64
import functools
import importlib
import io
import json
import math
import pickle
import re
import zlib
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
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


# ---------------------------------------------------------------- comparisons (trusted side, never in the sandbox)
def _lists(value: Any) -> Any:
    """Tuples as lists, all the way down: a JSON gold has no tuples."""
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    return value


def value_equal(got: Any, gold: Any) -> bool:
    """LiveCodeBench / rLLM call-based: `==`, a tuple equal to a list."""
    return _lists(got) == gold


def value_equal_apps(got: Any, gold: Any) -> bool:
    """APPS / TACO call-based: as `value_equal`, or equal to the gold's only element (APPS wraps outputs in a list)."""
    got = _lists(got)
    return got == gold or (isinstance(gold, list) and len(gold) == 1 and got == gold[0])


def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def stdout_lines(got: str, want: str) -> bool:
    """open-r1: every line equal once stripped (and as many lines)."""
    return _stripped_lines(got) == _stripped_lines(want)


def _decimals(line: str) -> list[Decimal] | None:
    """The line's tokens as finite decimals, else None. A NaN (quiet or signalling, which raises when compared)
    or an infinity is no number the expected output can equal: such a line only matches as text."""
    try:
        values = [Decimal(token) for token in line.split()]
    except InvalidOperation:
        return None
    return values if all(v.is_finite() for v in values) else None


def stdout_decimal(got: str, want: str) -> bool:
    """LiveCodeBench / rLLM stdin: lines equal once stripped, or equal as decimal numbers ("2.50" is "2.5")."""
    a, b = _stripped_lines(got), _stripped_lines(want)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x != y:
            dx = _decimals(x)
            if dx is None or dx != _decimals(y):
                return False
    return True


def _close(a: float, b: float) -> bool:  # numpy.allclose's rule
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-8 + 1e-5 * abs(b)


_INT = re.compile(r"[+-]?\d+")


def _tokens_match(s: str, t: str) -> bool:
    """APPS's number rule for one token: an expected integer is matched exactly ("7.0" and "007" are 7; the
    float tolerance would let 10**9 pass for 10**9 + 1), any other number within `_close`."""
    if _INT.fullmatch(t):
        try:
            got = Decimal(s)
        except InvalidOperation:
            return False
        return got.is_finite() and got == Decimal(t)
    try:
        return _close(float(s), float(t))
    except (ValueError, OverflowError):
        return False


def stdout_apps(got: str, want: str) -> bool:
    """APPS / TACO / verl prime_code stdin: non-empty lines equal once stripped, or token by token with numbers
    equal within numpy.allclose's tolerance (a float printed with more digits than the expected output).
    Integers are compared exactly: the tolerance is for floats (1e-5 of 10**6 would pass an answer off by 10)."""
    a = [line.strip() for line in got.split("\n") if line.strip()]
    b = [line.strip() for line in want.split("\n") if line.strip()]
    if a == b:
        return True
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        tx, ty = x.split(), y.split()
        if len(tx) != len(ty):
            return False
        for s, t in zip(tx, ty):
            if s != t and not _tokens_match(s, t):
                return False
    return True


# ---------------------------------------------------------------- building sandbox tests
def _json(value: Any, where: str) -> Any:
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


# ---------------------------------------------------------------- the layouts
def _cases(value: Any, where: str) -> list:
    cases = _json(value, where)
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise TestLayoutError(f"{where} must be a list of test objects, got {type(cases).__name__}")
    return cases


def _json_lines(text: Any, where: str) -> list:
    """LiveCodeBench's functional input: one JSON value per line, one per argument."""
    if not isinstance(text, str):
        return text if isinstance(text, list) else [text]
    try:
        return [json.loads(line) for line in text.split("\n") if line.strip()]
    except ValueError as exc:
        raise TestLayoutError(f"{where}: a line of the input is not JSON ({exc})") from None


def _json_value(text: Any, where: str) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError as exc:
        raise TestLayoutError(f"{where}: the expected output is not JSON ({exc})") from None


def _func_name(fields: dict, case: dict | None = None) -> Any:
    for meta in ((case or {}).get("metadata"), fields.get("metadata")):
        try:
            meta = json.loads(meta) if isinstance(meta, str) else meta
        except ValueError:
            meta = None
        if isinstance(meta, dict) and meta.get("func_name"):
            return meta["func_name"]
    return (case or {}).get("fn_name") or fields.get("fn_name") or fields.get("func_name")


class _StringsOnly(pickle.Unpickler):
    def find_class(self, module, name):  # a pickle that names any class or function is refused, never run
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _lcb_private(text: str, where: str) -> Any:
    """LiveCodeBench's compressed private tests: base64 of zlib of a pickled JSON string."""
    try:
        obj = _StringsOnly(io.BytesIO(zlib.decompress(base64.b64decode(text)))).load()
    except Exception as exc:  # noqa: BLE001 - any malformed blob is the same error to the user
        raise TestLayoutError(f"{where} is neither JSON nor LiveCodeBench's compressed form "
                              f"({type(exc).__name__}: {str(exc)[:100]})") from None
    return obj.decode() if isinstance(obj, bytes) else obj


def _open_r1(f: dict) -> Suite:
    info = _json(f["verification_info"], "metadata.verification_info")
    if not isinstance(info, dict) or not isinstance(info.get("test_cases"), list):
        raise TestLayoutError("metadata.verification_info must be {\"language\": \"python\", \"test_cases\": [...]}")
    language = str(info.get("language") or "python").lower()
    if language not in ("python", "python3", "py"):
        raise TestLayoutError(f"metadata.verification_info.language is {language!r}; the coding reward runs Python")
    tests = []
    for n, case in enumerate(_cases(info["test_cases"], "metadata.verification_info.test_cases")):
        where = f"metadata.verification_info.test_cases[{n}]"
        if case.get("type", "stdin_stdout") == "function_call":
            tests.append(call_test(case.get("fn_name"), case.get("input"), case.get("output"), value_equal_apps, where))
        else:
            tests.append(stdio_test(case.get("input", ""), case.get("output"), stdout_lines, where))
    return Suite("open-r1", tests, timeout=5.0)


def _livecodebench(f: dict) -> Suite:
    tests = []
    for key in ("public_test_cases", "private_test_cases"):
        value = f.get(key)
        if value in (None, "", []):
            continue
        if isinstance(value, str) and value.lstrip()[:1] not in ("[", "{"):
            value = _lcb_private(value, f"metadata.{key}")
        for n, case in enumerate(_cases(value, f"metadata.{key}")):
            where = f"metadata.{key}[{n}]"
            if case.get("testtype") == "functional":
                tests.append(call_test(_func_name(f, case), _json_lines(case.get("input"), where),
                                       _json_value(case.get("output"), where), value_equal, where))
            else:
                tests.append(stdio_test(case.get("input", ""), case.get("output"), stdout_decimal, where))
    return Suite("livecodebench", tests, prelude=STAR_PRELUDE, timeout=6.0)


def _inputs_outputs(io_: Any, where: str) -> tuple[list, list]:
    if not isinstance(io_, dict) or not isinstance(io_.get("inputs"), list) or not isinstance(io_.get("outputs"), list):
        raise TestLayoutError(f"{where} must be {{\"inputs\": [...], \"outputs\": [...], \"fn_name\": optional}}")
    if len(io_["inputs"]) != len(io_["outputs"]):
        raise TestLayoutError(f"{where} has {len(io_['inputs'])} inputs but {len(io_['outputs'])} outputs")
    return io_["inputs"], io_["outputs"]


def _taco(f: dict) -> Suite:
    io_ = _json(f["input_output"], "metadata.input_output")
    inputs, outputs = _inputs_outputs(io_, "metadata.input_output")
    fn = io_.get("fn_name")
    tests = [call_test(fn, i, o, value_equal_apps, f"metadata.input_output test {n}") if fn else
             stdio_test(i, o, stdout_apps, f"metadata.input_output test {n}")
             for n, (i, o) in enumerate(zip(inputs, outputs))]
    return Suite("taco", tests, prelude=APPS_PRELUDE, timeout=4.0)


def _ground_truth(f: dict) -> tuple[Any, str]:
    rm = f.get("reward_model")
    if isinstance(rm, dict) and "ground_truth" in rm:
        return rm["ground_truth"], "metadata.reward_model.ground_truth"
    return f.get("ground_truth"), "metadata.ground_truth"


def _verl_tests(f: dict) -> Any:
    """The parsed ground truth when it holds tests (a verl row's ground truth may be a math answer instead)."""
    value, _ = _ground_truth(f)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict) and (("inputs" in value and "outputs" in value) or "assert_case" in value):
        return value
    return None


def _verl(f: dict) -> Suite:
    gt, where = _verl_tests(f), _ground_truth(f)[1]
    if isinstance(gt.get("assert_case"), list) and any(gt["assert_case"]):
        tests = [assert_test(a, f"{where}.assert_case[{n}]") for n, a in enumerate(gt["assert_case"])]
        return Suite("verl", tests, prelude=VERL_PRELUDE, timeout=5.0)
    inputs, outputs = _inputs_outputs(gt, where)
    fn, tests = gt.get("fn_name"), []
    for n, (i, o) in enumerate(zip(inputs, outputs)):
        at = f"{where} test {n}"
        if fn:  # sandbox_fusion writes a call's arguments as JSON lines, prime_code as a list
            tests.append(call_test(fn, _json_lines(i, at), _json_value(o, at) if isinstance(i, str) else o,
                                   value_equal_apps, at))
        else:
            tests.append(stdio_test(i, o, stdout_apps, at))
    return Suite("verl", tests, prelude=VERL_PRELUDE, timeout=5.0)


def _strings(value: Any, where: str) -> list[str]:
    value = _json(value, where) if isinstance(value, str) and value.lstrip().startswith("[") else value
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TestLayoutError(f"{where} must be a list of Python assert statements")
    return value


def _mbpp(f: dict) -> Suite:
    imports = "\n".join(_strings(f.get("test_imports") or [], "metadata.test_imports"))
    setup = f.get("test_setup_code") or ""
    if not isinstance(setup, str):
        raise TestLayoutError("metadata.test_setup_code must be Python code (text)")
    tests = [assert_test(t, f"metadata.test_list[{n}]", imports)
             for n, t in enumerate(_strings(f["test_list"], "metadata.test_list"))]
    return Suite("mbpp", tests, prelude=imports, setup=setup, timeout=3.0)


def _acecoder(f: dict) -> Suite:
    tests = [assert_test(t, f"metadata.test_cases[{n}]")
             for n, t in enumerate(_strings(f["test_cases"], "metadata.test_cases"))]
    return Suite("acecoder", tests, timeout=3.0)


_ENTRY = "agentrl_entry_point"


def _entry_point(entry: Any, where: str) -> tuple[str, str]:
    """(name the test calls, code that defines it after the solution): a function name, or a method of a
    LeetCode-style class (`Solution().twoSum`), called through a function of the code's process."""
    if isinstance(entry, str) and entry.isidentifier():
        return entry, ""
    m = re.fullmatch(r"\s*([A-Za-z_]\w*)\(\)\.([A-Za-z_]\w*)\s*", entry or "") if isinstance(entry, str) else None
    if not m:
        raise TestLayoutError(f"{where} is {entry!r}; give a function name or Class().method")
    return _ENTRY, f"\n\ndef {_ENTRY}(*args, **kwargs):\n    return {m[1]}().{m[2]}(*args, **kwargs)\n"


def _prompt_context(prompt: Any, entry: str) -> str:
    """What a HumanEval-style prompt gives the code: its imports and helpers (LeetCodeDataset's ListNode),
    never the stub of the function to write."""
    if not isinstance(prompt, str) or not prompt.strip():
        return ""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "\n".join(line for line in prompt.splitlines() if re.match(r"(from\s+\S+\s+)?import\s", line))
    keep = [node for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.Assign))
            and getattr(node, "name", None) != entry and not (isinstance(node, ast.ClassDef) and node.name == "Solution")]
    return "\n".join(ast.get_source_segment(prompt, node) or "" for node in keep)


def _needs_check_call(src: str) -> bool:
    """HumanEval's test defines `check(candidate)` and the harness calls it; EvalPlus's MBPP+ tests call the
    function by name at the top level, and some rows already end with the call."""
    tree = ast.parse(src)
    defines = any(isinstance(node, ast.FunctionDef) and node.name == "check" for node in tree.body)
    calls = any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "check" for node in tree.body)
    return defines and not calls


def _humaneval(f: dict) -> Suite:
    test = python_test(f["test"], "metadata.test")
    name, setup = _entry_point(f["entry_point"], "metadata.entry_point")
    if _needs_check_call(test):
        test += f"\n\ncheck({name})\n"
    imports = "\n".join(_strings(f.get("test_imports") or [], "metadata.test_imports"))  # MBPP+ rows
    prelude = "\n".join(p for p in (imports, _prompt_context(f.get("prompt"), str(f["entry_point"]).split("(")[0])) if p)
    if imports:
        test = imports + "\n" + test
    return Suite("humaneval", [{"type": "assert", "code": test}], prelude=prelude, setup=setup, timeout=3.0)


def _leetcode(f: dict, tests: dict) -> Suite:
    src = python_test(tests["functional"], "metadata.tests.functional")
    setup = ""
    m = re.search(r"check\(\s*([A-Za-z_]\w*\(\)\.[A-Za-z_]\w*)\s*\)\s*$", src)
    if m:
        name, setup = _entry_point(m[1], "metadata.tests.functional")
        src = src[:m.start()] + f"check({name})\n"
    return Suite("leetcode", [{"type": "assert", "code": src}], prelude=RLLM_PRELUDE, setup=setup, timeout=5.0)


def _parametrize(fn: ast.FunctionDef, where: str) -> str:
    """The calls of a pytest test function: once, or once per `@pytest.mark.parametrize` value."""
    params = [a.arg for a in fn.args.args]
    for deco in fn.decorator_list:
        if (isinstance(deco, ast.Call) and ast.unparse(deco.func).endswith("mark.parametrize") and len(deco.args) >= 2):
            names = deco.args[0]
            try:
                names = ast.literal_eval(names)
            except ValueError:
                break
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            if sorted(names) != sorted(params):
                break
            values = ast.unparse(deco.args[1])
            one = len(names) == 1
            return (f"for _values in {values}:\n    {fn.name}(**dict(zip({names!r}, "
                    f"{'(_values,)' if one else '_values'})))\n")
    if params and params != ["self"]:
        raise TestLayoutError(f"{where}: test function {fn.name}({', '.join(params)}) takes pytest fixtures, which "
                              "the coding reward does not provide; drop the test or rewrite it without fixtures")
    return f"{fn.name}()\n"


def _kodcode_field(f: dict) -> tuple[str, str] | None:
    """(pytest file, where): KodCode's `test`, or rLLM's ground truth for its KodCode rows."""
    if isinstance(f.get("test"), str) and re.search(r"^\s*def test|\bsolution\b", f["test"], re.M):
        return f["test"], "metadata.test"
    value, where = _ground_truth(f)
    if isinstance(value, str) and _PYTEST_FILE.search(value):
        return value, where
    return None


def _kodcode(f: dict) -> Suite:
    return pytest_file(*_kodcode_field(f))


_PYTEST_FILE = re.compile(r"^\s*(def test\w*\s*\(|class Test\w*|from solution import|import solution\b)", re.M)


def pytest_file(src: str, where: str) -> Suite:
    """KodCode (its `test`, or rLLM's `tests`): a pytest file that imports the code as `solution`. Each test
    function is one test; it runs in the test's process with the code's functions called in the code's own
    process."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise TestLayoutError(f"{where} is not Python ({exc})") from None
    body, calls = [], []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "solution":
            continue  # the code's names are already there
        if isinstance(node, ast.Import) and any(a.name == "solution" for a in node.names):
            body.append(ast.parse("import types as _types\nsolution = _types.SimpleNamespace(**{k: v for k, v in "
                                  "globals().items() if not k.startswith('_')})").body)
            continue
        body.append([node])
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            calls.append(_parametrize(node, where))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            calls += [f"{node.name}().{item.name}()\n" for item in node.body
                      if isinstance(item, ast.FunctionDef) and item.name.startswith("test")]
    module = ast.unparse(ast.Module(body=[n for group in body for n in group], type_ignores=[]))
    return Suite("kodcode", [{"type": "assert", "code": module + "\n\n" + call} for call in calls], timeout=5.0)


def _deepcoder(f: dict, tests: Any) -> Suite:
    """rLLM's reading of DeepCoder's `tests` (JSON text): TACO's {inputs, outputs, fn_name}, or a list of
    {input, output} with testtype "stdin"/"functional" (LiveCodeBench) or type "stdin_stdout"/"function_call"
    (PrimeIntellect), or plain {input, output} (Codeforces)."""
    out = []
    if isinstance(tests, dict):
        inputs, outputs = _inputs_outputs(tests, "metadata.tests")
        fn = tests.get("fn_name")
        for n, (i, o) in enumerate(zip(inputs, outputs)):
            o = o[0] if isinstance(o, list) and len(o) == 1 else o  # rLLM unwraps TACO's one-element outputs
            where = f"metadata.tests test {n}"
            out.append(call_test(fn, i, o, value_equal, where) if fn else stdio_test(i, o, stdout_decimal, where))
        return Suite("deepcoder", out, prelude=RLLM_PRELUDE, timeout=6.0)
    for n, case in enumerate(tests):
        where = f"metadata.tests[{n}]"
        kind = case.get("testtype") or case.get("type") or "stdin"
        if kind == "functional":
            out.append(call_test(_func_name(f, case), _json_lines(case.get("input"), where),
                                 _json_value(case.get("output"), where), value_equal, where))
        elif kind == "function_call":
            out.append(call_test(_func_name(f, case), case.get("input"), case.get("output"), value_equal_apps, where))
        elif kind in ("stdin", "stdin_stdout", "stdio"):
            out.append(stdio_test(case.get("input", ""), case.get("output"), stdout_decimal, where))
        else:
            raise TestLayoutError(f"{where}: test type {kind!r} is not stdin, stdin_stdout, functional or function_call")
    return Suite("deepcoder", out, prelude=RLLM_PRELUDE, timeout=6.0)


def _agentrl(tests: list) -> Suite:
    out = []
    for n, t in enumerate(tests):
        where = f"metadata.tests[{n}]"
        if isinstance(t, str):
            out.append(assert_test(t, where))
        elif isinstance(t, dict) and t.get("type", "assert" if "code" in t else "stdio") == "assert" and "code" in t:
            out.append(assert_test(t["code"], where + ".code"))
        elif isinstance(t, dict) and "expected_stdout" in t:
            stdin, expected = t.get("stdin", ""), t["expected_stdout"]
            if not isinstance(stdin, str) or not isinstance(expected, str):
                raise TestLayoutError(f"{where}: stdin and expected_stdout must be text")
            out.append({"type": "stdio", "stdin": stdin, "expected_stdout": expected})
        else:
            raise TestLayoutError(f"{where} is not an assert test ({{\"type\": \"assert\", \"code\": ...}}) nor a "
                                  f"stdio test ({{\"type\": \"stdio\", \"stdin\": ..., \"expected_stdout\": ...}}): "
                                  f"{str(t)[:120]}")
    return Suite("agentrl", out, timeout=5.0)


def _tests_field(f: dict) -> Suite:
    tests = _json(f["tests"], "metadata.tests") if isinstance(f["tests"], str) and f["tests"].lstrip()[:1] in "[{" \
        else f["tests"]
    if isinstance(tests, str) and _PYTEST_FILE.search(tests):
        return pytest_file(tests, "metadata.tests")  # rLLM's KodCode rows: the pytest file, run test by test
    if isinstance(tests, str):
        tests = [tests]  # one Python test, checked as such
    if isinstance(tests, dict):
        if isinstance(tests.get("functional"), str):
            return _leetcode(f, tests)
        if "inputs" in tests or "outputs" in tests:
            return _deepcoder(f, tests)
        raise TestLayoutError(f"metadata.tests is an object with keys {sorted(tests)[:8]}; expected DeepCoder's "
                              "{\"inputs\", \"outputs\", \"fn_name\"} or rLLM LeetCode's {\"functional\"}")
    if not isinstance(tests, list):
        raise TestLayoutError(f"metadata.tests is {type(tests).__name__}; give a list of tests")
    if tests and all(isinstance(t, dict) and "input" in t and ("output" in t) for t in tests):
        return _deepcoder(f, tests)
    return _agentrl(tests)


@dataclass(frozen=True)
class Layout:
    name: str
    fields: str  # what a row of it holds, for messages and the README
    matches: Callable[[dict], bool]
    read: Callable[[dict], Suite]


def _has(*keys: str) -> Callable[[dict], bool]:
    return lambda f: any(f.get(k) not in (None, "", []) for k in keys)


LAYOUTS = [
    Layout("open-r1", "verification_info {language, test_cases}", _has("verification_info"), _open_r1),
    Layout("livecodebench", "public_test_cases / private_test_cases (+ metadata.func_name)",
           _has("public_test_cases", "private_test_cases"), _livecodebench),
    Layout("humaneval", "test with check(candidate) + entry_point (HumanEval, EvalPlus, LeetCodeDataset)",
           lambda f: _has("test")(f) and _has("entry_point")(f), _humaneval),
    Layout("taco", "input_output {inputs, outputs, fn_name} (TACO, APPS)", _has("input_output"), _taco),
    Layout("verl", "reward_model.ground_truth {inputs, outputs, fn_name} or {assert_case} (prime_code, "
           "sandbox_fusion)", lambda f: _verl_tests(f) is not None, _verl),
    Layout("mbpp", "test_list (+ test_setup_code, test_imports)", _has("test_list"), _mbpp),
    Layout("acecoder", "test_cases: [assert ...]", _has("test_cases"), _acecoder),
    Layout("kodcode", "test, tests or ground_truth (rLLM): a pytest file importing from solution",
           lambda f: _kodcode_field(f) is not None, _kodcode),
    Layout("deepcoder / leetcode / agentrl", "tests: JSON text or a list of {input, output, testtype} (DeepCoder), "
           "{functional} (rLLM LeetCode), [{type: assert|stdio}] (agentrl)", _has("tests"), _tests_field),
]
KNOWN = "; ".join(f"{layout.name}: {layout.fields}" for layout in LAYOUTS)


def _looks_like_tests(key: str, value: Any) -> bool:
    """A field named like tests that holds tests-like data (a `test_id` string or an `is_test` flag does not)."""
    if key in ("ground_truth", "reward_model"):
        return False  # a math answer as often as tests: only read when it holds tests
    if not ("test" in key.lower() or key in ("input_output", "verification_info")):
        return False
    if isinstance(value, str):
        return value.lstrip()[:1] in ("[", "{") or bool(re.search(r"\bassert\b|\bdef test", value))
    return isinstance(value, (list, dict)) and bool(value)


def read_suite(fields: dict) -> Suite | None:
    """The row's tests as its layout's harness reads them; None when the row has no tests (not a coding row)."""
    if not isinstance(fields, dict):
        return None
    for layout in LAYOUTS:
        if layout.matches(fields):
            suite = layout.read(fields)
            if not suite.tests:
                raise TestLayoutError(f"the row is in the {suite.layout} layout but has no tests")
            return suite
    if any(fields.get(k) not in (None, "", []) for k in ("base_input", "plus_input")):
        raise TestLayoutError("the row has EvalPlus's base_input/plus_input, whose expected outputs are the "
                              "canonical solution's: the coding reward does not compute them. Use the rows of "
                              "EvalPlus's published sets with their `test` and `entry_point` fields (the humaneval "
                              f"layout) or give the expected outputs. Known layouts: {KNOWN}")
    found = [k for k, v in fields.items() if _looks_like_tests(k, v)]
    if found:
        raise TestLayoutError(f"metadata.{found[0]} looks like tests, in no layout the coding reward knows. Known "
                              f"layouts: {KNOWN}")
    return None


def applies(fields: dict) -> bool:
    """Whether the coding reward scores this row (it has tests in a known layout)."""
    try:
        return read_suite(fields) is not None
    except TestLayoutError:
        return False
