"""Measure how often the demo model solves tasks, simulating the agent loop with ``generate``.

Per sample: render the prompt with the calculator tools, sample the first assistant turn,
parse hermes-style ``<tool_call>`` JSON; with a call, compute the result locally, append
the tool turn to the *token stream* (as verl's continuous-token builder does) and sample
the final answer; without one, the first turn is the final answer. Success means the last
integer of the final answer equals ``metadata.expected_answer``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import torch

from agentrl.demo.tools import CALCULATOR_TOOLS
from agentrl.demo.data import compute, last_integer
from agentrl.demo.tokenizer import IM_END

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> list[dict[str, Any]]:
    """Hermes-style calls in ``text`` as {"name", "arguments"} dicts (malformed ones skipped)."""
    calls = []
    for body in _CALL.findall(text):
        try:
            call = json.loads(body)
            calls.append({"name": call["name"], "arguments": call["arguments"]})
        except (ValueError, KeyError, TypeError):
            continue
    return calls


def run_tool(call: dict[str, Any]) -> str:
    """What the calculator server would answer (the plain number), or an error text."""
    args = call.get("arguments")
    try:
        a, b = args["a"], args["b"]
        if not (isinstance(a, int) and isinstance(b, int)):
            raise TypeError
        return str(compute(call["name"], a, b))
    except (ValueError, KeyError, TypeError):
        return f"Error: cannot call {call.get('name')!r} with {json.dumps(args)}"


def tool_turn_text(results: list[str]) -> str:
    """Tokens verl appends after an assistant turn that ended in ``<|im_end|>``."""
    body = "".join(f"\n<tool_response>\n{r}\n</tool_response>" for r in results)
    return f"\n<|im_start|>user{body}<|im_end|>\n<|im_start|>assistant\n"


@torch.no_grad()
def _sample(model, tok, prompts: list[list[int]], temperature: float, max_new_tokens: int) -> list[list[int]]:
    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    eos = tok.convert_tokens_to_ids(IM_END)
    kwargs = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} if temperature > 0 else {
        "do_sample": False}
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, eos_token_id=eos,
                         pad_token_id=pad, **kwargs)
    result = []
    for row in out[:, width:].tolist():
        cut = row.index(eos) + 1 if eos in row else len(row)
        result.append(row[:cut])
    return result


def _load(model_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    return model.eval(), tok


def base_success_rate(
    model_path,
    rows: list[dict[str, Any]],
    n_samples: int = 4,
    temperature: float = 1.0,
    batch_size: int = 64,
    seed: int = 0,
    model_and_tokenizer=None,
    tools: list[dict[str, Any]] | None = None,
) -> dict[str, float]:
    """Success and tool-use rates over ``rows`` x ``n_samples`` sampled episodes.

    Returns n, success_rate, tool_use_rate, valid_call_rate (calls the calculator accepts, per
    tool-using episode), success_given_tool, success_given_direct and a few example episodes.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # see agentrl.demo.builder: one thread is far cheaper on a shared box
    try:
        return _rates(model_path, rows, n_samples, temperature, batch_size, seed, model_and_tokenizer, tools)
    finally:
        torch.set_num_threads(threads)


def _rates(model_path, rows, n_samples, temperature, batch_size, seed, model_and_tokenizer, tools):
    model, tok = model_and_tokenizer or _load(model_path)
    tools = tools or CALCULATOR_TOOLS
    torch.manual_seed(seed)
    episodes = [row for row in rows for _ in range(n_samples)]
    stats = {"success": 0, "tool_use": 0, "tool_success": 0, "direct_success": 0, "valid_call": 0}
    examples: list[str] = []
    for start in range(0, len(episodes), batch_size):
        chunk = episodes[start : start + batch_size]
        prompts = []
        for row in chunk:
            text = tok.apply_chat_template(row["messages"], tools=tools, tokenize=False, add_generation_prompt=True)
            prompts.append(tok(text, add_special_tokens=False)["input_ids"])
        first = _sample(model, tok, prompts, temperature, max_new_tokens=40)
        finals: list[str] = [""] * len(chunk)
        second_idx, second_prompts = [], []
        for i, gen in enumerate(first):
            text = tok.decode(gen, skip_special_tokens=False)
            calls = parse_tool_calls(text)
            if not calls:
                finals[i] = text
                continue
            results = [run_tool(c) for c in calls]
            stats["tool_use"] += 1
            stats["valid_call"] += int(not results[0].startswith("Error"))
            if not gen or gen[-1] != tok.convert_tokens_to_ids(IM_END):
                continue  # ran out of tokens mid-turn: the loop would stop here
            extra = tok(tool_turn_text(results), add_special_tokens=False)["input_ids"]
            second_idx.append(i)
            second_prompts.append(prompts[i] + gen + extra)
        if second_prompts:
            for i, gen in zip(second_idx, _sample(model, tok, second_prompts, temperature, max_new_tokens=24)):
                finals[i] = tok.decode(gen, skip_special_tokens=False)
        for i, row in enumerate(chunk):
            ok = last_integer(finals[i].replace(IM_END, "")) == str(row["metadata"]["expected_answer"])
            stats["success"] += ok
            used_tool = i in second_idx
            stats["tool_success"] += ok and used_tool
            stats["direct_success"] += ok and not used_tool
            if len(examples) < 3 and used_tool:
                examples.append(tok.decode(second_prompts[second_idx.index(i)][len(prompts[i]):]) + finals[i])
    n = len(episodes)
    tool_n = stats["tool_use"]
    return {
        "n": n,
        "success_rate": stats["success"] / n,
        "tool_use_rate": tool_n / n,
        "valid_call_rate": stats["valid_call"] / max(1, tool_n),
        "success_given_tool": stats["tool_success"] / max(1, tool_n),
        "success_given_direct": stats["direct_success"] / max(1, n - tool_n),
        "examples": examples,
    }
