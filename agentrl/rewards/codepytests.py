"""Coding rows whose tests are Python test code: HumanEval's ``check(candidate)`` (EvalPlus, LeetCodeDataset's
``Solution().f``), rLLM's LeetCode ``functional`` check, and KodCode's pytest files importing ``solution``.

    humaneval({"test": "def check(candidate):\n    assert candidate(1) == 2", "entry_point": "inc"})
    leetcode(fields, {"functional": "def check(candidate): ...\ncheck(Solution().twoSum)"})
    pytest_file("from solution import inc\n\ndef test_inc():\n    assert inc(1) == 2", "metadata.test")

Each returns a :class:`agentrl.rewards.codetests.Suite`; :mod:`agentrl.rewards.codelayouts` decides which a
row's fields are.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from agentrl.rewards.codetests import RLLM_PRELUDE, Suite, TestLayoutError, python_test, strings_field


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


def humaneval(f: dict) -> Suite:
    test = python_test(f["test"], "metadata.test")
    name, setup = _entry_point(f["entry_point"], "metadata.entry_point")
    if _needs_check_call(test):
        test += f"\n\ncheck({name})\n"
    imports = "\n".join(strings_field(f.get("test_imports") or [], "metadata.test_imports"))  # MBPP+ rows
    prelude = "\n".join(p for p in (imports, _prompt_context(f.get("prompt"), str(f["entry_point"]).split("(")[0])) if p)
    if imports:
        test = imports + "\n" + test
    return Suite("humaneval", [{"type": "assert", "code": test}], prelude=prelude, setup=setup, timeout=3.0)


def leetcode(f: dict, tests: dict) -> Suite:
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


PYTEST_FILE = re.compile(r"^\s*(def test\w*\s*\(|class Test\w*|from solution import|import solution\b)", re.M)


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
