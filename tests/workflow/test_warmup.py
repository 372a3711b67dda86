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
from agentrl.workflow.warmup import WarmupError, batch_gradients, encode, warmup

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
    ids, mask = encode(tok, ROWS[0], "rows.jsonl:1", 4096, [ADD])
    prompt = tok.apply_chat_template(ROWS[0]["messages"], tools=[ADD], tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template(ROWS[0]["messages"] + ROWS[0]["metadata"]["demonstration"], tools=[ADD],
                                   tokenize=False)
    learned = tok.decode([t for t, m in zip(ids, mask) if m])
    assert learned == full[len(prompt):] and '"a": 12' in learned and '"b": 30' in learned
    assert mask == sorted(mask)  # the prompt first, then only the answer
    assert tok.decode(ids) == full


def test_a_batch_row_by_row_has_the_padded_batchs_loss_and_gradients_with_the_output_layer_on_learned_tokens(
        tiny_demo):
    """Rows of different lengths: the loss and every gradient are those of the model's own loss on the batch padded
    into one tensor, while the model saw one row at a time (no padding) and its output layer only the positions
    that predict a learned token."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_demo["model_path"])
    rows = [*ROWS[:3], {**ROWS[3], "messages": [{"role": "user", "content": "Add three and eighty-eight: " * 6}]}]
    batch = [encode(tok, row, "", 4096, [ADD]) for row in rows]
    width = max(len(i) for i, _ in batch)
    ids = torch.tensor([i + [0] * (width - len(i)) for i, _ in batch])
    attention = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in batch])
    labels = torch.tensor([[t if m else -100 for t, m in zip(i, k)] + [-100] * (width - len(i)) for i, k in batch])
    net = AutoModelForCausalLM.from_pretrained(tiny_demo["model_path"], dtype=torch.float32)
    seen = {"model": [], "output layer": []}
    net.get_output_embeddings().register_forward_hook(lambda _m, a, _o: seen["output layer"].append(a[0].shape[:2]))

    net.zero_grad()
    theirs = net(input_ids=ids, attention_mask=attention, labels=labels)
    theirs.loss.backward()
    their_grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    seen["output layer"].clear()
    net.register_forward_pre_hook(lambda _m, _a, kw: seen["model"].append(tuple(kw["input_ids"].shape)),
                                  with_kwargs=True)
    ours = batch_gradients(net, batch)
    assert ours == pytest.approx(float(theirs.loss), rel=1e-5)
    for a, p in zip(their_grads, net.parameters()):
        torch.testing.assert_close(p.grad, a, rtol=1e-4, atol=1e-6)
    assert seen["model"] == [(1, len(i)) for i, _ in batch]
    assert seen["output layer"] == [(1, sum(m[1:])) for _, m in batch]
    assert sum(m for _, k in batch for m in k) < width * len(batch) / 4  # the prompts are most of the tokens


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
            ids, mask = encode(tok, row, "", 4096, [ADD])
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


def _served_row(n: int, a: int, b: int, allowed=None) -> dict:
    """A demo row with a whole demonstration: the call, the calculator's result, the answer."""
    call = {"type": "function", "function": {"name": "add", "arguments": {"a": a, "b": b}}}
    meta = {"expected_answer": str(a + b), "demonstration": [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": str(a + b)},
        {"role": "assistant", "content": f"The answer is {a + b}."}]}
    if allowed is not None:
        meta["allowed_tools"] = allowed
    return {"id": f"s{n}", "messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "metadata": meta}


def test_a_tool_result_in_a_demonstration_is_context_not_learned(tiny_demo):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_demo["model_path"])
    ids, mask = encode(tok, _served_row(0, 417, 385), "rows.jsonl:1", 4096, [ADD])
    learned = tok.decode([t for t, m in zip(ids, mask) if m])
    assert '"a": 417' in learned and "The answer is 802." in learned  # both assistant turns
    assert "<tool_response>" not in learned and learned.count("802") == 1  # the result is only read
    assert "<tool_response>" in tok.decode(ids) and tok.decode(ids).count("802") == 2
    spans = [m for n, m in enumerate(mask) if n == 0 or mask[n - 1] != m]
    assert spans == [0, 1, 0, 1]  # prompt, call, the tool's result and the next turn's header, answer


def test_with_a_config_the_prompts_offer_its_servers_tools_exactly_as_the_agent_loop_does(demo_config, scripted,
                                                                                            tmp_path):
    """The warm-up's prompt ids for a row equal the ids the agent loop sent the model for that row, with the real
    calculator server's tools (and a row's allowed_tools) in them; without the config the tools are missing."""
    from agentrl.workflow.local import LocalRunner, load_rows
    from agentrl.workflow.models import load_settings
    from agentrl.workflow.warmup import _offers

    rows = [_served_row(0, 12, 30), _served_row(1, 7, 5, allowed=["add"])]
    data = _write(tmp_path / "served.jsonl", rows)
    settings = load_settings(str(demo_config), ["agentrl.max_prompt_length=2048"])  # the whole prompt is sent
    runner = LocalRunner(settings, settings.model, engine="transformers")
    runner.close()
    sent = {}

    class Recording(scripted):
        async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
            text = self.tok.decode(prompt_ids)
            if "<tool_response>" not in text:
                sent[text.rsplit("What is ", 1)[1].split("?")[0]] = list(prompt_ids)
            return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params, **kw)

    runner.engine = Recording(runner.tokenizer)
    records = runner.run(load_rows(data))
    assert [r.rollout.reward for r in records] == [1.0, 1.0]
    offers = _offers(rows, "rows.jsonl", str(demo_config))
    names = [sorted(t["function"]["name"] for t in o) for o in offers]
    assert {"add", "multiply", "subtract", "sqrt"} <= set(names[0]) and names[1] == ["add"]  # allowed_tools applies
    for row, tools in zip(rows, offers):
        ids, mask = encode(runner.tokenizer, row, "rows.jsonl", 4096, tools)
        prompt = ids[:mask.index(1)]
        assert prompt == sent[row["messages"][0]["content"][len("What is "):-1]]
    bare, _ = encode(runner.tokenizer, rows[0], "rows.jsonl", 4096, _offers(rows, "rows.jsonl", None)[0])
    assert "multiply" not in runner.tokenizer.decode(bare)  # the rows declare no tools: none without the config
    with pytest.raises(WarmupError, match="serves no tools"):
        no_tools = tmp_path / "no_tools.yaml"
        no_tools.write_text(demo_config.read_text().replace("tools:\n  - calculator\n", "tools: []\n"))
        warmup(settings.model, str(data), str(tmp_path / "out"), config=str(no_tools))
