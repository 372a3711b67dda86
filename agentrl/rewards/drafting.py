"""``agentrl reward new --describe "..." --model M``: a reward file drafted by any litellm model, reviewed before it is written.

    $ agentrl reward new --describe "1 if the final answer equals metadata.expected_answer as a number" \\
          --model openai/gpt-4o-mini --config configs/research.yaml --out reward.py

The model is asked for a ``grade(sample, item)`` file in the shape of the ``custom`` preset; its code block is
compiled under the sandbox's policy, loaded as a sandboxed reward, and reviewed (:mod:`agentrl.rewards.review`)
on the config's first rows (without ``--config``: static and adversarial checks on one made-up row). It is
written only when the review passes, or with ``--force``.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from agentrl.errors import AgentrlError
from agentrl.rewards.review import Check, load_rows, render, review

INSTRUCTIONS = """Write a Python reward file for reinforcement learning of an LLM agent.
It must define `def grade(sample, item)` returning a float in [0, 1], or None when the row does not apply.
sample["final_answer"] is the agent's final answer text; sample["trajectories"] lists steps with "tool_calls".
item["prompt"] is the question; item["metadata"] holds the row's data (expected_answer, rubric, ...).
Rules: only the standard library (re, json, math, fractions); no names starting with "_"; no network;
no eval/exec; never pay for an empty answer, for echoing the question, or for words like "correct".
Start from this template:

{template}

The reward to write: {describe}

Answer with the whole file in one ```python code block."""


class DraftError(AgentrlError):
    """The drafted reward could not be produced or did not pass its review."""


def extract_code(reply: str) -> str:
    blocks = re.findall(r"```(?:python|py)?\s*\n(.*?)```", reply or "", re.S)
    code = max(blocks, key=len) if blocks else (reply or "")
    if "def grade" not in code:
        raise DraftError(f"the model's reply holds no `def grade(sample, item)`: {(reply or '')[:200]!r}")
    return code.strip() + "\n"


def draft(describe: str, model: str, *, api_base: str | None = None, api_key_env: str | None = None) -> str:
    from agentrl.rewards import preset_source
    from agentrl.rewards.judge import chat_sync

    key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and key is None:
        raise DraftError(f"--api-key-env {api_key_env} is not set; export it first")
    prompt = INSTRUCTIONS.format(template=preset_source("custom"), describe=describe)
    return extract_code(chat_sync([{"role": "user", "content": prompt}], model=model, api_base=api_base, api_key=key,
                                  max_tokens=2000))


def new_reward(describe: str, model: str, out: str, *, config: str | None = None, api_base: str | None = None,
               api_key_env: str | None = None, force: bool = False) -> tuple[str, bool]:
    """Draft, review, and write ``out`` when the review passes (or ``force``). Returns (report, written)."""
    code = draft(describe, model, api_base=api_base, api_key_env=api_key_env)
    with tempfile.TemporaryDirectory(prefix="agentrl-draft-") as tmp:
        path = Path(tmp) / Path(out).name
        path.write_text(code)
        if config:
            from agentrl.config import load_config

            settings, _, _ = load_config(config)
            rows = load_rows(settings.train_data, 5)
        else:
            from agentrl.trajectory import as_item

            rows = [("(made-up row)", as_item({"messages": [{"role": "user", "content": "What is 6 * 7?"}],
                                                "metadata": {"expected_answer": "42"}}))]
        checks = review([{"name": str(path)}], rows)
    ok = all(c.ok for c in checks)
    report = render(checks)
    if ok or force:
        Path(out).write_text(code)
        report += f"\nwrote {out}" + ("" if ok else " (--force: the review failed)")
    else:
        report += f"\nnot written: the draft failed its review. Draft:\n{code}"
    return report, ok or force


__all__ = ["new_reward", "draft", "extract_code", "DraftError", "Check"]
