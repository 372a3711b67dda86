"""Reading a score out of a judge model's reply: the one parser the ``llm_judge`` preset and the ``score_model``
grader share.

    first_reading('Reasoning... {"score": 9, "reason": "good"}')   # Reading(value=9.0, out_of=None, kind="json")
    first_reading("Good answer.\\nScore: 7/10")                      # Reading(value=7.0, out_of=10.0, kind="labelled")
    first_reading("7 out of 10")                                    # Reading(value=7.0, out_of=10.0, kind="fraction")
    first_reading("0.8")                                            # Reading(value=0.8, out_of=None, kind="bare")
    first_reading("I would give it 3, maybe 4")                     # Reading(value=4.0, out_of=None, kind="number")
    first_reading(":")                                              # None: the reply holds no number

:func:`readings` gives every way the reply states a score, the most explicit first: a JSON object with
``score``, ``result`` or ``grade`` (later objects first; ``max``/``scale`` in it is ``out_of``); the last
"Score: N" or "Score: N/M"; the last "N/M" or "N out of M"; a reply that is only a number; and last, the
last number anywhere in the text (``kind="number"``). What a caller accepts is its own policy: the
``llm_judge`` preset (:func:`agentrl.rewards.judge.parse_score`) stops before a bare prose number, so a
reply without a score is unscorable; ``score_model`` (:func:`agentrl.rewards.modelgraders.reply_number`)
takes the first reading, prose number included, as OpenAI's grader does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterator, Literal

_FRACTION = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?)", re.I)
_LABELLED = re.compile(r"score\**\s*(?:is|of|=|:)?\s*\**\s*(-?\d+(?:\.\d+)?)\**(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?", re.I)
_JSON = re.compile(r"\{[^{}]*\}")
_BARE = re.compile(r"^\W*(-?\d+(?:\.\d+)?)\W*$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
SCORE_KEYS = ("score", "result", "grade")  # the JSON keys a score is read from, in this order
TAIL = 4000  # characters of the reply read (the score is at its end; a runaway reply is not scanned whole)


@dataclass(frozen=True)
class Reading:
    """One score the reply states: ``value`` as written, ``out_of`` its stated maximum ("7/10": 10) or None."""

    value: float
    out_of: float | None
    kind: Literal["json", "labelled", "fraction", "bare", "number"]


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _json_readings(text: str) -> Iterator[Reading]:
    for m in reversed(list(_JSON.finditer(text))):
        try:
            obj = json.loads(m.group(0))
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        lowered = {str(k).lower(): v for k, v in obj.items()}
        value = next((_number(lowered[k]) for k in SCORE_KEYS if _number(lowered.get(k)) is not None), None)
        if value is not None:
            out_of = _number(lowered.get("max")) or _number(lowered.get("scale"))
            yield Reading(value, out_of, "json")


def readings(text: str | None) -> Iterator[Reading]:
    """Every score the reply states, the most explicit first (see the module's docstring)."""
    text = (text or "")[-TAIL:]
    yield from _json_readings(text)
    labelled = list(_LABELLED.finditer(text))
    if labelled:
        m = labelled[-1]
        yield Reading(float(m.group(1)), float(m.group(2)) if m.group(2) else None, "labelled")
    fractions = list(_FRACTION.finditer(text))
    if fractions:
        m = fractions[-1]
        yield Reading(float(m.group(1)), float(m.group(2)), "fraction")
    bare = _BARE.match(text.strip())
    if bare:
        yield Reading(float(bare.group(1)), None, "bare")
    numbers = _NUMBER.findall(text)
    if numbers:
        yield Reading(float(numbers[-1]), None, "number")


def first_reading(text: str | None) -> Reading | None:
    """The most explicit score the reply states; None if it holds no number at all."""
    return next(readings(text), None)
