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

Coding rows as other trainers publish them (DeepCoder, TACO/APPS, LiveCodeBench, verl parquet, MBPP,
HumanEval/EvalPlus, AceCoder, KodCode, open-r1; JSONL or parquet) keep every column under ``metadata`` with its
own name and its tests in their own layout, which the ``coding`` reward reads as the dataset's harness does
(agentrl/rewards/codelayouts.py). The prompt is the row's problem text (``problem``, ``question``,
``question_content``, ``text``, ...; a verl row's ``prompt`` messages), with its starter code; the row's own
``metadata`` column becomes ``metadata.metadata``.

    {"problem": "...", "tests": "[{\"input\": \"1 2\\n\", \"output\": \"3\\n\", \"testtype\": \"stdin\"}]", "metadata": {}}
  becomes
    {"messages": [{"role": "user", "content": "..."}], "metadata": {"problem": "...", "tests": "[...]", "metadata": {}}}

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


_PROBLEM_FIELDS = ("problem", "question", "question_content", "problem_description", "text", "query", "instruction")


def _coding_row(row: dict, layout: str) -> dict:
    """A coding row of another trainer's dataset: the problem as the prompt, every column kept."""
    prompt = row.get("prompt")
    if isinstance(prompt, list) and prompt:  # verl parquet: the chat messages
        messages = prompt
    else:
        text = next((row[k] for k in _PROBLEM_FIELDS if isinstance(row.get(k), str) and row[k].strip()), None)
        if text is None and isinstance(prompt, str) and prompt.strip():
            text = (f"Complete this Python function:\n```python\n{prompt.rstrip()}\n```" if layout == "humaneval"
                    else prompt)
        if text is None:
            raise ValueError(f"a {layout} coding row with no problem text: give one of \"prompt\", "
                             + ", ".join(f'"{k}"' for k in _PROBLEM_FIELDS))
        starter = row.get("starter_code")
        if isinstance(starter, str) and starter.strip():
            text += f"\n\nStart from this code:\n```python\n{starter.rstrip()}\n```"
        messages = [{"role": "user", "content": text}]
    out = {"messages": messages, "metadata": {k: v for k, v in row.items() if k != "messages"}}
    rid = next((row[k] for k in ("id", "task_id", "question_id", "problem_id") if isinstance(row.get(k), (str, int))), None)
    return {"id": str(rid), **out} if rid is not None else out


def convert_row(row: Any) -> dict:
    """One tutorial or peer coding row as an agentrl row; ValueError says what is missing."""
    from agentrl.rewards.codelayouts import read_suite

    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    if "messages" in row:  # agentrl's shape, or OpenAI RFT's: messages and the grader's fields at the top level
        if set(row) <= {"id", "messages", "metadata"}:
            return row
        messages = row["messages"]
    elif (suite := read_suite(row)) is not None:  # a coding row in a known layout (TestLayoutError: unreadable)
        return _coding_row(row, suite.layout)
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


def _records(path: Path):
    """(where, line or row number, row or the JSON error) for each row of a JSONL or parquet file."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ConvertError(f"{path}: reading parquet needs pyarrow (pip install pyarrow)") from None
        for n, row in enumerate(pq.read_table(path).to_pylist()):
            yield f"{path}: row {n}", n, row
        return
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield f"{path}:{lineno}", lineno, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield f"{path}:{lineno}", lineno, exc


def convert_file(src: str, dst: str, to: str = "agentrl", split: str = "train") -> dict:
    """Convert every row of ``src`` (JSONL, or parquet by its suffix); any bad row stops the command before
    ``dst`` is written.

    ``to="verl"`` writes verl's parquet rows (``agentrl.verl.rows``): ``prompt``, ``data_source``,
    ``reward_model.ground_truth`` (from ``metadata.expected_answer``), ``extra_info`` (``split``, ``index``,
    and the whole row as ``agentrl_row``), for ``python -m verl.trainer.main_ppo data.train_files=...``."""
    from agentrl.dataset import DatasetError, _check_row

    rows, problems, changed = [], [], 0
    path = Path(src)
    if not path.is_file():
        raise ConvertError(f"{src}: no such file")
    for where, n, row in _records(path):
        if isinstance(row, json.JSONDecodeError):
            problems.append(f"{where}: not valid JSON ({row.msg})")
            continue
        try:
            rows.append((path, n, _check_row(convert_row(row), where)))
            changed += rows[-1][2] is not row
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
        except DatasetError as exc:
            problems.append(str(exc))
    if problems:
        raise ConvertError(f"{len(problems)} row(s) cannot be converted; nothing written:\n  " + "\n  ".join(problems))
    out = Path(dst)
    if to == "verl":
        from agentrl.verl.rows import verl_rows, write_parquet

        if out.suffix != ".parquet":
            raise ConvertError(f"{dst}: verl reads parquet here; name the output file OUT.parquet")
        return {"rows": write_parquet(verl_rows(rows, split=split), out), "changed": changed, "out": str(out), "to": "verl"}
    if to != "agentrl":
        raise ConvertError(f"--to {to!r}: use agentrl (JSONL rows) or verl (parquet rows)")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for _, _, r in rows),  # parquet dates as text
                   encoding="utf-8")
    return {"rows": len(rows), "changed": changed, "out": str(out)}


def convert_from(name: str, source: str, dst: str) -> dict:
    """``agentrl data convert --from NAME SOURCE -o DST``: the rows a plugin's dataset converter makes of
    ``source``, checked like any dataset's; a bad row stops the command before ``dst`` is written."""
    from agentrl import plugins
    from agentrl.dataset import DatasetError, _check_row

    convert = plugins.lookup("dataset converter", name, where="agentrl data convert --from").value
    try:
        made = list(convert(source))
    except ValueError as exc:
        raise ConvertError(f"--from {name} {source}: {exc}") from None
    rows, problems = [], []
    for n, row in enumerate(made):
        try:
            rows.append(_check_row(row, f"--from {name} {source}: row {n} (id {row.get('id')!r})"))
        except DatasetError as exc:
            problems.append(str(exc))
    if problems:
        raise ConvertError(f"{len(problems)} row(s) from converter {name!r} are malformed; nothing written:\n  "
                           + "\n  ".join(problems[:20]))
    if not rows:
        raise ConvertError(f"--from {name} {source}: the converter made no rows; nothing written")
    out = Path(dst)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return {"rows": len(rows), "out": str(out), "from": name, "source": source}
