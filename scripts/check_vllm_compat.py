"""Does verl's vLLM code find, in a given vLLM release, every name it imports? Checked without a GPU.

    .venv/bin/python scripts/check_vllm_compat.py 0.31.0 0.27.1

For each version: download that vLLM wheel (no dependencies, into a temporary folder), read its Python files
without importing them, and look up every ``from vllm.X import Y`` in the installed verl. Imports made inside
functions (features such as FP8, QAT or ModelOpt quantization) and inside ``try``/``TYPE_CHECKING`` are listed
apart from module-level ones, which every vLLM rollout runs. Exit status 1 when a module-level import is missing.
This is a static check: it cannot tell whether vLLM behaves as verl expects at run time (scripts/gpu_smoke.sh).
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import tempfile
import zipfile


def _defined(path: pathlib.Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(errors="replace"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
    return out


def _module(root: pathlib.Path, dotted: str) -> pathlib.Path | None:
    base = root.joinpath(*dotted.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def check(verl_dir: pathlib.Path, vllm_root: pathlib.Path) -> tuple[int, list[str], list[str]]:
    top, local, count = [], [], 0
    for file in sorted(verl_dir.rglob("*.py")):
        tree = ast.parse(file.read_text(errors="replace"))
        nested = {id(n) for outer in ast.walk(tree)
                  if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Try, ast.If))
                  for n in ast.walk(outer) if n is not outer}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or (node.module or "").split(".")[0] != "vllm":
                continue
            module = _module(vllm_root, node.module)
            for alias in node.names:
                count += 1
                if module and (alias.name in _defined(module) or _module(vllm_root, f"{node.module}.{alias.name}")):
                    continue
                where = f"{file.relative_to(verl_dir)}:{node.lineno} from {node.module} import {alias.name}"
                (local if id(node) in nested else top).append(where)
    return count, top, local


def main(versions: list[str]) -> int:
    import verl

    verl_dir = pathlib.Path(verl.__file__).parent
    failed = False
    for version in versions or ["0.31.0"]:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                            "-d", tmp, f"vllm=={version}"], check=True)
            wheel = next(pathlib.Path(tmp).glob("vllm-*.whl"))
            with zipfile.ZipFile(wheel) as z:
                z.extractall(tmp, [n for n in z.namelist() if n.endswith(".py")])
            count, top, local = check(verl_dir, pathlib.Path(tmp))
        print(f"vllm {version}: {count} names imported by verl {verl.__version__}; missing at module level: "
              f"{len(top)}; missing inside functions/try/if (optional features): {len(local)}")
        for line in top:
            print("  MISSING", line)
        for line in local:
            print("  optional", line)
        failed |= bool(top)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
