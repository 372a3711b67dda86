"""OpenAI grader templates: ``{{item.<field>}}`` and ``{{sample.output_text|output_json|output_tools}}``.

    t = Template("Reference: {{item.reference_answer}}\\nAnswer: {{sample.output_text}}", where="grader 'judge'")
    t.item_fields                    # {"reference_answer"}: checked against the dataset before training
    t.render(openai_sample(sample), item)   # "Reference: 13.4%\\nAnswer: ..."

``item.<field>`` is the dataset row's field, else the same key of its ``metadata`` (the tutorial's rows keep
``reference_answer`` at the top; agentrl rows keep such keys in ``metadata``). A field that no row has is an
error before training (:meth:`Template.check_rows`); at scoring time a missing field makes the rollout
unscorable, never a silent "(none)".
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentrl.rewards.errors import Unscorable
from agentrl.rewards.errors import RewardConfigError

_FIELD = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_PATH = re.compile(r"^(item|sample)((?:\.[A-Za-z_][\w-]*)+)$")
SAMPLE_FIELDS = ("output_text", "output_json", "output_tools", "final_answer", "rollout_id", "messages", "trajectories")
MAX_FIELD = 20_000


def openai_sample(sample: Any) -> dict:
    """The sample as OpenAI graders see it: output_text, output_json (None unless JSON), output_tools, and ours."""
    text = sample.get("final_answer") or ""
    try:
        output_json = json.loads(text) if text.strip().startswith(("{", "[")) else None
    except ValueError:
        output_json = None
    tools = [c for step in sample.get("trajectories") or [] for c in (step.get("tool_calls") or [])]
    return {**dict(sample), "output_text": text, "output_json": output_json, "output_tools": tools}


def lookup_item(item: Any, path: list[str]) -> tuple[bool, Any]:
    """``(found, value)`` of ``item.a.b``: the row's own field first, else ``metadata``'s."""
    for root in (item, item.get("metadata") if isinstance(item, dict) else None):
        value, found = root, True
        for key in path:
            if isinstance(value, dict) and key in value:
                value = value[key]
            else:
                found = False
                break
        if found:
            return True, value
    return False, None


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_FIELD else text[:MAX_FIELD] + f" ...[{len(text) - MAX_FIELD} characters cut]"


class Template:
    """A checked template string: unknown roots and sample fields fail here, at load time."""

    def __init__(self, text: Any, where: str) -> None:
        if not isinstance(text, str):
            raise RewardConfigError(f"{where}: expected a template string, got {type(text).__name__} {text!r}")
        self.text, self.where = text, where
        self.item_fields: set[str] = set()
        for m in _FIELD.finditer(text):
            path = _PATH.match(m.group(1))
            if not path:
                raise RewardConfigError(f"{where}: template field {{{{{m.group(1)}}}}} is not item.<field> or "
                                        f"sample.<field>; write e.g. {{{{item.reference_answer}}}} or {{{{sample.output_text}}}}")
            root, parts = path.group(1), path.group(2)[1:].split(".")
            if root == "sample" and parts[0] not in SAMPLE_FIELDS:
                raise RewardConfigError(f"{where}: {{{{sample.{parts[0]}}}}} does not exist; a sample has "
                                        f"{', '.join(SAMPLE_FIELDS)}")
            if root == "item":
                self.item_fields.add(".".join(parts))

    def render(self, sample: dict, item: Any) -> str:
        def sub(m: re.Match) -> str:
            root, *parts = m.group(1).split(".")
            if root == "sample":
                value: Any = sample
                for key in parts:
                    value = value.get(key) if isinstance(value, dict) else None
                return "" if value is None else _text(value)
            found, value = lookup_item(item, parts)
            if not found:
                raise Unscorable(f"{self.where}: the row has no field {'.'.join(parts)!r} (nor metadata.{'.'.join(parts)}) "
                                 f"for {{{{item.{'.'.join(parts)}}}}}")
            return "" if value is None else _text(value)

        return _FIELD.sub(sub, self.text)


def check_rows(fields: set[str], rows: list[tuple[str, Any]], where: str) -> None:
    """Every ``item.<field>`` a template names must exist in every row (``rows``: (file:line, item))."""
    for field in sorted(fields):
        missing = [at for at, item in rows if not lookup_item(item, field.split("."))[0]]
        if missing:
            raise RewardConfigError(
                f"{where}: {{{{item.{field}}}}} names a field that {len(missing)} of {len(rows)} rows lack "
                f"(first: {missing[0]}); add \"{field}\" to each row (or to its metadata), or fix the template")
