"""``agentrl data convert``: rows in the agent-RFT tutorial's shape into agentrl rows.

    {"id": "q-17", "prompt": "What was ACME's 2023 revenue?", "reference_answer": "4.2e9",
     "expected": {"tolerance_rel": 0.01, "evidence_path": "filings/acme-2023.md", "must_use_tools": ["search", "read"]},
     "tools": ["search", "list", "read"], "metadata": {"task_type": "lookup", "difficulty": "easy"}}
  becomes
    {"id": "q-17", "messages": [{"role": "user", "content": "What was ACME's 2023 revenue?"}],
     "metadata": {"expected_answer": "4.2e9", "tolerance_rel": 0.01, "tolerance": 0.01,
                  "evidence_path": "filings/acme-2023.md",
                  "expected_tools": [{"name": "search"}, {"name": "read"}], "allowed_tools": ["search", "list", "read"],
                  "task_type": "lookup", "difficulty": "easy"}}

``expected_answer`` and ``tolerance`` (relative) are what the ``math`` reward reads, ``expected_tools`` what ``tool_use`` reads and
``allowed_tools`` what the agent loop offers; every other field is kept under ``metadata`` so nothing is
lost. A ``prompt`` may also be a list of messages. OpenAI RFT rows (``messages`` with ``reference_answer`` and
other grader fields at the top level) are converted the same way; rows already in agentrl's shape pass through.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrl.errors import AgentrlError


class ConvertError(AgentrlError):
    """Rows that cannot be converted; the message lists each with file:line."""


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, str):
        return tool
    if isinstance(tool, dict):
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        return fn.get("name") if isinstance(fn.get("name"), str) else None
    return None


def convert_row(row: Any) -> dict:
    """One tutorial row as an agentrl row; ValueError says what is missing."""
    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    if "messages" in row:  # agentrl's shape, or OpenAI RFT's: messages and the grader's fields at the top level
        if set(row) <= {"id", "messages", "metadata"}:
            return row
        messages = row["messages"]
    elif isinstance(row.get("prompt"), str) and row["prompt"].strip():
        messages = [{"role": "user", "content": row["prompt"]}]
    elif isinstance(row.get("prompt"), list) and row["prompt"]:
        messages = row["prompt"]
    else:
        raise ValueError('no "prompt" (a non-empty string or list of messages) and no "messages"')
    meta: dict[str, Any] = {}
    if "reference_answer" in row:
        meta["expected_answer"] = str(row["reference_answer"])
        meta["reference_answer"] = row["reference_answer"]  # graders' {{item.reference_answer}} still finds it
    expected = row.get("expected") or {}
    if not isinstance(expected, dict):
        raise ValueError('"expected" must be an object (tolerance_rel, evidence_path, must_use_tools)')
    for key, value in expected.items():
        if key == "must_use_tools":
            meta["expected_tools"] = [{"name": _tool_name(t)} for t in value or [] if _tool_name(t)]
        else:
            meta[key] = value
            if key == "tolerance_rel":  # the math reward's tolerance is relative too
                meta["tolerance"] = value
    if row.get("tools") is not None:
        names = [_tool_name(t) for t in row["tools"]]
        if None in names:
            raise ValueError('"tools" must list tool names or {"name": ...} / function schemas')
        meta["allowed_tools"] = names
    extra = row.get("metadata") or {}
    if not isinstance(extra, dict):
        raise ValueError('"metadata" must be an object')
    meta.update(extra)
    for key, value in row.items():
        if key not in {"id", "prompt", "messages", "reference_answer", "expected", "tools", "metadata"}:
            meta.setdefault(key, value)
    out = {"messages": messages, "metadata": meta}
    if "id" in row:
        out = {"id": row["id"], **out}
    return out


def convert_file(src: str, dst: str) -> dict:
    """Convert every row of ``src``; any bad row stops the command before ``dst`` is written."""
    from agentrl.dataset import DatasetError, _check_row

    rows, problems, changed = [], [], 0
    path = Path(src)
    if not path.is_file():
        raise ConvertError(f"{src}: no such file")
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{src}:{lineno}"
            try:
                row = json.loads(line)
                rows.append(_check_row(convert_row(row), where))
                changed += rows[-1] is not row
            except json.JSONDecodeError as exc:
                problems.append(f"{where}: not valid JSON ({exc.msg})")
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
            except DatasetError as exc:
                problems.append(str(exc))
    if problems:
        raise ConvertError(f"{len(problems)} row(s) cannot be converted; nothing written:\n  " + "\n  ".join(problems))
    out = Path(dst)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return {"rows": len(rows), "changed": changed, "out": str(out)}
