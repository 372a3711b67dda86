"""``agentrl models warmup``: a short supervised warm-up on demonstrations, on the suite's demo model.

What is real: the demo model and its tokenizer and chat template, the command as the README gives it, the
training loop, the folder it writes loaded back by transformers. What it does not show: that a warm-up helps a
task (the README's SmolLM2-on-BFCL figures do that).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from agentrl.cli import main
from agentrl.workflow.warmup import WarmupError, encode, warmup

ADD = {"type": "function", "function": {"name": "add", "description": "a + b", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}


def _row(n: int, a: int, b: int) -> dict:
    call = {"type": "function", "function": {"name": "add", "arguments": {"a": a, "b": b}}}
    return {"id": f"r{n}", "messages": [{"role": "user", "content": f"What is {a} + {b}?"}],
            "metadata": {"declared_tools": [ADD],
                         "demonstration": [{"role": "assistant", "content": "", "tool_calls": [call]}]}}


ROWS = [_row(n, a, b) for n, (a, b) in enumerate([(12, 30), (7, 5), (41, 19), (3, 88)])]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_only_the_demonstration_is_learned(tiny_demo):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_demo["model_path"])
    ids, mask = encode(tok, ROWS[0], "rows.jsonl:1", 4096)
    prompt = tok.apply_chat_template(ROWS[0]["messages"], tools=[ADD], tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template(ROWS[0]["messages"] + ROWS[0]["metadata"]["demonstration"], tools=[ADD],
                                   tokenize=False)
    learned = tok.decode([t for t, m in zip(ids, mask) if m])
    assert learned == full[len(prompt):] and '"a": 12' in learned and '"b": 30' in learned
    assert mask == sorted(mask)  # the prompt first, then only the answer
    assert tok.decode(ids) == full


def test_warmup_learns_and_writes_a_folder_transformers_loads(tiny_demo, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    data = _write(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "warm"
    assert main(["models", "warmup", tiny_demo["model_path"], "--data", str(data), "-o", str(out),
                 "--epochs", "6", "--lr", "2e-3", "--batch-size", "4"]) == 0
    report = json.loads((out / "warmup.json").read_text())
    assert report["rows"] == 4 and report["steps"] == 6 and report["loss_last"] < report["loss_first"]
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.chat_template == AutoTokenizer.from_pretrained(tiny_demo["model_path"]).chat_template

    def loss(folder) -> float:
        net = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        total = 0.0
        for row in ROWS:
            ids, mask = encode(tok, row, "", 4096)
            labels = torch.tensor([[t if m else -100 for t, m in zip(ids, mask)]])
            with torch.no_grad():
                total += float(net(input_ids=torch.tensor([ids]), labels=labels).loss)
        return total / len(ROWS)

    assert loss(out) < loss(tiny_demo["model_path"])  # the weights written are the trained ones


def test_bad_rows_and_an_occupied_folder_fail_before_training(tiny_demo, tmp_path):
    plain = dict(ROWS[1], metadata={"declared_tools": [ADD]})
    data = _write(tmp_path / "rows.jsonl", [ROWS[0], plain])
    with pytest.raises(WarmupError, match=r"rows.jsonl:2 \(id 'r1'\): metadata.demonstration .*bfcl-answers"):
        warmup(tiny_demo["model_path"], str(data), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(WarmupError, match="not empty; pass --force"):
        warmup(tiny_demo["model_path"], str(_write(tmp_path / "ok.jsonl", ROWS)), str(busy))
    assert (busy / "keep.txt").read_text() == "mine"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n{not json\n")
    with pytest.raises(WarmupError, match=r"bad.jsonl:2: not JSON"):
        warmup(tiny_demo["model_path"], str(bad), str(tmp_path / "out2"))
