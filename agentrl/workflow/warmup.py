"""A short supervised warm-up: a model learns a task's answer format from demonstrations before GRPO.

    agentrl data convert --from bfcl-answers multiple -o data/bfcl/warmup_multiple.jsonl
    agentrl models warmup smollm2-135m-instruct --data data/bfcl/warmup_multiple.jsonl -o models/smollm2-bfcl-warmup
    # then `model: ../models/smollm2-bfcl-warmup` in the config; "base" in every comparison is this folder

A GRPO group learns only where the model sometimes succeeds. A small pretrained model that never writes its tool
format (SmolLM2-135M-Instruct never wrote a ``<tool_call>`` for BFCL's rows) gives GRPO nothing to push; a few
hundred demonstrations of the format fix that, and what GRPO then adds is measured against the warmed-up model.

Rows are the dataset rows agentrl trains on (``messages``, ``metadata.declared_tools``) with the answer in
``metadata.demonstration``: the assistant turns (OpenAI's message layout, ``tool_calls`` included) that follow the
row's messages. Each is rendered with the model's own chat template and the row's tools, as the agent loop renders
it, and the loss is on the demonstration's tokens only (the end-of-turn token included). The folder written is a
standard HuggingFace folder (weights in float32, tokenizer, the same chat template) with ``warmup.json``, which
says what it was made from; it loads wherever the model it came from loads.

The compute dtype is the trainer's: bfloat16 autocast where the CPU does bfloat16 natively, float32 elsewhere
(:mod:`agentrl.precision`); the weights and the optimiser stay in float32.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional


class WarmupError(ValueError):
    """A row or setting the warm-up cannot use; the message names the row and the fix."""


@dataclass
class WarmupReport:
    model: str
    data: str
    out: str
    rows: int
    epochs: int
    steps: int
    learning_rate: float
    batch_size: int
    dtype: str
    tools_from: str
    loss_first: float
    loss_last: float
    tokens_learned: int
    seconds: float


def encode(tok: Any, row: dict, where: str, max_length: int, tools: Optional[list] = None) -> tuple[list[int], list[int]]:
    """(token ids, 0/1 mask of the tokens to learn) for one row: its messages and ``tools`` (the schemas its prompt
    offers: :func:`agentrl.tools.offers.offered_per_row`) as the prompt, then its demonstration. Only the assistant
    turns are learned; a tool result (or user turn) inside a demonstration is context, as it is in a rollout."""
    demo = (row.get("metadata") or {}).get("demonstration")
    if not isinstance(demo, list) or not demo or any(not isinstance(m, dict) or not isinstance(m.get("role"), str)
                                                      for m in demo) or demo[-1].get("role") != "assistant":
        raise WarmupError(f"{where}: metadata.demonstration must be a list of messages ending with an assistant "
                          f"turn (what the model should answer after the row's messages); "
                          f"`agentrl data convert --from bfcl-answers CATEGORY` writes such rows")
    ids: list[int] = []
    mask: list[int] = []
    rendered = ""
    for n, message in enumerate(demo):
        if message["role"] != "assistant":
            continue
        before = list(row["messages"]) + demo[:n]
        context = tok.apply_chat_template(before, tools=tools, tokenize=False, add_generation_prompt=True)
        turn = tok.apply_chat_template(before + [message], tools=tools, tokenize=False)
        if not context.startswith(rendered) or not turn.startswith(context):
            raise WarmupError(f"{where}: the chat template renders the conversation differently once "
                              f"demonstration[{n}] follows it, so the answer's tokens cannot be told apart")
        for text, learn in ((context[len(rendered):], 0), (turn[len(context):], 1)):
            piece = tok(text, add_special_tokens=False)["input_ids"] if text else []
            ids += piece
            mask += [learn] * len(piece)
        rendered = turn
    ids, mask = ids[:max_length], mask[:max_length]
    if not any(mask):
        raise WarmupError(f"{where}: the answer starts after max_length={max_length} tokens; raise --max-length")
    return ids, mask


def read_rows(path: str) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise WarmupError(f"{path}:{n}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not rows:
        raise WarmupError(f"{path}: no rows")
    return rows


def _offers(rows: list[dict], data: str, config: Optional[str]) -> list[Optional[list]]:
    """The tool schemas each row's prompt offers (agentrl.tools.offers), the config's servers started once."""
    from agentrl.dataset import declared_tools
    from agentrl.tools.offers import offered_per_row

    metas = []
    for n, row in enumerate(rows, 1):
        meta = (row.get("metadata") if isinstance(row, dict) else None) or {}
        try:
            declared_tools(meta)
        except ValueError as exc:
            raise WarmupError(f"{data}:{n} (id {row.get('id')!r}): {exc}") from None
        metas.append(meta)
    if not config:
        return offered_per_row(None, None, metas)
    from agentrl.workflow.models import load_settings

    settings = load_settings(config)
    if not settings.tools:
        raise WarmupError(f"--config {config} serves no tools (agentrl.tools is empty), so it adds nothing to the "
                          f"prompts; leave --config out to offer the rows' declared_tools only")
    return offered_per_row(settings.tools, settings.tool_allow, metas, config)


def batch_gradients(net: Any, batch: list[tuple[list[int], list[int]]], autocast: Any = None) -> float:
    """Add to ``net``'s gradients those of one batch's loss, the mean cross-entropy of its learned tokens (as the
    model's own loss gives it for the batch padded into one tensor), and return that loss. The rows go through the
    model one at a time, each one's summed loss divided by the batch's count of learned tokens, so the sum is the
    batch's mean, with no padding and no attention mask: a padded batch of 8 of BFCL's rows (500 to 900 tokens)
    held 13 GB of activations in float32, one row at a time 3.9 GB, and it ran about a fifth faster. The output
    layer runs only at the positions that predict a learned token (``logits_to_keep``), not over the prompt (with
    SmolLM2's 49,152-token vocabulary the prompt's logits were 3 GB more). ``batch``: (token ids, 0/1 learn mask)
    per row, from :func:`encode`."""
    import contextlib

    import torch

    from agentrl.verl.cpu.generation import takes_logits_to_keep

    keeps = takes_logits_to_keep(net)
    count = sum(sum(mask[1:]) for _, mask in batch)  # position t predicts token t + 1: the first is never predicted
    total = 0.0
    for ids, mask in batch:
        labels = torch.tensor([[t if m else -100 for t, m in zip(ids, mask)]])
        target = labels[:, 1:]
        with autocast or contextlib.nullcontext():
            if keeps:
                positions = (target[0] != -100).nonzero().flatten()
                logits = net(input_ids=torch.tensor([ids]), logits_to_keep=positions).logits
                summed = torch.nn.functional.cross_entropy(logits.float()[0], target[0, positions], reduction="sum")
            else:  # a model whose forward cannot keep some positions: its own loss, a mean over this row
                summed = net(input_ids=torch.tensor([ids]), labels=labels).loss * sum(mask[1:])
        loss = summed / count
        loss.backward()
        total += loss.item()
    return total


def warmup(model: str, data: str, out: str, *, epochs: int = 1, learning_rate: float = 2e-5, batch_size: int = 8,
           max_length: int = 1536, seed: int = 0, dtype: str = "auto", force: bool = False,
           config: Optional[str] = None, log: Callable[[str], None] = print) -> WarmupReport:
    """Fine-tune ``model`` (a folder, or a packaged model's name) on ``data``'s demonstrations; write ``out``.
    ``config``: a training config whose tool servers the prompts offer, as its rollouts will (without one, each
    row offers only its ``metadata.declared_tools``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentrl import malloc
    from agentrl.precision import choose
    from agentrl.runner import resolve_model

    malloc.tune()
    out_dir = Path(out)
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise WarmupError(f"{out} exists and is not empty; pass --force to replace it, or choose another folder")
    source, _ = resolve_model(model)
    rows = read_rows(data)
    offers = _offers(rows, data, config)
    tok = AutoTokenizer.from_pretrained(source)
    encoded = [encode(tok, row, f"{data}:{n} (id {row.get('id')!r})", max_length, tools)
               for n, (row, tools) in enumerate(zip(rows, offers), 1)]
    precision = choose(dtype)
    log(f"warm-up: {len(encoded)} demonstrations from {data}, {epochs} epoch(s), batch {batch_size}, "
        f"learning rate {learning_rate}; {precision.line().split(';')[0].replace('precision: training', 'computing')}")
    torch.manual_seed(seed)
    net = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    net.train()
    optim = torch.optim.AdamW(net.parameters(), lr=learning_rate, weight_decay=0.0)
    order = list(range(len(encoded)))
    steps = epochs * math.ceil(len(order) / batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: 1.0 - s / max(steps, 1))
    rng = random.Random(seed)
    started, step, losses, learned = time.perf_counter(), 0, [], 0
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision.dtype == "bfloat16")
    for _ in range(epochs):
        rng.shuffle(order)
        for at in range(0, len(order), batch_size):
            batch = [encoded[i] for i in order[at:at + batch_size]]
            loss = batch_gradients(net, batch, autocast)
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            optim.step()
            schedule.step()
            optim.zero_grad(set_to_none=True)
            step += 1
            losses.append(loss)
            learned += sum(sum(mask) for _, mask in batch)
            if step == 1 or step % 5 == 0 or step == steps:
                log(f"  step {step}/{steps}  loss {losses[-1]:.4f}  {time.perf_counter() - started:.0f}s")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    net.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    for name in ("chat_template.jinja", "generation_config.json"):
        if (Path(source) / name).is_file() and not (out_dir / name).is_file():
            shutil.copy2(Path(source) / name, out_dir / name)
    report = WarmupReport(model=model, data=str(data), out=str(out_dir), rows=len(encoded), epochs=epochs,
                          steps=step, learning_rate=learning_rate, batch_size=batch_size, dtype=precision.dtype,
                          tools_from=f"the tool servers of {config} and the rows' declared_tools" if config
                          else "the rows' declared_tools",
                          loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4), tokens_learned=learned,
                          seconds=round(time.perf_counter() - started, 1))
    (out_dir / "warmup.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    log(f"warm-up: {step} steps in {report.seconds:.0f}s, loss {report.loss_first:.3f} -> {report.loss_last:.3f}; "
        f"wrote {out_dir}")
    return report


def main_args(args: Any) -> Optional[int]:
    try:
        warmup(args.name, args.data, args.out, epochs=args.epochs, learning_rate=args.lr,
               batch_size=args.batch_size, max_length=args.max_length, seed=args.seed, force=args.force,
               config=args.config)
    except WarmupError as exc:
        raise SystemExit(f"agentrl models warmup: {exc}") from None
    return 0
