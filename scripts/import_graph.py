"""agentrl's module import graph, read with ``ast`` (nothing is imported), and its circles.

    $ python scripts/import_graph.py             # one line a circle, e.g.
    agentrl.rundir -> agentrl.runlog -> agentrl.rundir
    $ python scripts/import_graph.py --top-level  # only imports that run when the module loads

Every ``import``/``from ... import`` of an agentrl module counts, the ones inside functions too (a lazy import
hides a circle from Python, not from a reader); imports under ``if TYPE_CHECKING:`` do not. ``sandbox/`` and
``presets/`` are ``agentrl.sandbox`` and ``agentrl.presets`` (pyproject.toml's package-dir). ``from pkg import name``
is an edge to ``pkg.name`` where that is a module, else to ``pkg`` (its ``__init__``). A circle is a strongly
connected component of two or more modules; one shortest circle through it is printed. tests/core/test_import_graph.py
fails on a circle it does not list.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"agentrl": ROOT / "agentrl", "agentrl.sandbox": ROOT / "sandbox", "agentrl.presets": ROOT / "presets"}


def modules(packages: dict[str, Path] = PACKAGES) -> dict[str, Path]:
    """Module name -> file, for every .py file of the packages (``pkg/__init__.py`` is ``pkg``)."""
    found = {}
    for name, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if any(p.startswith(".") or p in ("templates", "static") for p in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([name, *parts])] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, top_level: bool):
    """The Import/ImportFrom nodes of a module, skipping ``if TYPE_CHECKING:`` blocks (and function and class
    bodies when ``top_level``)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            elif isinstance(child, ast.If) and _type_checking_only(child):
                stack.extend(child.orelse)
            elif top_level and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            else:
                stack.append(child)


def graph(top_level: bool = False, packages: dict[str, Path] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the agentrl modules it imports."""
    known = modules(packages)
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(), str(path)), top_level):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            for target in targets:
                while target and target not in known:  # `import agentrl.x.y` of a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def components(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of two or more modules (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                member = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    member.append(top)
                    if top == node:
                        break
                if len(member) > 1:
                    found.append(sorted(member))
    return sorted(found)


def shortest_circle(edges: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest circle through the component's first module, as ``[a, b, ..., a]``."""
    inside = set(component)
    start = component[0]
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(edges[node] & inside):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    return component


def circles(top_level: bool = False) -> list[list[str]]:
    """One shortest circle for every strongly connected component of agentrl's import graph."""
    edges = graph(top_level)
    return [shortest_circle(edges, c) for c in components(edges)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top-level", action="store_true", help="only imports that run when a module loads")
    args = parser.parse_args(argv)
    edges = graph(args.top_level)
    found = components(edges)
    for component in found:
        print(" -> ".join(shortest_circle(edges, component)) + (
            f"   ({len(component)} modules: {', '.join(component)})" if len(component) > 2 else ""))
    print(f"{len(found)} circle(s) among {len(edges)} modules", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
