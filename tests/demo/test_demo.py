"""The CPU demo build: data rows, tokenizer + chat template, verl compatibility, idempotence.

One short build (20 warm-up steps, no measurement) is shared by the module.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from agentrl.demo import CALCULATOR_TOOL_NAMES, CALCULATOR_TOOLS, build
from agentrl.demo.data import read_jsonl, tool_conversation
from agentrl.demo.evaluate import parse_tool_calls, run_tool, tool_turn_text

TASK = {"question": "What is 37 + 48?", "tool": "add", "a": 37, "b": 48, "answer": 85}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    started = time.time()
    paths = build(str(out), warmup_steps=20, eval_samples=0, log=lambda msg: None)
    return out, paths, time.time() - started


@pytest.fixture(scope="module")
def tok(built):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(built[1]["model_path"])


def test_rows(built):
    _, paths, _ = built
    train, val = read_jsonl(paths["train_path"]), read_jsonl(paths["val_path"])
    assert len(train) == 512 and len(val) == 64
    questions = {r["messages"][-1]["content"] for r in train}
    assert not questions & {r["messages"][-1]["content"] for r in val}
    for row in train[:50] + val:
        user = row["messages"][-1]
        assert user["role"] == "user" and user["content"].startswith("What is ")
        a, op, b = user["content"][len("What is "):-1].split()
        assert str(eval(f"{int(a)} {op} {int(b)}")) == row["metadata"]["expected_answer"]  # noqa: S307
        assert row["metadata"]["allowed_tools"] == CALCULATOR_TOOL_NAMES


def test_model_loads_and_generates(built, tok):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(built[1]["model_path"], attn_implementation="sdpa")
    assert model.config.model_type == "qwen2" and model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    assert model.generation_config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token is not None and tok.pad_token != tok.eos_token
    ids = tok.apply_chat_template([{"role": "user", "content": "What is 1 + 2?"}], tools=CALCULATOR_TOOLS,
                                  add_generation_prompt=True, tokenize=True, return_dict=False)
    out = model.generate(torch.tensor([ids]), max_new_tokens=5, do_sample=True, pad_token_id=tok.pad_token_id)
    assert out.shape[1] > len(ids)


def test_markup_tokens(tok):
    for text in ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"):
        assert len(tok.encode(text, add_special_tokens=False)) == 1, text
    # the tool tags survive skip_special_tokens (agentrl's loop decodes responses that way)
    ids = tok.encode('<tool_call>\n{"name": "add"}\n</tool_call><|im_end|>', add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == '<tool_call>\n{"name": "add"}\n</tool_call>'
    assert tok.encode("\n", add_special_tokens=False).__len__() == 1  # verl's Qwen builder needs this
    assert [tok.decode([i]) for i in tok.encode("1234", add_special_tokens=False)] == ["1", "2", "3", "4"]


def test_chat_template_renders_tool_conversation(tok):
    text = tok.apply_chat_template(tool_conversation(TASK), tools=CALCULATOR_TOOLS, tokenize=False)
    assert "<tools>\n" + json.dumps(CALCULATOR_TOOLS[0]) + "\n" in text
    assert text.endswith(
        "<|im_start|>user\nWhat is 37 + 48?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 37, \"b\": 48}}\n</tool_call>"
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n85\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nThe answer is 85.<|im_end|>\n"
    )
    # round trip: the tokens decode back to the same text
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=False) == text
    # tokenize=True through apply_chat_template gives the same ids
    assert tok.apply_chat_template(tool_conversation(TASK), tools=CALCULATOR_TOOLS, tokenize=True,
                                   return_dict=False) == ids
    # a system message replaces the default one; without tools there is no tools block
    plain = tok.apply_chat_template([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
                                    tokenize=False, add_generation_prompt=True)
    assert plain == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_hermes_parser_extracts_the_ideal_call(tok):
    from verl.experimental.agent_loop.tool_parser import ToolParser

    conversation = tool_conversation(TASK)
    prompt = tok.apply_chat_template(conversation[:1], tools=CALCULATOR_TOOLS, tokenize=False, add_generation_prompt=True)
    upto_call = tok.apply_chat_template(conversation[:2], tools=CALCULATOR_TOOLS, tokenize=False)
    assert upto_call.startswith(prompt)
    response_ids = tok(upto_call[len(prompt):].rstrip("\n"), add_special_tokens=False)["input_ids"]
    assert response_ids[-1] == tok.eos_token_id
    parser = ToolParser.get_tool_parser("hermes", tok)
    content, calls = asyncio.run(parser.extract_tool_calls(response_ids))
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("add", {"a": 37, "b": 48})]
    assert "<tool_call>" not in content
    # the local simulation parses it the same way and the calculator answers the plain number
    assert parse_tool_calls(tok.decode(response_ids)) == [{"name": "add", "arguments": {"a": 37, "b": 48}}]
    assert run_tool(parse_tool_calls(tok.decode(response_ids))[0]) == "85"


def test_verl_continuous_tokens_match_the_template(tok):
    """verl appends tool turns by suffix diffs; the result must equal the whole conversation rendered."""
    from verl.utils.tokenizer.continuous_token import QwenContinuousTokenBuilder

    builder = QwenContinuousTokenBuilder(tok)
    conversation = tool_conversation(TASK)
    runtime = builder.build_initial_tokens(conversation[:1], tools=CALCULATOR_TOOLS)
    full_call = tok.apply_chat_template(conversation[:2], tools=CALCULATOR_TOOLS, tokenize=False)
    generated = tok(full_call.rstrip("\n"), add_special_tokens=False)["input_ids"][len(runtime):]
    runtime = runtime + generated  # the model stops at <|im_end|>
    merged = builder.merge_context_tokens(conversation[:2], conversation[:3], runtime, tools=CALCULATOR_TOOLS)
    expected = tok.apply_chat_template(conversation[:3], tools=CALCULATOR_TOOLS, tokenize=False,
                                       add_generation_prompt=True)
    assert tok.decode(merged.token_ids) == expected
    assert tok.decode(merged.token_ids[len(runtime):]) == tool_turn_text(["85"])


def test_build_is_idempotent(built, monkeypatch):
    from agentrl.demo import builder

    out, paths, first_seconds = built
    monkeypatch.setattr(builder, "_build", lambda *a, **k: pytest.fail("the finished build was built again"))
    again = build(str(out), warmup_steps=20, eval_samples=0, log=lambda msg: None)
    assert again == paths
    marker = json.loads((out / "build.json").read_text())
    assert marker["options"]["warmup_steps"] == 20 and marker["results"]["parameters"] < 2_000_000
