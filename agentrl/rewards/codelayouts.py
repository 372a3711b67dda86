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

This module reads the layouts; the tests it builds are :mod:`agentrl.rewards.codetests`'s (with each harness's
imports; those of Python test code :mod:`agentrl.rewards.codepytests`'s), the comparisons they name
:mod:`agentrl.rewards.codecompare`'s.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from dataclasses import dataclass
from typing import Any, Callable

# the comparisons and the test builders, where users have imported them from since before the split
from agentrl.rewards.codecompare import stdout_apps, stdout_decimal, stdout_lines, value_equal, value_equal_apps
from agentrl.rewards.codetests import (APPS_PRELUDE, RLLM_PRELUDE, STAR_PRELUDE, VERL_PRELUDE, Suite, TestLayoutError,
                                       assert_test, call_test, json_field, stdio_test, strings_field)
from agentrl.rewards.codepytests import PYTEST_FILE, humaneval, leetcode, pytest_file

__all__ = ["KNOWN", "LAYOUTS", "Layout", "Suite", "TestLayoutError", "applies", "pytest_file", "read_suite",
           "stdout_apps", "stdout_decimal", "stdout_lines", "value_equal", "value_equal_apps"]


# ---------------------------------------------------------------- the layouts
def _cases(value: Any, where: str) -> list:
    cases = json_field(value, where)
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
    info = json_field(f["verification_info"], "metadata.verification_info")
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
    io_ = json_field(f["input_output"], "metadata.input_output")
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


def _mbpp(f: dict) -> Suite:
    imports = "\n".join(strings_field(f.get("test_imports") or [], "metadata.test_imports"))
    setup = f.get("test_setup_code") or ""
    if not isinstance(setup, str):
        raise TestLayoutError("metadata.test_setup_code must be Python code (text)")
    tests = [assert_test(t, f"metadata.test_list[{n}]", imports)
             for n, t in enumerate(strings_field(f["test_list"], "metadata.test_list"))]
    return Suite("mbpp", tests, prelude=imports, setup=setup, timeout=3.0)


def _acecoder(f: dict) -> Suite:
    tests = [assert_test(t, f"metadata.test_cases[{n}]")
             for n, t in enumerate(strings_field(f["test_cases"], "metadata.test_cases"))]
    return Suite("acecoder", tests, timeout=3.0)


def _kodcode_field(f: dict) -> tuple[str, str] | None:
    """(pytest file, where): KodCode's `test`, or rLLM's ground truth for its KodCode rows."""
    if isinstance(f.get("test"), str) and re.search(r"^\s*def test|\bsolution\b", f["test"], re.M):
        return f["test"], "metadata.test"
    value, where = _ground_truth(f)
    if isinstance(value, str) and PYTEST_FILE.search(value):
        return value, where
    return None


def _kodcode(f: dict) -> Suite:
    return pytest_file(*_kodcode_field(f))


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
    tests = json_field(f["tests"], "metadata.tests") if isinstance(f["tests"], str) and f["tests"].lstrip()[:1] in "[{" \
        else f["tests"]
    if isinstance(tests, str) and PYTEST_FILE.search(tests):
        return pytest_file(tests, "metadata.tests")  # rLLM's KodCode rows: the pytest file, run test by test
    if isinstance(tests, str):
        tests = [tests]  # one Python test, checked as such
    if isinstance(tests, dict):
        if isinstance(tests.get("functional"), str):
            return leetcode(f, tests)
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
           lambda f: _has("test")(f) and _has("entry_point")(f), humaneval),
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

