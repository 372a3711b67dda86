"""agentrl's import graph has no circle beyond those listed here (none now) (scripts/import_graph.py reads it with ast,
lazy imports included), and the checker finds a circle when one is planted."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)

# No circle is left (November 2026, issue 40): the sandbox's child <-> policy <-> template went when what all three
# use of a call's descriptors moved to sandbox/callio.py, and sandbox.view -> agentrl (-> rewards -> sandbox) when
# view asked the import system where agentrl's folders are instead of importing the package. None may appear.
KNOWN: list[frozenset[str]] = []


def test_no_new_import_circle():
    edges = import_graph.graph()
    assert {"agentrl.tools.hub", "agentrl.sandbox.view", "agentrl.presets.math"} <= set(edges)  # all three folders
    new = [import_graph.shortest_circle(edges, c) for c in import_graph.components(edges)
           if not any(set(c) <= known for known in KNOWN)]
    assert not new, "new import circle(s): " + "; ".join(" -> ".join(c) for c in new) + (
        " (move what both sides need into a module of its own; `python scripts/import_graph.py` lists them)")


def test_the_tools_package_has_no_circle_at_all():
    edges = import_graph.graph()
    tools = {m: {t for t in e if t.startswith("agentrl.tools")} for m, e in edges.items() if m.startswith("agentrl.tools")}
    assert import_graph.components(tools) == []
    assert "agentrl.tools.hub" not in edges["agentrl.tools.session"]  # the session is handed the hub's servers


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {"pkg": tmp_path / "pkg"}


def test_the_checker_finds_lazy_and_relative_circles_and_skips_type_checking(tmp_path):
    packages = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def f():\n    from .sub import c\n",                         # lazy and relative: still an edge
        "sub/__init__.py": "",
        "sub/c.py": "import pkg.a.thing\n",                                  # a name inside a module: the module
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n",
        "e.py": "from pkg import d\n",                                       # d -> e only for type checkers
    })
    edges = import_graph.graph(packages=packages)
    assert edges["pkg.sub.c"] == {"pkg.a"} and edges["pkg.d"] == set()
    (component,) = import_graph.components(edges)
    assert component == ["pkg.a", "pkg.b", "pkg.sub.c"]
    assert import_graph.shortest_circle(edges, component) == ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]
    assert import_graph.components(import_graph.graph(top_level=True, packages=packages)) == []  # b's is lazy
