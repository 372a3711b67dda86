"""Patch one of verl's modules right after it is imported, wherever that happens (the trainer process, a Ray worker).

    patch_on_import("verl.trainer.ppo.v1.replay_buffer", pacing.patch)   # runs patch(module) once it executes

If the module is already imported, ``patch`` runs now. Several patches of one module run in the order they
were asked for (the same patch asked twice runs once). verl imports agentrl's plugin early in every process (entry
point group ``verl.plugins``), before most of its own modules: a finder at the front of ``sys.meta_path`` wraps the
target's loader so the patch runs as soon as the module body has executed, before anything can use it.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any, Callable


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, target: str, patch: Callable[[Any], None]) -> None:
        self.target, self.patches = target, [patch]

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        sys.meta_path.remove(self)  # find the real spec without finding ourselves again
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module
        patches = self.patches

        def exec_and_patch(module):
            exec_module(module)
            for patch in patches:
                patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def patch_on_import(target: str, patch: Callable[[Any], None]) -> None:
    """Run ``patch(module)`` on ``target`` now if it is imported, else right after its import (once per patch)."""
    if target in sys.modules:
        patch(sys.modules[target])
        return
    finder = next((f for f in sys.meta_path if isinstance(f, _PatchOnImport) and f.target == target), None)
    if finder is None:
        sys.meta_path.insert(0, _PatchOnImport(target, patch))
    elif patch not in finder.patches:
        finder.patches.append(patch)
