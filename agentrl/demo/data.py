"""Arithmetic tasks for the CPU demo, and the conversations the warm-up trains on.

A task is a question such as "What is 37 + 48?" whose answer a calculator tool computes.
Two kinds of warm-up conversation exist: the *tool path* (assistant calls the tool, reads
the result, answers with it) and the *guess path* (assistant answers at once with a
plausible but usually wrong number). The mix gives the base model a moderate success
rate that RL can raise by preferring the tool path.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

# op symbol -> calculator tool name
OPS = {"+": "add", "-": "subtract", "*": "multiply"}
QUESTION_FORM = "What is {a} {op} {b}?"
FINAL_FORM = "The answer is {n}."


def compute(tool: str, a: int, b: int) -> int:
    if tool == "add":
        return a + b
    if tool == "subtract":
        return a - b
    if tool == "multiply":
        return a * b
    raise ValueError(f"unknown calculator tool {tool!r}")


def make_task(rng: random.Random) -> dict[str, Any]:
    """One task: a number up to 29 and a digit, added, subtracted (non-negative result) or multiplied.

    Small operands keep the arguments short enough for a half-million-parameter model to learn to copy
    them into a tool call during a short warm-up; the answers still take more than a guess.
    """
    op = rng.choices(("+", "-", "*"), weights=(4, 3, 3))[0]
    a, b = rng.randint(2, 29), rng.randint(2, 9)
    if op == "-" and b > a:
        a, b = b, a
    question = QUESTION_FORM.format(a=a, op=op, b=b)
    tool = OPS[op]
    return {"question": question, "tool": tool, "a": a, "b": b, "answer": compute(tool, a, b)}


def task_row(task: dict[str, Any], system: str | None = None) -> dict[str, Any]:
    """The dataset row format: chat messages, the expected answer as a string, and the tools
    the rollout may see (so the prompt lists exactly the tools the model was warmed up on)."""
    from agentrl.demo.tools import CALCULATOR_TOOL_NAMES

    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": task["question"]})
    metadata = {"expected_answer": str(task["answer"]), "allowed_tools": list(CALCULATOR_TOOL_NAMES),
                "expected_tools": [{"name": task["tool"]}]}
    return {"messages": messages, "metadata": metadata}


def make_rows(n: int, seed: int, exclude: set[str] | None = None) -> list[dict[str, Any]]:
    """n distinct tasks as dataset rows (questions in ``exclude`` are skipped)."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    rows = []
    while len(rows) < n:
        task = make_task(rng)
        if task["question"] in seen:
            continue
        seen.add(task["question"])
        rows.append(task_row(task))
    return rows


def write_jsonl(path: str, rows: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_jsonl(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def tool_call_message(tool: str, a: int, b: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": {"a": a, "b": b}}}],
    }


def wrong_guess(rng: random.Random, answer: int) -> int:
    """A plausible number near the answer, never the answer itself."""
    spread = max(9, abs(answer) // 8)
    offset = 0
    while offset == 0:
        offset = rng.randint(-spread, spread)
    guess = answer + offset
    return guess if guess >= 0 else answer + abs(offset)


def tool_conversation(task: dict[str, Any]) -> list[dict[str, Any]]:
    """user -> assistant tool call -> tool result -> assistant final answer."""
    return [
        {"role": "user", "content": task["question"]},
        tool_call_message(task["tool"], task["a"], task["b"]),
        {"role": "tool", "content": str(task["answer"])},
        {"role": "assistant", "content": FINAL_FORM.format(n=task["answer"])},
    ]


def guess_conversation(task: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """user -> assistant answers directly with a wrong-ish number."""
    guess = wrong_guess(rng, task["answer"])
    return [
        {"role": "user", "content": task["question"]},
        {"role": "assistant", "content": FINAL_FORM.format(n=guess)},
    ]


def warmup_conversations(
    n: int, seed: int, tool_fraction: float = 0.4, tool_share: float = 0.75
) -> list[tuple[list[dict[str, Any]], bool]]:
    """(conversation, learn_first) pairs for the warm-up.

    ``tool_share`` of the conversations take the tool path, so copying arguments and results
    gets most of the (scarce, CPU) training. The first assistant token decides the path; it is
    learned only where ``learn_first`` is set, chosen so that the learned decision prior is
    ``tool_fraction`` (the base model's tool-use rate) whatever ``tool_share`` is.
    """
    if not 0 < tool_fraction <= tool_share < 1:
        raise ValueError("need 0 < tool_fraction <= tool_share < 1")
    keep_tool_decision = tool_fraction * (1 - tool_share) / (tool_share * (1 - tool_fraction))
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        task = make_task(rng)
        if rng.random() < tool_share:
            out.append((tool_conversation(task), rng.random() < keep_tool_decision))
        else:
            out.append((guess_conversation(task, rng), True))
    return out


_INT = re.compile(r"-?\d+")


def last_integer(text: str) -> str | None:
    found = _INT.findall(text or "")
    return found[-1] if found else None
