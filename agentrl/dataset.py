"""The user's dataset: JSONL rows with ``messages`` and optional ``metadata``.

    {"messages": [{"role": "user", "content": "What is 37 + 48?"}], "metadata": {"expected_answer": "85"}}

Rows are checked before training; the first bad row stops the job with ``file:line`` and what is
wrong. verl reads the converted file: the prompt in ``prompt`` and the whole row, as JSON text, in
``extra_info.agentrl_row`` (verl needs the same extra-info keys on every row, so metadata of any
shape travels as one string). The agent loop turns it back into the ``item`` rewards see.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from agentrl.errors import AgentrlError
from agentrl.scripted import scripted_turns

ROLES = {"system", "user", "assistant", "tool"}


class DatasetError(AgentrlError):
    """A dataset row is malformed; the message says file:line, what is wrong, and how to fix it."""


def _check_row(row: Any, where: str) -> dict:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: each line must be a JSON object with a \"messages\" list, got {type(row).__name__}")
    messages = row.get("messages")
    if messages is None:
        raise DatasetError(f"{where}: no \"messages\" key (keys: {', '.join(sorted(row)) or 'none'}). "
                           f"Write the prompt as {{\"messages\": [{{\"role\": \"user\", \"content\": \"...\"}}]}}")
    if not isinstance(messages, list) or not messages:
        raise DatasetError(f"{where}: \"messages\" must be a non-empty list of {{role, content}} objects")
    for n, message in enumerate(messages):
        if not isinstance(message, dict):
            raise DatasetError(f"{where}: messages[{n}] must be an object with \"role\" and \"content\"")
        role = message.get("role")
        if role not in ROLES:
            raise DatasetError(f"{where}: messages[{n}].role is {role!r}; use one of {sorted(ROLES)}")
        if not isinstance(message.get("content"), str):
            raise DatasetError(f"{where}: messages[{n}].content must be a string")
    if not any(m["role"] == "user" for m in messages):
        raise DatasetError(f"{where}: \"messages\" has no user message; the prompt needs at least one")
    if messages[-1]["role"] == "assistant":
        raise DatasetError(f"{where}: the last message is the assistant's; the model answers after the prompt, "
                           f"so end with a user (or tool) message")
    metadata = row.get("metadata", {})
    if not isinstance(metadata, dict):
        raise DatasetError(f"{where}: \"metadata\" must be an object, got {type(metadata).__name__}")
    try:
        declared_tools(metadata)
        scripted_turns(metadata)
        setup = metadata.get("tool_setup", [])  # calls that set a stateful server up from the row (episode.py)
        if not isinstance(setup, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                                  and isinstance(c.get("arguments", {}), dict) for c in setup):
            raise ValueError(f"metadata.tool_setup must be a list of {{\"name\": tool, \"arguments\": {{...}}}}, "
                             f"got {json.dumps(setup)[:120]}")
    except ValueError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    return row


def declared_tools(metadata: dict) -> dict[str, dict]:
    """The row's declared tools by name: functions offered to the model that nothing executes.

        {"declared_tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {...}}}]}

    A call to one is recorded (the rewards grade it) and not run, and the episode ends after the turn that makes
    it: the calls are the answer, as in OpenAI function-calling rows and BFCL's single-turn rows. A bare
    ``{"name", "description", "parameters"}`` is accepted too. ValueError says which entry is malformed."""
    tools = metadata.get("declared_tools")
    if tools is None:
        return {}
    if not isinstance(tools, list):
        raise ValueError(f"metadata.declared_tools must be a list of function schemas, got {type(tools).__name__}")
    found: dict[str, dict] = {}
    for n, tool in enumerate(tools):
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"metadata.declared_tools[{n}] must be {{\"type\": \"function\", \"function\": "
                             f"{{\"name\": ..., \"parameters\": {{...}}}}}} (no function name found)")
        if name in found:
            raise ValueError(f"metadata.declared_tools[{n}]: {name!r} is declared twice")
        found[name] = {"type": "function", "function": {"name": name, "description": fn.get("description", ""),
                                                         "parameters": fn.get("parameters") or {"type": "object", "properties": {}}}}
    return found


def offered_tools(served: list[dict] | None, declared: dict[str, dict]) -> list[dict] | None:
    """The tool schemas a row's prompt offers: the served ones, less any a declared tool names, then the
    declared ones (:func:`declared_tools`); None when there are none. The agent loop and `agentrl data check`'s
    prompt lengths both use it."""
    return [s for s in served or [] if s["function"]["name"] not in declared] + list(declared.values()) or None


def read_rows(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, row)`` for every non-blank line, checking each one."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset file {str(path)!r} does not exist; set agentrl.train_data / val_data to a JSONL file")
    with path.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where}: {_json_problem(line.rstrip(), exc)}") from None
            yield lineno, _check_row(row, where)


def tool_name_problems(rows: Iterable[tuple[str, dict]], offered: dict[str, list[str]]) -> list[tuple[str, str]]:
    """``(where, problem)`` for each row whose ``allowed_tools`` / ``expected_tools`` name a tool no server
    offers (such a row is offered no tools, or can never earn its tool reward). ``rows``: ``(file:line, row)``."""
    from agentrl.tools.session import unknown_tool_names

    known = sorted({t for tools in offered.values() for t in tools})
    shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
    return [(where, f"metadata {', '.join(bad)}: no tool server offers it (they offer: {shown or 'nothing'})")
            for where, row in rows if (bad := unknown_tool_names(row.get("metadata") or {}, offered))]


def _json_problem(line: str, exc: json.JSONDecodeError) -> str:
    """What is wrong with a line that is not JSON, in words: a cut-off row says so."""
    if exc.pos >= len(line) - 1 or exc.msg.startswith("Unterminated"):
        tail = line[-40:]
        return (f"the row ends before its JSON is complete (the file looks truncated, or the row is split over "
                f"several lines; it ends with {tail!r}). Each row must be one whole JSON object on one line")
    return (f"not valid JSON: {exc.msg} at character {exc.colno} of {len(line)} "
            f"(near {line[max(0, exc.pos - 20): exc.pos + 20]!r})")


def row_id(path: Path, lineno: int, row: dict) -> str:
    """A stable prompt id: the row's own ``id`` if it has one, else file name, line and content hash."""
    if isinstance(row.get("id"), (str, int)):
        return str(row["id"])
    digest = hashlib.sha1(json.dumps(row, sort_keys=True).encode()).hexdigest()[:8]
    return f"{path.stem}:{lineno}:{digest}"


def loop_record(src: Path, lineno: int, row: dict, split: str = "train") -> dict:
    """A checked row as the agent loop reads it (``extra_info.agentrl_row``), in training and outside it."""
    return {
        "messages": row["messages"],
        "metadata": row.get("metadata", {}),
        "id": row_id(src, lineno, row),
        "source": f"{src}:{lineno}",
        "split": split,
        # the row's other fields (e.g. the Agent RFT tutorial's top-level reference_answer) for {{item.<field>}}
        "fields": {k: v for k, v in row.items() if k not in ("messages", "metadata", "id", "source", "prompt")},
    }


def convert(src: str | Path, dst: str | Path, agent_name: str = "agentrl", split: str = "train") -> int:
    """Check ``src`` and write verl's row format to ``dst``; returns the number of rows.

    ``split`` ("train" or "val") travels with every row, so a rollout knows whether it is validation."""
    src, dst = Path(src), Path(dst)
    rows = []
    for lineno, row in read_rows(src):
        record = loop_record(src, lineno, row, split)
        rows.append({
            "prompt": row["messages"],
            "data_source": str(row.get("data_source", "agentrl")),
            "agent_name": agent_name,
            "reward_model": {"ground_truth": ""},
            "extra_info": {"index": len(rows), "agentrl_row": json.dumps(record)},
        })
    if not rows:
        raise DatasetError(f"{src}: no rows; each line should be a JSON object with \"messages\"")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    tmp.replace(dst)
    return len(rows)
