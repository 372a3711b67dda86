"""The gate every parsed tool call passes before a tool runs: its arguments must be a JSON object.

    json_arguments('{"city": "Paris"}')            # {"city": "Paris"}
    json_arguments({"x": float("inf")})            # ValueError: argument x is inf, which JSON cannot carry
    json_arguments('{"x": NaN}')                   # ValueError: ... NaN is not JSON
    json_arguments({"x": b"z"})                    # ValueError: argument x is bytes, which JSON cannot carry
    guarded(parse, text)                           # parse(text), any exception as ValueError("... could not be read ...")

A parser reads model text; whatever it hands on (a dict from a Python literal, JSON text from verl's parsers) is
checked here, by the episode, once, for every family: values JSON cannot carry (bytes, sets, complex numbers,
``inf``/``nan``, non-string keys) and text that only lenient readers accept (``NaN``, ``Infinity``) never reach a
tool. They become a malformed-call report to the model, in its own format. Tuples become lists, as JSON has them.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

__all__ = ["json_arguments", "json_value", "guarded"]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (write a number or a string)")


def json_value(value: Any, where: str = "the value") -> Any:
    """``value`` as plain JSON data (tuples as lists); ValueError naming ``where`` for anything JSON cannot carry."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value}, which JSON cannot carry (write a finite number)")
        return value
    if isinstance(value, (list, tuple)):
        return [json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has the key {key!r}; JSON object keys are strings")
            out[key] = json_value(v, f"{where}.{key}" if where != "the arguments" else f"argument {key}")
        return out
    raise ValueError(f"{where} is {type(value).__name__}, which JSON cannot carry "
                     "(use a string, number, boolean, null, list or object)")


def json_arguments(arguments: Any) -> dict:
    """A call's arguments (a dict, or the JSON text of one) as a JSON object; ValueError saying why not."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments, parse_constant=_no_constant) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments are not valid JSON ({exc.msg} at column {exc.colno})") from None
        if isinstance(arguments, str) and arguments.lstrip().startswith("{"):
            return json_arguments(arguments)  # an object serialized twice (Granite 4 writes them so; vLLM reads it)
    if not isinstance(arguments, dict):
        raise ValueError(f"the arguments must be a JSON object, not {type(arguments).__name__}")
    return json_value(arguments, "the arguments")


def guarded(parse: Callable[[str], Any], text: str) -> Any:
    """``parse(text)``; a ValueError passes through, any other exception becomes one (never a dead rollout)."""
    try:
        return parse(text)
    except ValueError:
        raise
    except Exception as exc:  # a reader's bug on odd model text is a malformed call, not a crash
        raise ValueError(f"the call could not be read ({type(exc).__name__}: {exc})") from None
