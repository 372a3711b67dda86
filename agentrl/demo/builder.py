"""Build the CPU demo offline: task data, tokenizer, tiny Qwen2 model, warm-up, measurement.

Layout of ``out_dir``::

    data/train.jsonl, data/val.jsonl   task rows (messages + metadata.expected_answer)
    model/                             save_pretrained model + tokenizer (chat template inside)
    build.json                         marker: written last, holds the build options and results
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from agentrl.demo.tools import CALCULATOR_TOOLS

MARKER = "build.json"
BUILD_VERSION = 2


def _paths(out_dir: str) -> dict[str, str]:
    return {
        "model_path": os.path.join(out_dir, "model"),
        "train_path": os.path.join(out_dir, "data", "train.jsonl"),
        "val_path": os.path.join(out_dir, "data", "val.jsonl"),
    }


def read_marker(out_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(out_dir, MARKER), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def build(
    out_dir: str,
    seed: int = 0,
    *,
    warmup_steps: int = 800,
    max_seconds: float = 900.0,
    n_train: int = 512,
    n_val: int = 64,
    tool_fraction: float = 0.4,
    eval_samples: int = 4,
    layers: int = 2,
    batch_size: int = 16,
    lr: float = 6e-3,
    tool_share: float = 0.85,
    short_prefix_fraction: float = 0.6,
    chat_template: str | None = None,
    tokens: dict[str, Any] | None = None,
    log=None,
) -> dict[str, str]:
    """Build (or reuse) the demo under ``out_dir``; returns model_path, train_path, val_path.

    A finished build leaves ``build.json``; a later call with the same options returns at
    once. ``eval_samples=0`` skips the success-rate measurement (tests use it).

    ``chat_template`` and ``tokens`` build the model with another family's markup instead of the
    hermes-style ChatML one: its published chat template and its special tokens, named as in
    :func:`agentrl.demo.tokenizer.train_family_tokenizer` (the warm-up teaches its tool-call format).
    """
    log = log or (lambda msg: print(f"[agentrl.demo] {msg}", file=sys.stderr, flush=True))
    options = {
        "version": BUILD_VERSION, "seed": seed, "warmup_steps": warmup_steps, "max_seconds": max_seconds,
        "n_train": n_train, "n_val": n_val, "tool_fraction": tool_fraction, "layers": layers,
        "batch_size": batch_size, "lr": lr, "tool_share": tool_share,
        "short_prefix_fraction": short_prefix_fraction,
        "tools": CALCULATOR_TOOLS,
    }
    if chat_template:
        if not tokens:
            raise ValueError("build(chat_template=...) needs the family's tokens: special, added, eos, bos, pad")
        options.update(chat_template=chat_template, tokens=tokens)
    paths = _paths(out_dir)
    if _reusable(out_dir, options, paths):
        log(f"reusing the build in {out_dir}")
        return paths
    from agentrl.firstuse import one_at_a_time

    with one_at_a_time(os.path.join(out_dir, ".build.lock"), f"building the demo in {out_dir}", log):
        if _reusable(out_dir, options, paths):
            log(f"reusing the build in {out_dir}")
            return paths
        return _build_here(out_dir, options, paths, log, lambda: _build(
            out_dir, seed, paths, warmup_steps, max_seconds, n_train, n_val, tool_fraction, layers, batch_size, lr,
            tool_share, short_prefix_fraction, eval_samples, log, chat_template, tokens))


def _reusable(out_dir: str, options: dict, paths: dict[str, str]) -> bool:
    marker = read_marker(out_dir)
    return bool(marker and marker.get("options") == options and all(os.path.exists(p) for p in paths.values()))


def _build_here(out_dir: str, options: dict, paths: dict[str, str], log, run_build) -> dict[str, str]:
    t0 = time.time()
    os.makedirs(os.path.dirname(paths["train_path"]), exist_ok=True)
    if os.path.exists(os.path.join(out_dir, MARKER)):
        os.remove(os.path.join(out_dir, MARKER))

    import torch

    threads = torch.get_num_threads()
    # One thread: on a shared (contended) 2-core machine two OpenMP threads spin-wait on each other
    # and a warm-up step cost ~10x the CPU time (measured: 1.8 vs 0.14 CPU-seconds).
    torch.set_num_threads(1)
    try:
        results = run_build()
    finally:
        torch.set_num_threads(threads)
    results["seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(out_dir, MARKER), "w", encoding="utf-8") as f:
        json.dump({"options": options, "results": results, "paths": paths}, f, indent=1)
    log(f"build done in {results['seconds']}s: {out_dir}")
    return paths


def _build(out_dir, seed, paths, warmup_steps, max_seconds, n_train, n_val, tool_fraction, layers, batch_size, lr,
           tool_share, short_prefix_fraction, eval_samples, log, chat_template=None, tokens=None) -> dict[str, Any]:
    from agentrl.demo.data import make_rows, warmup_conversations, write_jsonl
    from agentrl.demo.tokenizer import CHAT_TEMPLATE, DEFAULT_SYSTEM, train_family_tokenizer, train_tokenizer
    from agentrl.demo.warmup import make_model, warmup

    train_rows = make_rows(n_train, seed)
    val_rows = make_rows(n_val, seed + 1, exclude={r["messages"][-1]["content"] for r in train_rows})
    if chat_template:  # another family's default system prompt is not the one the warm-up teaches: say it
        for row in train_rows + val_rows:
            row["messages"].insert(0, {"role": "system", "content": DEFAULT_SYSTEM})
    write_jsonl(paths["train_path"], train_rows)
    write_jsonl(paths["val_path"], val_rows)

    conversations = warmup_conversations(min(4096, 32 * warmup_steps + 512), seed + 2, tool_fraction=tool_fraction,
                                         tool_share=tool_share)
    corpus = [_render_plain(c, chat_template or CHAT_TEMPLATE) for c, _ in conversations[:1500]]
    tok = train_family_tokenizer(corpus, tokens, chat_template) if chat_template else train_tokenizer(corpus)
    model = make_model(len(tok), tok.pad_token_id, tok.eos_token_id, seed=seed, layers=layers)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"tokenizer: {len(tok)} tokens; model: {n_params} parameters; warm-up on {len(conversations)} conversations")
    stats = warmup(model, tok, conversations, CALCULATOR_TOOLS, steps=warmup_steps, batch_size=batch_size, lr=lr,
                   max_seconds=max_seconds, seed=seed, short_prefix_fraction=short_prefix_fraction, log=log)
    _save(model, tok, paths["model_path"])

    results: dict[str, Any] = {"parameters": n_params, "vocab_size": len(tok), "warmup": stats}
    if eval_samples > 0 and chat_template:
        log("base rates not measured: the measurement reads the default template's calls")
    elif eval_samples > 0:
        from agentrl.demo.evaluate import base_success_rate

        rate = base_success_rate(paths["model_path"], val_rows, eval_samples, temperature=1.0,
                                 model_and_tokenizer=(model, tok), seed=seed)
        results["base_rates"] = {k: v for k, v in rate.items() if k != "examples"}
        log("base rates at temperature 1.0 on val: " + json.dumps(results["base_rates"]))
        for example in rate["examples"][:2]:
            log("example tool episode: " + json.dumps(example))
    return results


def _render_plain(conversation: list[dict[str, Any]], chat_template: str) -> str:
    """Conversation text for tokenizer training, rendered without a tokenizer object."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(conversations=[conversation], tools=CALCULATOR_TOOLS,
                                        chat_template=chat_template)
    return rendered[0]


def _save(model, tok, path: str) -> None:
    from transformers import GenerationConfig

    eos = tok.eos_token_id
    model.generation_config = GenerationConfig(
        eos_token_id=eos, pad_token_id=tok.pad_token_id, do_sample=True, temperature=1.0, top_k=0, top_p=1.0
    )
    model.config.use_cache = True
    model.save_pretrained(path)
    tok.save_pretrained(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl.demo.build", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup-steps", type=int, default=800)
    parser.add_argument("--max-seconds", type=float, default=900.0, help="warm-up time cap")
    parser.add_argument("--eval-samples", type=int, default=4, help="samples per val row for the base rate (0: skip)")
    parser.add_argument("--chat-template", help="a model family's chat template (a .jinja file) instead of the default")
    parser.add_argument("--tokens", help="that family's tokens, a JSON file: {special, added, eos, bos, pad}")
    args = parser.parse_args(argv)
    if bool(args.chat_template) != bool(args.tokens):
        parser.error("--chat-template and --tokens go together")
    paths = build(args.out_dir, seed=args.seed, warmup_steps=args.warmup_steps, max_seconds=args.max_seconds,
                  eval_samples=args.eval_samples,
                  chat_template=open(args.chat_template, encoding="utf-8").read() if args.chat_template else None,
                  tokens=json.load(open(args.tokens, encoding="utf-8")) if args.tokens else None)
    print(json.dumps(paths))
    return 0
