"""Turn a peer's published answer-equivalence test cases into benchmark data (JSONL); reads, never runs, their code.

    git -C /path/to/Math-Verify show 5d148cfaaf99214c2e4ffb4bc497ab042c592a7a:tests/test_all.py > /tmp/test_all.py
    ...  (the same for test_boxed.py, test_numina_cases.py, test_open_thoughts.py)
    python benchmarks/data/extract_peer_cases.py /tmp/test_all.py /tmp/test_boxed.py \\
        /tmp/test_numina_cases.py /tmp/test_open_thoughts.py > benchmarks/data/math_verify_cases.jsonl

Source: github.com/huggingface/Math-Verify at commit 5d148cfaaf99214c2e4ffb4bc497ab042c592a7a (2025-07-02),
files tests/test_all.py, tests/test_boxed.py, tests/test_numina_cases.py, tests/test_open_thoughts.py.
Every ``@pytest.mark.parametrize`` whose argument list is a Python literal is read with ``ast.literal_eval``
(nothing is executed); each tuple gives one row: ``gold``, ``prediction``, ``equivalent`` (their ``expected``
as a bool), the test function's name as ``category``, and any extra per-case setting (``precision``,
``allow_set_relation_comp``) under ``settings``. Only test_float_precision's list is not a literal (it
is built by a comprehension), so its cases are not included: 252 rows in all.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

REPO = "huggingface/Math-Verify"
COMMIT = "5d148cfaaf99214c2e4ffb4bc497ab042c592a7a"


def cases(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
                continue
            names = [n.strip() for n in ast.literal_eval(deco.args[0]).split(",")]
            try:
                rows = ast.literal_eval(deco.args[1])
            except ValueError:
                print(f"skipped {path.name}:{node.name} (its cases are not a literal)", file=sys.stderr)
                continue
            for row in rows:
                values = dict(zip(names, row))
                label = values.pop("expected", values.pop("result", None))
                gold, pred = values.pop("gold"), values.pop("pred")
                yield {"category": node.name, "gold": gold, "prediction": pred, "equivalent": bool(label),
                       "settings": values, "source": f"{REPO}@{COMMIT[:12]}:tests/{path.name}"}


def main() -> None:
    n = 0
    for arg in sys.argv[1:]:
        for row in cases(Path(arg)):
            print(json.dumps(row, ensure_ascii=False))
            n += 1
    print(f"{n} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
