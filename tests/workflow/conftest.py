"""Shared fixtures: the suite's tiny demo build (tests/conftest.py) and a config naming it, the calculator MCP
server (the real agentrl-calculator plugin over stdio) and the demo rewards."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml


@pytest.fixture(scope="session")
def tiny_demo(demo):
    return demo  # tests/conftest.py: the suite's one short demo build


@pytest.fixture(scope="session")
def demo_config(tiny_demo, tmp_path_factory) -> Path:
    """A config written as the README shows it: relative data paths, defaults left unset."""
    folder = tmp_path_factory.mktemp("proj")
    (folder / "data").mkdir()
    rows = [json.loads(line) for line in Path(tiny_demo["val_path"]).read_text().splitlines()[:8]]
    for n, row in enumerate(rows):
        row["id"] = f"v{n}"
    (folder / "data" / "val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "train.yaml").write_text(yaml.safe_dump({"agentrl": {
        "model": tiny_demo["model_path"], "train_data": "data/val.jsonl", "val_data": "data/val.jsonl",
        "tools": ["calculator"], "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.5}],
        "max_prompt_length": 384, "max_response_length": 64, "agent": {"max_turns": 3, "max_tool_calls": 2}}}))
    return folder / "train.yaml"


_QUESTION = re.compile(r"What is (\d+) ([-+*]) (\d+)\?")
_TOOL = {"+": "add", "-": "subtract", "*": "multiply"}


class ScriptedEngine:
    """Scripted model replies (a model that reliably calls tools cannot be trained in a test): call the
    right calculator tool, then answer with the tool's result; ``wrong=True`` answers directly and wrongly."""

    name = "scripted"

    def __init__(self, tokenizer, wrong: bool = False) -> None:
        self.tok = tokenizer
        self.wrong = wrong
        self.calls = 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        from verl.workers.rollout.replica import TokenOutput

        self.calls += 1
        text = self.tok.decode(prompt_ids)
        a, op, b = _QUESTION.findall(text)[-1]
        if self.wrong:
            reply = f"The answer is {int(a) + int(b) + 1}."
        elif "<tool_response>" not in text:
            reply = '<tool_call>\n' + json.dumps({"name": _TOOL[op], "arguments": {"a": int(a), "b": int(b)}}) + "\n</tool_call>"
        else:
            result = re.findall(r"<tool_response>\s*(.*?)\s*</tool_response>", text, re.S)[-1]
            reply = f"The answer is {result}."
        ids = self.tok.encode(reply + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


@pytest.fixture(scope="session")
def scripted():
    return ScriptedEngine
