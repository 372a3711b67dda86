"""Build benchmarks/data/peer_suites.jsonl: answer-equivalence cases from eleven peers' graders and tests, as data.

Reads (never runs) the files below at the commits named, from local git copies of the repositories:

    python benchmarks/data/extract_peer_suites.py --git-dir '/path/to/{owner}+{name}/repo' \\
        > benchmarks/data/peer_suites.jsonl

Each row: ``gold``, ``prediction``, ``equivalent`` (the peer's expected verdict), ``category`` (the peer's test
name), ``source`` (repo@commit:path), ``settings`` (per-case options the peer passed, e.g. ``precision``), and
``split``: "heldout" for a fixed third of the rows (chosen by a hash of gold and prediction, before the preset was
changed) that the math preset is never tuned on, else "tune". A ``note`` says where a label is not the peer's own:

- parametrized cases are read with ``ast`` (constants, lists, tuples, dicts, and ``Language.X`` as "x");
- tests written as calls (``fn(completions=..., answer=...)`` then ``assert reward == 1.0``) are paired by name;
- Qwen2.5-Math's grader lists the pairs it was debugged on without verdicts, and simple-evals' equality prompt
  gives worked examples: those labels are mathematical equality, said so in ``note``;
- cases about response format rather than equality (a required ``<think>`` tag, ``####``) are left out, and so are
  rows already in benchmarks/data (math_verify_cases.jsonl, math_pairs.jsonl) and repeats.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent

SOURCES = [  # (repo, commit, path, reader)
    ("huggingface/lighteval", "3fd15266bc8448b797e61462d293aa3fd40b3580", "tests/unit/metrics/test_extractive_match.py",
     "parametrize"),
    ("huggingface/Math-Verify", "5d148cfaaf99214c2e4ffb4bc497ab042c592a7a", "tests/test_yujianll.py", "parametrize"),
    ("huggingface/Math-Verify", "5d148cfaaf99214c2e4ffb4bc497ab042c592a7a", "tests/test_strict.py", "parametrize"),
    ("huggingface/Math-Verify", "5d148cfaaf99214c2e4ffb4bc497ab042c592a7a", "examples/model_outputs.csv", "csv"),
    ("NovaSky-AI/SkyRL", "a9564572eb8e91076be43c1bd5e4615e3de17265", "skyrl-gym/tests/test_gsm8k.py", "parametrize"),
    ("PrimeIntellect-ai/verifiers", "a60a606ecc4d309247edf9ff92c3eabca362781f", "tests/test_math_rubric.py",
     "parametrize"),
    ("inclusionAI/AReaL", "4aef98d8d818af55b43621aaadba047ae10f4e77", "tests/test_math_verify_reward.py", "calls"),
    ("rllm-org/rllm", "9beb6e0f676a46d38858991fd79ac5f8e0b16d4c", "tests/rewards/test_math_reward.py", "rllm"),
    ("huggingface/open-r1", "1416fa0cf21595d2083b399a2a0bbddd7f6e9563", "tests/test_rewards.py", "open_r1"),
    ("NVIDIA/NeMo-Skills", "0b012df8a09cd4730d31b16e90a0d8f13d145fb8", "tests/test_math_equal.py", "parametrize"),
    ("THUDM/slime", "624b824a898ab0ec1fcb4d373004c7f3852bf515", "tests/test_rm_math.py", "parametrize"),
    ("THUDM/slime", "624b824a898ab0ec1fcb4d373004c7f3852bf515", "tests/test_rm_math.py", "asserts"),
    ("QwenLM/Qwen2.5-Math", "a45202bd16f1ec06f433442dc1152d0074773465", "evaluation/grader.py", "qwen"),
    ("openai/simple-evals", "ee3b0318d8d1d9d72755a4120879be65f7c07e9e", "common.py", "simple_evals"),
]

GOLD_KEYS = ("gold", "answer", "ground_truth", "solution", "gt")
PRED_KEYS = ("pred", "prediction", "completion", "completions", "output", "model_response", "given")
# Tests whose parametrized cases carry no verdict: the test's name says it (NeMo-Skills checks both orders).
IMPLIED = {"test_correct_examples": True, "test_incorrect_examples": False,
           "test_grade_answer_mathd_canonical_equivalences": True}
LABEL_KEYS = ("expected", "result", "expected_reward")


def _value(node):
    """A literal (``Language.CHINESE`` read as "chinese", ``5 / 2`` as 2.5); anything else raises ValueError."""
    if isinstance(node, ast.Attribute):
        return node.attr.lower()
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # NeMo-Skills writes 5 / 2
        return _value(node.left) / _value(node.right)
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    return ast.literal_eval(node)


def _pick(values: dict, keys):
    for k in keys:
        if k in values:
            return values.pop(k)
    return None


def read_parametrize(text: str):
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in fn.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
                continue
            names = [n.strip() for n in ast.literal_eval(deco.args[0]).split(",")]
            try:
                rows = _value(deco.args[1])
            except ValueError:
                print(f"skipped {fn.name} (its cases are not literals)", file=sys.stderr)
                continue
            for row in rows:
                if names == ["output_pair"] and fn.name in IMPLIED:  # NeMo-Skills: equal (or not) both ways
                    a, b = row
                    if a is None or b is None:
                        continue
                    yield fn.name, str(a), str(b), IMPLIED[fn.name], {}, None
                    yield fn.name, str(b), str(a), IMPLIED[fn.name], {}, None
                    continue
                if len(names) == 1 and not isinstance(row, dict):
                    continue
                if len(names) == 1:  # verifiers: {"completion": ..., "answer": ...}
                    values = dict(row)
                    label = "invalid" not in fn.name
                else:
                    values = dict(zip(names, row))
                    label = _pick(values, LABEL_KEYS)
                    label = IMPLIED.get(fn.name) if label is None else label
                gold, pred = _pick(values, GOLD_KEYS), _pick(values, PRED_KEYS)
                if gold is None or pred is None or label is None:
                    continue
                if values.pop("strict", True) is False:
                    continue  # math_verify's non-strict mode (f(x) = f(y)) is an opt-in, not the default
                yield fn.name, gold, pred, bool(label), values, None


def read_calls(text: str):
    """``reward = fn(..., completions=X, answer=Y)`` followed by ``assert reward == V``."""
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        pending = {}
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
                kw = {k.arg: k.value for k in stmt.value.keywords}
                if "completions" in kw and "answer" in kw:
                    try:
                        pending[stmt.targets[0].id] = (_value(kw["answer"]), _value(kw["completions"]))
                    except ValueError:
                        pass
            elif isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare):
                t = stmt.test
                if (isinstance(t.left, ast.Name) and t.left.id in pending and isinstance(t.ops[0], ast.Eq)
                        and isinstance(t.comparators[0], ast.Constant)):
                    gold, pred = pending.pop(t.left.id)
                    if isinstance(gold, str) and isinstance(pred, str) and pred.strip():
                        yield fn.name, gold, pred, t.comparators[0].value == 1.0, {}, None


# slime: reducible fractions unequal on purpose, and the box its format requires, are conventions, not values.
SLIME_CONVENTIONS = ("fraction_must_match_exactly", "missing_extraction", "empty_ground_truth")


def read_asserts(text: str):
    """``assert grade_answer_*(given, gt) is True/False`` in tests that are not about a convention."""
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, ast.FunctionDef) or any(w in fn.name for w in SLIME_CONVENTIONS):
            continue
        for stmt in ast.walk(fn):
            t = getattr(stmt, "test", None)
            if not (isinstance(stmt, ast.Assert) and isinstance(t, ast.Compare) and isinstance(t.left, ast.Call)
                    and getattr(t.left.func, "id", "").startswith("grade_answer") and len(t.left.args) == 2):
                continue
            try:
                given, gt = (_value(a) for a in t.left.args)
            except ValueError:
                continue
            yield fn.name, gt, given, t.comparators[0].value is True, {}, None


RLLM_FORMAT_TESTS = ("format", "toolcall", "custom_config", "orm", "problem_type", "no_ground_truth", "empty_ground")


def read_rllm(text: str):
    """``model_response = "..."``, ``task_info = {... "ground_truth": ...}``, ``assert output.reward == V``."""
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, ast.FunctionDef) or any(w in fn.name for w in RLLM_FORMAT_TESTS):
            continue
        response = gold = label = None
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                if stmt.targets[0].id == "model_response":
                    response = _value(stmt.value)
                elif stmt.targets[0].id == "task_info" and isinstance(stmt.value, ast.Dict):
                    info = {_value(k): v for k, v in zip(stmt.value.keys, stmt.value.values)}
                    gold = _value(info["ground_truth"])
            elif (isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare)
                  and ast.unparse(stmt.test.left) == "output.reward"):
                label = stmt.test.comparators[0].value == 1.0
        if isinstance(gold, str) and response and label is not None:
            yield fn.name, gold, response, label, {}, None


def read_open_r1(text: str):
    """``completion = [[{"content": X}]]``, ``solution = [Y]``, ``accuracy_reward`` then ``assertEqual(rewards[0], V)``."""
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, ast.FunctionDef) or "accuracy_reward" not in fn.name:
            continue
        env = {}
        for stmt in fn.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                try:
                    env[stmt.targets[0].id] = _value(stmt.value)
                except ValueError:
                    pass
            elif isinstance(stmt, ast.Expr) and "assertEqual(rewards[0]" in ast.unparse(stmt):
                pred, gold = env["completion"][0][0]["content"], env["solution"][0]
                yield fn.name, gold, pred, stmt.value.args[1].value == 1.0, {}, None


def read_csv(text: str):
    import csv
    import io

    for row in csv.DictReader(io.StringIO(text)):
        yield "model_outputs", row["gold"].strip(), row["answer"].strip(), True, {}, "the example's gold for its answer"


def read_qwen(text: str):
    """The commented ``pred = ...`` / ``gt = ...`` pairs in ``_test_math_equal`` (no verdicts given)."""
    body = text[text.index("def _test_math_equal"):]
    lines = [re.sub(r"^\s*#?\s*", "", line) for line in body.splitlines()]
    pairs = []
    for line in lines:
        m = re.match(r"print\(math_equal\((\".*?\"), (\".*?\")", line)
        if m:
            pairs.append((ast.literal_eval(m.group(1)), ast.literal_eval(m.group(2))))
    pred = None
    for line in lines:
        for name, lit in re.findall(r"\b(pred|gt)\s*=\s*('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", line):
            if name == "pred":
                pred = ast.literal_eval(lit)
            elif pred is not None:
                pairs.append((pred, ast.literal_eval(lit)))
                pred = None
    for pred, gold in pairs:
        yield "_test_math_equal", gold, pred, _qwen_label(pred, gold), {}, "label: mathematical equality (none given)"


_QWEN_NOT_EQUAL = {("(+5)(b+2)", "(a+5)(b+2)"), ("\\frac{1+\\sqrt{5}}{2}", "2"), ("1", "1\\\\sqrt{19}"),
                   ("x+1", "x+2n+1"), ("\\frac{34}{16}+\\frac{\\sqrt{1358}}{16}", "4"), ("\\frac{100}{3}", "33.3")}


def _qwen_label(pred: str, gold: str) -> bool:
    return (pred, gold) not in _QWEN_NOT_EQUAL


def read_simple_evals(text: str):
    """The worked examples of the equality-checker prompt: Expression 1 (gold), Expression 2, Yes/No."""
    for m in re.finditer(r"Expression 1: (.+)\n\s*Expression 2: (.+)\n\n(Yes|No)", text):
        gold, pred, verdict = m.group(1).strip(), m.group(2).strip(), m.group(3) == "Yes"
        note = None
        if (gold, pred) == ("3245/5", "649"):
            verdict, note = True, "the prompt says No (no nontrivial simplification asked of the judge); they are equal"
        yield "EQUALITY_TEMPLATE", gold, pred, verdict, {}, note


# Verdicts about the response's format, not the answer's value: SkyRL's GSM8K reward requires "#### 42".
FORMAT_ONLY = {("42", "The answer is 42"),
               ("33.3", "\\frac{100}{3}")}  # Qwen2.5-Math: no verdict given, and 33.3 is 100/3 rounded to one place

READERS = {"parametrize": read_parametrize, "asserts": read_asserts, "calls": read_calls, "rllm": read_rllm, "open_r1": read_open_r1,
           "csv": read_csv, "qwen": read_qwen, "simple_evals": read_simple_evals}


def split_of(gold: str, pred: str) -> str:
    return "heldout" if int(hashlib.sha256(f"{gold}\x00{pred}".encode()).hexdigest(), 16) % 3 == 0 else "tune"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True, help="git directory of each repository, with {owner} and {name}")
    args = ap.parse_args()
    seen = set()
    for name in ("math_verify_cases.jsonl", "math_pairs.jsonl"):
        for line in (DATA / name).read_text().splitlines():
            row = json.loads(line)
            seen.add((row["gold"], row["prediction"]))
    n = 0
    for repo, commit, path, reader in SOURCES:
        owner, name = repo.split("/")
        text = subprocess.run(["git", "--git-dir", args.git_dir.format(owner=owner, name=name), "show",
                               f"{commit}:{path}"], check=True, capture_output=True, text=True).stdout
        for category, gold, pred, label, settings, note in READERS[reader](text):
            if (gold, pred) in seen or (gold, pred) in FORMAT_ONLY:
                continue
            seen.add((gold, pred))
            row = {"category": category, "gold": gold, "prediction": pred, "equivalent": label, "settings": settings,
                   "source": f"{repo}@{commit[:12]}:{path}", "split": split_of(gold, pred)}
            if note:
                row["note"] = note
            print(json.dumps(row, ensure_ascii=False))
            n += 1
    print(f"{n} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
