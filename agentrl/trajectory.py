"""What a reward sees: the ``sample`` (one rollout) and the ``item`` (its dataset row).

Both are plain JSON-shaped dicts that also allow attribute access, so ``sample.trajectories[0].response``
and ``sample["trajectories"][0]["response"]`` are the same thing. Being plain dicts, they cross process
boundaries (Ray, the sandbox) as JSON without custom pickling.

    sample = {
        "rollout_id": "r-3f2a...",           # unique per rollout; also sent to tool servers
        "trajectories": [                     # one step per assistant turn
            {"response": "...", "tool_calls": [{"id": "c0", "name": "calc.add", "arguments": {...}}],
             "tool_results": [{"id": "c0", "name": "calc.add", "content": "5", "is_error": False}]},
        ],
        "final_answer": "...",                # text of the last assistant turn
        "messages": [...],                    # the whole conversation, prompt included
    }
    item = {"messages": [...], "prompt": "last user message text", "metadata": {...}, ...}
"""

from __future__ import annotations

from typing import Any


class Record(dict):
    """A dict whose keys are also attributes, recursively (lists of dicts included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for key, value in list(self.items()):
            if type(value) not in _PLAIN:
                dict.__setitem__(self, key, wrap(value))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{name!r} (has: {', '.join(map(str, self.keys())) or 'nothing'})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = wrap(value)

    def __setitem__(self, key: Any, value: Any) -> None:
        dict.__setitem__(self, key, wrap(value))


_PLAIN = frozenset({str, int, float, bool, type(None)})  # left as they are, checked first: most values are text


def wrap(value: Any) -> Any:
    """Turn nested dicts into Records (lists and tuples are walked)."""
    if type(value) in _PLAIN or isinstance(value, Record):
        return value
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, (list, tuple)):
        return [wrap(v) for v in value]
    return value


def unwrap(value: Any) -> Any:
    """Plain dicts and lists again (for JSON)."""
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [unwrap(v) for v in value]
    return value


def make_step(response: str, tool_calls: list | None = None, tool_results: list | None = None) -> Record:
    return Record(response=response, tool_calls=list(tool_calls or []), tool_results=list(tool_results or []))


def make_sample(
    rollout_id: str,
    trajectories: list | None = None,
    final_answer: str | None = None,
    messages: list | None = None,
    **extra: Any,
) -> Record:
    """Build a sample. ``final_answer`` defaults to the last step's response."""
    steps = [s if isinstance(s, dict) else make_step(str(s)) for s in (trajectories or [])]
    if final_answer is None:
        final_answer = steps[-1]["response"] if steps else ""
    return Record(rollout_id=rollout_id, trajectories=steps, final_answer=final_answer, messages=list(messages or []), **extra)


def make_item(messages: list, metadata: dict | None = None, **extra: Any) -> Record:
    """Build an item from a dataset row. ``prompt`` is the text of the last user message."""
    prompt = ""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            prompt = m.get("content") or ""
            break
    return Record(messages=list(messages), prompt=prompt, metadata=dict(metadata or {}), **extra)


def as_sample(value: Any) -> Record:
    """Accept a plain dict (or a bare string, taken as the final answer) as a sample."""
    if isinstance(value, str):
        return make_sample("(none)", [make_step(value)])
    if not isinstance(value, dict):
        raise TypeError(f"sample must be a dict or str, got {type(value).__name__}")
    value = dict(value)
    rollout_id = value.pop("rollout_id", "(none)")
    return make_sample(rollout_id, value.pop("trajectories", None), value.pop("final_answer", None), value.pop("messages", None), **value)


def as_item(value: Any) -> Record:
    if not isinstance(value, dict):
        raise TypeError(f"item must be a dict, got {type(value).__name__}")
    value = dict(value)
    messages = value.pop("messages", None) or []
    value.pop("prompt", None)
    return make_item(messages, value.pop("metadata", None), **value)
