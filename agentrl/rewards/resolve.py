"""Which kind of reward a spec names, and loading it: a preset or plugin name, a ``.py`` file (sandboxed, unless it is
byte for byte a built-in preset), a callable, or an OpenAI grader (a dict with a ``type``, or a ``.json`` file).

    reward = load_reward("math")             # what RewardSet and `from agentrl import load_reward` call
    reward = load_reward("./my_reward.py")   # grade(sample, item) in the sandbox

The pieces (``Reward``, the sandboxed and in-process wrappers, value checks) live in :mod:`agentrl.rewards.loading`,
the grader types in :mod:`agentrl.rewards.graders`; this module sits above both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from agentrl.rewards.errors import RewardConfigError
from agentrl.rewards.graders import is_grader, load_grader
from agentrl.rewards.loading import Reward, in_process_reward, sandboxed_reward


def _identical_preset(path: Path) -> Callable | None:
    """The registered grade() whose preset file ``path`` reproduces byte for byte. Only callables qualify:
    a preset registered as a path (``custom``) is sandboxed code itself."""
    from agentrl import plugins

    try:
        text = path.read_bytes()
    except OSError:
        return None
    for entry in plugins.rewards().values():
        source = entry.extra.get("source")
        if source and callable(entry.value) and Path(source).read_bytes() == text:
            return entry.value
    return None


def looks_like_path(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def load_reward(spec: Any, *, where: str = "", **options: Any) -> Reward:
    """A reward from a preset or plugin name ("math"), a path to a ``.py`` file, a callable, or an OpenAI
    grader (a dict with a ``type``, or a ``.json`` file holding one; see :mod:`agentrl.rewards.graders`).

    >>> reward = load_reward("math")
    >>> reward({"final_answer": "so \\\\boxed{7}"}, {"metadata": {"expected_answer": "7"}})
    1.0
    """
    if is_grader(spec):  # an OpenAI grader dict, or a .json file holding one
        return load_grader(spec, where=where, **options)
    if callable(spec):
        name = getattr(spec, "__name__", "reward")
        return in_process_reward(name, spec, f"callable {getattr(spec, '__module__', '?')}.{name}", options)
    if not isinstance(spec, str) or not spec:
        raise RewardConfigError(f"reward spec must be a name, a .py path or a callable, got {spec!r}")
    if looks_like_path(spec):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise RewardConfigError(f"reward file {spec!r} not found (looked in {Path.cwd()}); check the path")
        trusted = _identical_preset(path)
        if trusted is not None:  # byte-for-byte a built-in preset: exactly as trusted as the preset itself
            return in_process_reward(path.stem, trusted, f"{path} (identical to a built-in preset)", options)
        return sandboxed_reward(path.stem, path.resolve(), options)
    from agentrl import plugins

    table = plugins.rewards()
    if spec not in table:
        raise plugins.unknown_name_error("reward", spec, list(table), where)
    entry = table[spec]
    origin = f"plugin {entry.plugin} ({entry.distribution})"
    if isinstance(entry.value, (str, os.PathLike)):
        return sandboxed_reward(spec, Path(entry.value), options)
    return in_process_reward(spec, entry.value, origin, options)
