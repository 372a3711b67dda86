"""Each model family through the real agent loop, with its published chat template and special tokens.

What is real: verl's agent-loop base class and Continuous Token builder (chosen from ``config.json``'s
model_type as verl's worker does), verl's parser registry with the parsers agentrl registers, the calculator MCP
server over stdio, the math reward. What stands in: the model. No model of these families can run here, so a
tiny byte-level BPE tokenizer carries the family's special tokens and chat template (tests/fixtures/families,
sources in families.json) and a scripted rollout server replies, token-in/token-out, with the family's
documented output: a native call, then an answer with reasoning, or a broken call.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.workers.rollout.replica import TokenOutput

from agentrl import families
from agentrl.demo.tokenizer import train_family_tokenizer
from agentrl.verl.agent_loop import AgentrlAgentLoop

FIXTURES = Path(__file__).parent.parent / "fixtures" / "families"
FAMILY_DATA = json.loads((FIXTURES / "families.json").read_text())

# Per fixture: (the family's documented call of add(37, 48), its final answer turn, the visible answer, the
# reasoning, a broken call in the same format).
CASES = {
    "qwen2.5": ('<tool_call>\n{"name": "add", "arguments": {"a": 37, "b": 48}}\n</tool_call>',
                "The answer is 85.", "The answer is 85.", "",
                '<tool_call>\n{"name": "add", "arguments": {"a": 37, "b": 48,}}\n</tool_call>'),
    "qwen3": ('<think>\nI should add them.\n</think>\n\n<tool_call>\n{"name": "add", "arguments": {"a": 37, "b": 48}}\n'
              "</tool_call>",
              "<think>\nThe tool said 85, not 84.\n</think>\n\nThe answer is 85.", "The answer is 85.",
              "The tool said 85, not 84.",
              '<think>\nAdd.\n</think>\n\n<tool_call>\n{"name": "add", "arguments": {"a": 37 "b": 48}}\n</tool_call>'),
    "qwen3-coder": ("<tool_call>\n<function=add>\n<parameter=a>\n37\n</parameter>\n<parameter=b>\n48\n</parameter>\n"
                    "</function>\n</tool_call>",
                    "The answer is 85.", "The answer is 85.", "",
                    "<tool_call>\n<function=add>\n<parameter=a>\n37\n<parameter=b>\n48\n</function>\n</tool_call>"),
    "llama3.1": ('{"name": "add", "parameters": {"a": 37, "b": 48}}', "The answer is 85.", "The answer is 85.", "",
                 '{"name": "add", "parameters": {"a": 37, "b": 48}'),
    "mistral-nemo": ('[TOOL_CALLS][{"name": "add", "arguments": {"a": 37, "b": 48}}]', "The answer is 85.",
                     "The answer is 85.", "", '[TOOL_CALLS][{"name": "add", "arguments": {"a": 37, "b": }}]'),
    "mistral-small-3.2": ('[TOOL_CALLS]add[ARGS]{"a": 37, "b": 48}', "The answer is 85.", "The answer is 85.", "",
                          "[TOOL_CALLS]add[ARGS]{a: 37, b: 48}"),
    "gpt-oss": ("<|channel|>analysis<|message|>Need to add them.<|end|><|start|>assistant to=functions.add"
                '<|channel|>commentary json<|message|>{"a": 37, "b": 48}',
                "<|channel|>analysis<|message|>The tool answered 85, not 84.<|end|><|start|>assistant<|channel|>final"
                "<|message|>The answer is 85.", "The answer is 85.", "The tool answered 85, not 84.",
                ' to=functions.add<|channel|>commentary json<|message|>{"a": 37, "b": 48'),
    "glm-4.5": ("\n<think>I should add them.</think>\n<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>37</arg_value>\n"
                "<arg_key>b</arg_key>\n<arg_value>48</arg_value>\n</tool_call>",
                "\n<think>The tool said 85, not 84.</think>\nThe answer is 85.", "The answer is 85.",
                "The tool said 85, not 84.",
                "\n<think></think>\n<tool_call>add\n<arg_key>a</arg_key>\n<arg_key>b</arg_key>\n</tool_call>"),
    "kimi-k2": ("<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>"
                '{"a": 37, "b": 48}<|tool_call_end|><|tool_calls_section_end|>',
                "The answer is 85.", "The answer is 85.", "",
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.add:0<|tool_call_argument_begin|>"
                '{"a": 37, "b": }<|tool_call_end|><|tool_calls_section_end|>'),
    "seed-oss": ("<seed:think>I should add them.</seed:think><seed:tool_call>\n<function=add>\n<parameter=a>37</parameter>\n"
                 "<parameter=b>48</parameter>\n</function>\n</seed:tool_call>",
                 "<seed:think>The tool said 85, not 84.</seed:think>The answer is 85.", "The answer is 85.",
                 "The tool said 85, not 84.",
                 "<seed:tool_call>\n<function=add>\n<parameter=a>37\n<parameter=b>48</parameter>\n</function>\n"
                 "</seed:tool_call>"),
    "deepseek-v3.1": ('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{"a": 37, "b": 48}<｜tool▁call▁end｜>'
                      "<｜tool▁calls▁end｜>", "The answer is 85.", "The answer is 85.", "",
                      '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{"a": 37, "b": 48<｜tool▁call▁end｜>'
                      "<｜tool▁calls▁end｜>"),
    "granite-3.3": ('<|tool_call|>[{"name": "add", "arguments": {"a": 37, "b": 48}}]', "The answer is 85.",
                    "The answer is 85.", "", '<|tool_call|>[{"name": "add", "arguments": {"a": 37, "b": 48}]'),
}


@lru_cache(maxsize=None)
def family_tokenizer(name: str):
    data = FAMILY_DATA[name]
    chat_template = (FIXTURES / data["template"]).read_text()
    corpus = [*(c for case in CASES.values() for c in case), "What is 37 + 48? The tool said 85.", "error: malformed"] * 8
    return train_family_tokenizer(corpus, data, chat_template)


class RolloutStandIn:
    """verl's rollout server, scripted: each reply is the family's text plus its end-of-turn token."""

    def __init__(self, tokenizer, replies):
        self.tokenizer, self.replies, self.prompts = tokenizer, list(replies), []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        text, end = self.replies.pop(0)
        self.prompts.append(self.tokenizer.decode(prompt_ids, skip_special_tokens=False))
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.convert_tokens_to_ids(end)]
        return TokenOutput(token_ids=ids[: sampling_params["max_tokens"]], log_probs=[-0.5] * len(ids),
                           stop_reason="completed", extra_fields={"global_steps": 1})


def run_family(tmp_path, name, replies, *, tool_parser="auto", expected="85", max_parallel_calls=4, tokenizer=None,
               data=None):
    """One rollout of "What is 37 + 48?" whose model replies ``replies``; the loop, verl's output, the record.
    ``tokenizer`` and ``data`` (model_type, end_of_call, end_of_turn): a real model's, instead of the fixture's."""
    data = data or FAMILY_DATA[name]
    tokenizer = tokenizer or family_tokenizer(name)
    spec = {"run_dir": str(tmp_path), "tools": ["calculator"], "tool_allow": None,
            "rewards": [{"name": "math", "weight": 1.0}],
            "agent": {"max_turns": 4, "max_tool_calls": 4, "max_parallel_calls": max_parallel_calls,
                      "max_tool_result_chars": 400, "tool_parser": tool_parser, "simulated_user": None}}
    (tmp_path / "agentrl_spec.json").write_text(json.dumps(spec))
    config = OmegaConf.create({"agentrl": {"spec": str(tmp_path / "agentrl_spec.json")},
                               "actor_rollout_ref": {"rollout": {"response_length": 1024, "prompt_length": 4096,
                                                                 "calculate_log_probs": True}}})
    server = RolloutStandIn(tokenizer, [(text, data["end_of_call" if i < len(replies) - 1 else "end_of_turn"])
                                        for i, text in enumerate(replies)])
    row = {"id": "p1", "messages": [{"role": "user", "content": "What is 37 + 48?"}],
           "metadata": {"expected_answer": expected, "allowed_tools": ["add", "multiply"]}}

    async def main():  # built inside the running event loop, as verl's agent-loop worker builds it
        loop = AgentrlAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                                processor=None, dataset_cls=None, data_config=DictConfigWrap(OmegaConf.create({})),
                                hf_model_type=data["model_type"])
        return loop, await loop.run({"temperature": 1.0, "logprobs": True}, extra_info={"agentrl_row": json.dumps(row)})

    loop, out = asyncio.run(main())
    record = json.loads((tmp_path / "rollouts.jsonl").read_text().splitlines()[-1])
    return loop, out, record, server


@lru_cache(maxsize=None)
def broken_call_answer(name: str):
    """The rollout both tests below read: a broken call, the native call, the answer (run once per family)."""
    call, final, _, _, broken = CASES[name]
    run_dir = Path(tempfile.mkdtemp(prefix=f"agentrl-family-{name}-"))
    atexit.register(shutil.rmtree, run_dir, ignore_errors=True)
    return run_family(run_dir, name, [broken, call, final])


@pytest.mark.parametrize("name", list(CASES))
def test_family_through_the_loop(name):
    """A broken call is reported in the family's format and runs nothing; the native call runs with typed
    arguments and no spurious error; rewards get the visible answer, the reasoning kept beside it."""
    call, final, answer, reasoning, broken = CASES[name]
    loop, out, record, server = broken_call_answer(name)
    malformed, called, last = record["trajectories"]
    assert malformed["tool_calls"] == [] and len(malformed["tool_results"]) == 1
    assert malformed["tool_results"][0]["is_error"] and loop.family.call_example in malformed["tool_results"][0]["content"]
    assert "malformed tool call" in server.prompts[1]  # the model reads why, through its own template
    assert [(c["name"], c["arguments"]) for c in called["tool_calls"]] == [("add", {"a": 37, "b": 48})]
    assert all(type(v) is int for v in called["tool_calls"][0]["arguments"].values())  # typed, not "37"
    assert [(r["content"].strip(), r["is_error"]) for r in called["tool_results"]] == [("85", False)]
    assert record["tool_calls"] == 1 and "85" in server.prompts[2]
    assert last["response"] == answer and last.get("reasoning", "") == reasoning
    assert record["messages"][-1] == {"role": "assistant", "content": answer}
    assert out.reward_score == 1.0 and record["stop_reason"] == "answered"
    assert 0 in out.response_mask and 1 in out.response_mask
    if loop.family.call_id_length:  # Mistral: 9 alphanumerics, or its template refuses the history
        call_id = called["tool_calls"][0]["id"]
        assert len(call_id) == 9 and call_id.isalnum() and call_id in server.prompts[2]


def test_llama_runs_one_call_per_turn_and_says_so(tmp_path):
    two = '{"name": "add", "parameters": {"a": 37, "b": 48}}; {"name": "multiply", "parameters": {"a": 2, "b": 3}}'
    _, out, record, server = run_family(tmp_path, "llama3.1", [two, "The answer is 85."])
    first = record["trajectories"][0]
    assert [c["name"] for c in first["tool_calls"]] == ["add"]
    assert [r["is_error"] for r in first["tool_results"]] == [False, True]
    assert "one tool call per turn" in first["tool_results"][1]["content"]
    assert server.prompts[1].count("<|start_header_id|>ipython<|end_header_id|>") == 2
    assert out.reward_score == 1.0


def test_mistral_accepts_a_user_message_after_an_answer(tmp_path):
    """A simulated user's reply: Mistral's template refuses verl's synthetic [system, user] + [user] render."""
    loop, _, record, _ = run_family(tmp_path, "mistral-nemo", ["The answer is 85."])
    before = record["messages"]
    ids = loop.tokenizer.encode("[INST]What is 37 + 48?[/INST]The answer is 85.</s>", add_special_tokens=False)
    merged = loop.continuous_token_builder.merge_context_tokens(before, before + [{"role": "user", "content": "Why?"}], ids)
    assert loop.tokenizer.decode(merged.token_ids[len(ids):], skip_special_tokens=False) == "[INST]Why?[/INST]"


def test_an_explicit_parser_overrides_the_template(tmp_path):
    loop, _, record, _ = run_family(tmp_path, "qwen2.5", [CASES["qwen3-coder"][0], "The answer is 85."],
                                    tool_parser="qwen3_coder")
    assert loop.family is families.QWEN3_CODER and record["trajectories"][0]["tool_calls"][0]["arguments"] == {"a": 37, "b": 48}


def test_a_template_that_refuses_the_conversation_says_why_in_its_own_words(tmp_path):
    """Mistral's template with the hermes format forced: "c0" is no 9-character id. verl's wrapper would
    report a TypeError about list concatenation; the error names the template's own complaint."""
    from agentrl.verl.agent_loop import TemplateRefused

    with pytest.raises(TemplateRefused, match="Tool call IDs should be alphanumeric strings with length 9"):
        run_family(tmp_path, "mistral-nemo", [CASES["qwen2.5"][0], "The answer is 85."], tool_parser="hermes")


def test_llama_pythonic_calls_through_the_loop(tmp_path):
    """Llama 3.2's published template, with the pythonic format named in the config (its documented
    alternative to JSON): the call list runs, typed by Python's literal syntax."""
    _, out, record, _ = run_family(tmp_path, "llama3.2", ["[add(a=37, b=48)]", "The answer is 85."],
                                   tool_parser="llama3_pythonic")
    call = record["trajectories"][0]["tool_calls"][0]
    assert (call["name"], call["arguments"]) == ("add", {"a": 37, "b": 48})
    assert record["trajectories"][0]["tool_results"][0]["content"].strip() == "85" and out.reward_score == 1.0


@pytest.mark.parametrize("name", ["kimi-k2", "seed-oss", "deepseek-v3.1", "granite-3.3"])
def test_the_loop_trains_exactly_the_ids_it_sampled(name):
    """Every assistant token trained (mask 1) is one the scripted model sampled, in order; the whole sequence
    is what the family's published template renders for the conversation as it was sampled (each assistant turn
    its raw text), from the question on: the template is append-only under the family's tokens."""
    call, final, _, _, broken = CASES[name]
    data = FAMILY_DATA[name]
    replies = [broken, call, final]
    _, out, record, _ = broken_call_answer(name)
    tokenizer = family_tokenizer(name)
    ends = [data["end_of_call"], data["end_of_call"], data["end_of_turn"]]
    sampled = [i for text, end in zip(replies, ends)
               for i in tokenizer.encode(text, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids(end)]]
    assert [t for t, m in zip(out.response_ids, out.response_mask) if m == 1] == sampled
    assert len(out.response_logprobs) == len(out.response_ids)

    results = [step["tool_results"][0]["content"] for step in record["trajectories"][:2]]
    conversation = [{"role": "user", "content": "What is 37 + 48?"},
                    {"role": "assistant", "content": broken}, {"role": "tool", "content": results[0]},
                    {"role": "assistant", "content": call}, {"role": "tool", "content": results[1]},
                    {"role": "assistant", "content": final}]
    ids = list(out.prompt_ids) + list(out.response_ids)
    rendered = tokenizer.decode(ids, skip_special_tokens=False)
    reference = tokenizer.apply_chat_template(conversation, tokenize=False)
    question = "What is 37 + 48?"
    assert rendered.count(question) == 1 and "malformed tool call" in results[0] and results[1].strip() == "85"
    assert rendered[rendered.index(question):] == reference[reference.index(question):].rstrip("\n")
    assert tokenizer.encode(rendered, add_special_tokens=False) == ids
