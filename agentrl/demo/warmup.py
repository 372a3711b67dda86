"""The tiny Qwen2 model and its supervised warm-up (plain torch, CPU).

Every demo conversation starts with the same system prompt (which lists the tools and is
most of the tokens), so each step runs that shared prefix once, broadcasts its key/value
cache over the batch and runs only the per-conversation suffixes. Gradients flow through
the broadcast, so this is exactly full-sequence training, several times cheaper.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

import torch

from agentrl.demo.tokenizer import DEFAULT_SYSTEM


def make_model(vocab_size: int, pad_id: int, eos_id: int, seed: int = 0, layers: int = 3, hidden: int = 128):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        pad_token_id=pad_id,
        eos_token_id=eos_id,
        bos_token_id=None,
        use_sliding_window=False,
        torch_dtype="float32",
        attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def prefix_ids_for(tok, tools: list[dict] | None) -> list[int]:
    """Token ids of the system turn every demo conversation starts with."""
    system = [{"role": "system", "content": DEFAULT_SYSTEM}]
    text = tok.apply_chat_template(system, tools=tools, tokenize=False, add_generation_prompt=False)
    return tok(text, add_special_tokens=False)["input_ids"]


def encode_conversation(tok, conversation: list[dict[str, Any]], tools: list[dict], n_prefix: int,
                        learn_first: bool = True):
    """Token ids after the shared system prefix, and a 0/1 mask of the assistant tokens to learn
    (without the very first assistant token unless ``learn_first``)."""
    def ids(messages, gen):
        text = tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=gen)
        return tok(text, add_special_tokens=False)["input_ids"]

    if conversation[0]["role"] != "system":  # the shared prefix is this system turn, whatever the template's default
        conversation = [{"role": "system", "content": DEFAULT_SYSTEM}, *conversation]

    full = ids(conversation, False)
    mask = [0] * len(full)
    for k, message in enumerate(conversation):
        if message["role"] != "assistant":
            continue
        start = len(ids(conversation[:k], True))
        end = len(ids(conversation[: k + 1], False))
        while end > start and full[end - 1] != tok.eos_token_id:  # drop what follows the end of turn ("\n")
            end -= 1
        if end == start:
            raise ValueError("chat template is not prefix-consistent around an assistant turn")
        for i in range(start, end):
            mask[i] = 1
        if k == 2 and not learn_first:
            mask[start] = 0
    return full[n_prefix:], mask[n_prefix:]


def _broadcast_cache(cache, batch: int):
    for layer in cache.layers:
        layer.keys = layer.keys.expand(batch, -1, -1, -1)
        layer.values = layer.values.expand(batch, -1, -1, -1)
    return cache


def batch_loss(model, prefix_ids: torch.Tensor, batch: list[tuple[list[int], list[int]]], pad_id: int,
               detach_prefix: bool = False):
    """Mean cross-entropy over the masked (assistant) tokens of the batch.

    ``detach_prefix`` runs the shared prefix without gradient (cheaper, slightly approximate).
    """
    width = max(len(ids) for ids, _ in batch)
    inp = torch.full((len(batch), width), pad_id, dtype=torch.long)
    tgt_mask = torch.zeros((len(batch), width), dtype=torch.bool)
    for row, (ids, mask) in enumerate(batch):
        inp[row, : len(ids)] = torch.tensor(ids)
        tgt_mask[row, : len(mask)] = torch.tensor(mask, dtype=torch.bool)
    n_prefix = prefix_ids.shape[1]
    with torch.set_grad_enabled(torch.is_grad_enabled() and not detach_prefix):
        cache = model(input_ids=prefix_ids, use_cache=True).past_key_values
    cache = _broadcast_cache(cache, len(batch))
    positions = torch.arange(n_prefix, n_prefix + width).unsqueeze(0).expand(len(batch), -1)
    # Right padding: pads only follow real tokens, so the plain causal mask is correct.
    logits = model(input_ids=inp, past_key_values=cache, position_ids=positions, use_cache=True).logits
    # logits at t predict token t+1; suffix token 0 (<|im_start|> of the user turn) is never a target.
    targets = tgt_mask[:, 1:]
    return torch.nn.functional.cross_entropy(logits[:, :-1][targets], inp[:, 1:][targets])


def warmup(
    model,
    tok,
    conversations: list[tuple[list[dict[str, Any]], bool]],
    tools: list[dict],
    steps: int = 400,
    batch_size: int = 16,
    lr: float = 3e-3,
    max_seconds: float = 170.0,
    seed: int = 0,
    short_prefix_fraction: float = 0.6,
    log=print,
) -> dict[str, Any]:
    """Train on the conversations' assistant turns; stops at ``steps`` or ``max_seconds``.

    ``conversations`` are (messages, learn_first) pairs, see :func:`agentrl.demo.data.warmup_conversations`.
    """
    prefix = prefix_ids_for(tok, tools)
    # The turns after the system prompt render the same with or without tools, and rendering
    # the tool schemas thousands of times is most of the encoding time: encode without them.
    bare = len(prefix_ids_for(tok, None))
    data = [encode_conversation(tok, c, None, bare, learn) for c, learn in conversations]
    if data[0] != encode_conversation(tok, conversations[0][0], tools, len(prefix), conversations[0][1]):
        raise ValueError("chat template renders the conversation turns differently with tools")
    prefix_ids = torch.tensor([prefix])
    # Curriculum: the first ``short_prefix_fraction`` of the steps use the bare system prompt
    # (no tool list). Attention then spreads over ~30 keys instead of ~370, so the heads that copy
    # the operands and the result form far sooner; RoPE is relative, so they carry over.
    short_ids = torch.tensor([prefix_ids_for(tok, None)])
    short_steps = int(steps * short_prefix_fraction)
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warm = max(1, min(20, steps // 10))

    def lr_at(step):
        if step < warm:
            return lr * (step + 1) / warm
        frac = (step - warm) / max(1, steps - warm)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))

    model.train()
    t0, losses, step = time.time(), [], 0
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        shared = short_ids if step < short_steps else prefix_ids
        loss = batch_loss(model, shared, rng.sample(data, batch_size), tok.pad_token_id)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 25 == 0 or step == steps - 1:
            log(f"warmup step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)")
        if time.time() - t0 > max_seconds:
            log(f"warmup stopped at step {step} by the {max_seconds:.0f}s time limit")
            break
    model.eval()
    tail = losses[-20:]
    return {"steps": step + 1, "seconds": round(time.time() - t0, 1), "final_loss": sum(tail) / len(tail)}
