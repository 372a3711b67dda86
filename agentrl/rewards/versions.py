"""Which version of the reward set gave a score: a digest of everything that decides it.

    rewards = RewardSet.from_config([{"name": "math"}, {"name": "tool_use", "weight": 0.5}])
    rewards.version                       # "rv-3f9c0a51d2e4": in every rollout record and metrics line
    describe(rewards)["components"][0]    # {"label": "math", "weight": 1.0, "code": "...", "settings": {...}, ...}
    note = record_version(RunDir("runs/demo"), rewards)   # lists it in reward_versions.json; says what changed

A component's part of the digest is its label and weight; its code (the reward file's text, or the source of
the module that defines an in-process reward and of every agentrl module that module uses, or a grader's
JSON, judge prompt and model included); the version of the distribution that installed it; and its settings
(the options handed to ``grade``, the timeout; the names of declared environment variables, never their
values). Change any of these and the version changes; the same reward set built twice, anywhere, has the
same version.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import sys
import time
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

PREFIX = "rv-"


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()[:16]


def _source(module: ModuleType) -> str:
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        return ""


def _agentrl_modules_of(module: ModuleType) -> set[str]:
    """The agentrl modules ``module`` uses (its globals' modules, and what its functions came from), itself included,
    followed transitively: a preset's helpers (``mathcheck``, ``toolcheck``) decide its score as much as it does."""
    seen: set[str] = set()
    top = module.__name__.split(".")[0]
    follow = ("agentrl.rewards",) if top == "agentrl" else ("agentrl.rewards", top + ".")
    todo = [module.__name__]
    while todo:
        name = todo.pop()
        mod = sys.modules.get(name)
        if name in seen or mod is None:
            continue
        seen.add(name)
        for value in vars(mod).values():
            used = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
            if isinstance(used, str) and used.startswith(follow) and used not in seen:
                todo.append(used)
    return seen


def _imports_in(source: str) -> set[str]:
    """The agentrl modules a reward file imports (it runs in the sandbox, so they are read, not imported here)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return {n for n in names if n.startswith("agentrl.rewards")}


def _helper_digests(names: set[str]) -> dict[str, str]:
    import importlib

    out = {}
    for name in sorted(names):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        deps = _agentrl_modules_of(mod)
        for dep in sorted(deps):
            if dep in sys.modules:
                out[dep] = _sha(_source(sys.modules[dep]))
    return out


@lru_cache(maxsize=1)
def _distributions() -> dict:
    return metadata.packages_distributions()


def _distribution(module_name: str) -> str:
    top = module_name.split(".")[0]
    for dist in _distributions().get(top, []):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return ""


def _json_safe(value: Any) -> Any:
    """Options as canonical JSON: callables and objects by their qualified name, never their id."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__name__)}"


def component_material(comp: Any) -> dict[str, Any]:
    """What decides one component's scores, as canonical JSON-able data (no secret values)."""
    reward = comp.reward
    fn = reward.fn
    settings = {k: v for k, v in reward.options.items() if k != "env"}
    material: dict[str, Any] = {"label": comp.label, "weight": comp.weight, "name": reward.name,
                                "settings": _json_safe(settings), "timeout": reward.timeout,
                                "env_names": sorted(reward.env), "sandboxed": reward.sandboxed}
    grader = getattr(reward, "grader", None)
    source = getattr(fn, "source", None)
    if grader is not None:  # an OpenAI grader: its JSON (templates, judge model, prompts) is its code
        material["code"] = {"grader": reward.version}
        material["distribution"] = _distribution("agentrl")
    elif isinstance(source, str):  # a reward file run in the sandbox: its text, and the agentrl helpers it imports
        material["code"] = {"file": _sha(source), **_helper_digests(_imports_in(source))}
        material["distribution"] = _distribution("agentrl")
    else:
        module = inspect.getmodule(fn)
        if module is not None:
            material["code"] = {name: _sha(_source(sys.modules[name])) for name in sorted(_agentrl_modules_of(module))}
            material["distribution"] = _distribution(module.__name__)
        else:
            material["code"] = {"callable": reward.version}
            material["distribution"] = ""
    return material


def describe(rewards: Any) -> dict[str, Any]:
    """The reward set's version and, per component, what it is made of."""
    components = [component_material(c) for c in rewards.components]
    digest = _sha(json.dumps(components, sort_keys=True))
    return {"version": PREFIX + digest[:12], "components": components}


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two ``describe`` results, in words (label by label)."""
    before = {c["label"]: c for c in old.get("components", [])}
    after = {c["label"]: c for c in new.get("components", [])}
    out = [f"{label}: removed" for label in before if label not in after]
    out += [f"{label}: added" for label in after if label not in before]
    for label in (lbl for lbl in after if lbl in before):
        a, b = before[label], after[label]
        diffs = []
        if a.get("weight") != b.get("weight"):
            diffs.append(f"weight {a.get('weight')} -> {b.get('weight')}")
        changed_code = sorted(k for k in set(a.get("code", {})) | set(b.get("code", {}))
                              if a.get("code", {}).get(k) != b.get("code", {}).get(k))
        if changed_code:
            diffs.append("code changed (" + ", ".join(changed_code) + ")")
        for key in ("settings", "timeout", "env_names", "distribution", "name"):
            if a.get(key) != b.get(key):
                diffs.append(f"{key} {json.dumps(a.get(key))} -> {json.dumps(b.get(key))}")
        if diffs:
            out.append(f"{label}: " + "; ".join(diffs))
    return out


def read_versions(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []


def record_version(run: Any, rewards: Any, config: str = "CONFIG") -> str:
    """List the reward set's version in the run directory (``reward_versions.json``, oldest first) and return a
    note for the console when this attempt's rewards differ from the last attempt's ("" when they do not)."""
    path = Path(run.reward_versions)
    known = read_versions(path)
    now = describe(rewards)
    last = known[-1] if known else None
    if last is not None and last.get("version") == now["version"]:
        return ""
    entry = {**now, "first_used": time.strftime("%Y-%m-%dT%H:%M:%S")}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps([*known, entry], indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    if last is None:
        return ""
    what = changes(last, now) or ["(no difference in the listed parts)"]
    return (f"agentrl: the rewards changed since this run's last attempt: version {last.get('version')} "
            f"(first used {last.get('first_used', '?')}) -> {now['version']}:\n  " + "\n  ".join(what) +
            f"\n  Rollouts and metrics keep the version that scored them (reward_version); to score the earlier "
            f"rollouts with these rewards, run `agentrl rescore {run.path} --config {config} --out DIR`")
