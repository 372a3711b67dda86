"""Batched token-in/token-out sampling with a transformers model: the engine of the CPU rollout.

Requests that arrive while a batch is running wait and go into the next batch. Each batch is
left-padded and decoded with the KV cache; every sequence has its own length budget and stop
tokens. Log-probs are those of the sampled tokens under ``softmax(logits / temperature)``, the
same quantity verl's actor computes, so rollout and trainer log-probs can be compared.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import torch

from agentrl import malloc


@dataclasses.dataclass
class Request:
    prompt_ids: list[int]
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    want_logprobs: bool = True
    future: Any = None  # asyncio.Future set by the batcher


@dataclasses.dataclass
class Result:
    token_ids: list[int]
    log_probs: list[float]
    stop_reason: str  # "completed" (stop token) or "length"
    version: Any = None  # the weights version (trainer step) that generated every token of it


def _filter_logits(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Per-row top-k and top-p filtering of already temperature-scaled logits."""
    vocab = logits.shape[-1]
    if bool((top_k > 0).any()):
        k = torch.where(top_k > 0, top_k.clamp(max=vocab), torch.full_like(top_k, vocab))
        kth = torch.sort(logits, dim=-1, descending=True).values.gather(-1, (k - 1).unsqueeze(-1))
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if bool((top_p < 1.0).any()):
        sorted_logits, idx = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        cum = probs.cumsum(-1) - probs  # mass strictly before each token
        remove = cum > top_p.unsqueeze(-1)
        sorted_logits = sorted_logits.masked_fill(remove, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
    return logits


@torch.no_grad()
def generate_batch(model: Any, requests: list[Request], pad_id: int, eos_ids: set[int],
                   generator: torch.Generator | None = None) -> list[Result]:
    """Sample continuations for ``requests`` in one left-padded batch with a KV cache."""
    n = len(requests)
    lengths = [len(r.prompt_ids) for r in requests]
    width = max(lengths)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    for i, r in enumerate(requests):
        input_ids[i, width - lengths[i]:] = torch.tensor(r.prompt_ids, dtype=torch.long)
        attention[i, width - lengths[i]:] = 1
    temps = torch.tensor([max(r.temperature, 1e-6) for r in requests]).unsqueeze(-1)
    greedy = torch.tensor([r.temperature <= 0 for r in requests])
    top_k = torch.tensor([r.top_k if r.top_k and r.top_k > 0 else -1 for r in requests])
    top_p = torch.tensor([r.top_p if r.top_p else 1.0 for r in requests], dtype=torch.float)
    stops = [set(r.stop_token_ids) | (set() if r.ignore_eos else eos_ids) for r in requests]
    budget = [r.max_tokens for r in requests]

    out_tokens: list[list[int]] = [[] for _ in range(n)]
    out_logps: list[list[float]] = [[] for _ in range(n)]
    done = [b <= 0 for b in budget]
    reasons = ["length"] * n
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    past, logits = _prefill(model, input_ids, attention, position_ids, [tuple(r.prompt_ids) for r in requests])
    step_ids, step_pos = input_ids[:, -1:], position_ids[:, -1:]  # (the next step's inputs, set after sampling)
    last_only = _last_only(model)
    for step in range(max(budget)):
        if all(done):
            break
        if step:  # the prefill gave the first position's logits
            out = model(input_ids=step_ids, attention_mask=attention, position_ids=step_pos,
                        past_key_values=past, use_cache=True, **last_only)
            past, logits = out.past_key_values, out.logits[:, -1, :]
        logits = logits.float() / temps
        logp_all = torch.log_softmax(logits, dim=-1)
        probs = torch.softmax(_filter_logits(logits, top_k, top_p), dim=-1)
        sampled = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        chosen = torch.where(greedy, logits.argmax(-1), sampled)
        chosen_logp = logp_all.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
        for i in range(n):
            if done[i]:
                continue
            tok = int(chosen[i])
            out_tokens[i].append(tok)
            out_logps[i].append(float(chosen_logp[i]))
            if tok in stops[i]:
                done[i], reasons[i] = True, "completed"
            elif len(out_tokens[i]) >= budget[i]:
                done[i] = True
        chosen = torch.where(torch.tensor(done), torch.full_like(chosen, pad_id), chosen)
        step_ids = chosen.unsqueeze(-1)
        attention = torch.cat([attention, torch.ones((n, 1), dtype=torch.long)], dim=-1)
        step_pos = step_pos[:, -1:] + 1
    return [Result(out_tokens[i], out_logps[i], reasons[i]) for i in range(n)]


def takes_logits_to_keep(model: Any) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` (transformers' causal LMs do): the vocabulary projection
    of chosen positions only. The CPU rollout keeps the last one, the warm-up (:mod:`agentrl.workflow.warmup`)
    those of the answer."""
    import inspect

    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _last_only(model: Any) -> dict[str, Any]:
    """``logits_to_keep=1`` where the model takes it: the vocabulary projection of the last position only (a
    prefill of 32 prompts of 450 tokens with SmolLM2's 49,152-token vocabulary: 42 s instead of 60 s here, and
    6.9 GB less memory)."""
    return {"logits_to_keep": 1} if takes_logits_to_keep(model) else {}


def _prefill(model: Any, input_ids: torch.Tensor, attention: torch.Tensor, position_ids: torch.Tensor,
             prompts: list[tuple[int, ...]]) -> tuple[Any, torch.Tensor]:
    """The KV cache and last-position logits of every row, each distinct prompt computed once.

    A GRPO group is one prompt sampled several times: its rows are identical (same ids, same left padding), so
    the prompt runs once and its cache is copied to the group's rows (the prompt cost of a group of 4: a
    quarter). Each row's logits are the prompt's own, up to the float rounding a different batch shape brings
    (tests/core/test_generation.py: greedy samples equal, log-probs the model's own)."""
    keep = _last_only(model)

    def run(rows: slice | torch.Tensor) -> tuple[Any, torch.Tensor]:
        out = model(input_ids=input_ids[rows], attention_mask=attention[rows], position_ids=position_ids[rows],
                    use_cache=True, **keep)
        return out.past_key_values, out.logits[:, -1, :]

    first: dict[tuple[int, ...], int] = {}
    index = [first.setdefault(p, len(first)) for p in prompts]
    if len(first) == len(prompts):
        return run(slice(None))
    past, logits = run(torch.tensor([prompts.index(p) for p in first]))  # the first row of each distinct prompt
    if not hasattr(past, "reorder_cache"):  # a cache that cannot be copied row-wise: compute every row
        return run(slice(None))
    expand = torch.tensor(index)
    past.reorder_cache(expand)
    return past, logits.index_select(0, expand)


def kv_bytes_per_token(model: Any) -> int | None:
    """Bytes one token of one row adds to one layer's keys as attention reads them at a decoding step; None for a
    model whose config does not say (then batches are not split).

    That is every attention head's, not only the key-value heads' the cache stores: with a padding mask (a
    left-padded batch) transformers' attention copies the keys and values to every head (``repeat_kv``) at each
    step, a tensor ``num_attention_heads / num_key_value_heads`` times the cache's (3x for SmolLM2)."""
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(cfg, "get_text_config"):
        cfg = cfg.get_text_config()
    heads = getattr(cfg, "num_attention_heads", None)
    head_dim = getattr(cfg, "head_dim", None) or (getattr(cfg, "hidden_size", 0) // heads if heads else None)
    param = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    if not (heads and head_dim and param is not None):
        return None
    return int(heads) * int(head_dim) * param.element_size()


def split_by_cache(requests: list[Request], per_token: int | None, cap: int) -> list[list[int]]:
    """The requests' indices in sub-batches whose one-layer keys at full length (rows x (longest prompt + largest
    budget) x ``per_token``, :func:`kv_bytes_per_token`) stay within ``cap`` bytes, each prompt's rows (a GRPO
    group) in one sub-batch so that its prompt is still computed once. A batch within ``cap`` stays one, in its
    order.

    Why: at each step every layer copies its keys and values into new tensors (the cache grows by a token;
    attention repeats them to every head). Above glibc's largest heap block
    (:data:`agentrl.malloc.LARGEST_HEAP_BLOCK`, 32 MiB) each copy is a fresh ``mmap`` the kernel zeroes and maps.
    ``agentrl eval`` of 64 BFCL rows with SmolLM2 in float32 (the README's CPU rollout figures; Intel Xeon, twice
    each): whole, 8:59 to 12:36 wall with 457 s in the kernel; in 3 sub-batches, 3:49 to 4:02 with 14 s."""
    whole = list(range(len(requests)))
    if per_token is None or not requests:
        return [whole]

    def size(rows: list[int]) -> int:
        longest = max(len(requests[i].prompt_ids) for i in rows)
        budget = max(requests[i].max_tokens for i in rows)
        return len(rows) * (longest + budget) * per_token

    if size(whole) <= cap:
        return [whole]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault(tuple(r.prompt_ids), []).append(i)
    chunks: list[list[int]] = []
    for rows in sorted(groups.values(), key=lambda rows: len(requests[rows[0]].prompt_ids)):  # like lengths together
        if chunks and size(chunks[-1] + rows) <= cap:
            chunks[-1] += rows
        else:
            chunks.append(list(rows))  # a group alone above the cap still goes as one
    return chunks


class Batcher:
    """Collects concurrent requests and runs them as batches on one worker thread.

    Weight updates take the same lock, so a batch never samples from half-updated weights. A batch whose KV
    cache would outgrow glibc's heap runs as sub-batches (:func:`split_by_cache`).
    """

    def __init__(self, model: Any, pad_id: int, eos_ids: set[int], max_batch: int = 64, seed: int = 0,
                 cache_cap: int = malloc.LARGEST_HEAP_BLOCK):
        self.model = model
        self.pad_id = pad_id
        self.eos_ids = eos_ids
        self.max_batch = max_batch
        self.cache_cap = cache_cap
        self.kv_per_token = kv_bytes_per_token(model)
        self.lock = threading.Lock()
        self.queue: asyncio.Queue[Request] | None = None
        self.task: asyncio.Task | None = None
        self.generator = torch.Generator().manual_seed(seed)
        self.batches = 0
        self.sub_batches = 0
        self.sequences = 0
        self.version: Any = 0  # set with each weight update; read under the lock a batch runs under

    async def submit(self, request: Request) -> Result:
        loop = asyncio.get_running_loop()
        if self.queue is None:
            self.queue = asyncio.Queue()
            self.task = loop.create_task(self._run())
        request.future = loop.create_future()
        await self.queue.put(request)
        return await request.future

    async def _run(self) -> None:
        assert self.queue is not None
        while True:
            batch = [await self.queue.get()]
            await asyncio.sleep(0.005)  # let the rest of a burst arrive
            while not self.queue.empty() and len(batch) < self.max_batch:
                batch.append(self.queue.get_nowait())
            try:
                results = await asyncio.to_thread(self._generate, batch)
            except Exception as exc:  # hand the failure to every waiter, keep serving
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(exc)
                continue
            for r, res in zip(batch, results):
                if not r.future.done():
                    r.future.set_result(res)

    def _generate(self, batch: list[Request]) -> list[Result]:
        with self.lock:
            self.batches += 1
            self.sequences += len(batch)
            results: list[Result] = [None] * len(batch)  # type: ignore[list-item]
            try:
                for rows in split_by_cache(batch, self.kv_per_token, self.cache_cap):
                    self.sub_batches += 1
                    done = generate_batch(self.model, [batch[i] for i in rows], self.pad_id, self.eos_ids,
                                          self.generator)
                    for i, result in zip(rows, done):
                        results[i] = result
            finally:
                malloc.release()  # the batch's KV cache back to the system (agentrl.malloc)
            for result in results:  # off-policy runs update weights while rollouts are being generated
                result.version = self.version
            return results

    def load_weights(self, state: dict[str, torch.Tensor], version: Any = None) -> int:
        """Copy trainer weights in place (``version``: the trainer step they are from); returns how many
        tensors were loaded."""
        with self.lock:
            # state_dict(keep_vars=True) also names tied weights (lm_head.weight) that
            # named_parameters() lists once under the embedding.
            params = self.model.state_dict(keep_vars=True)
            loaded = 0
            unknown = []
            for name, tensor in state.items():
                target = params.get(name)
                if target is None:
                    unknown.append(name)
                    continue
                target.data.copy_(tensor.to(dtype=target.dtype))
                loaded += 1
            if unknown:
                raise KeyError(f"trainer sent weights the rollout model does not have: {unknown[:5]}")
            if version is not None:
                self.version = version
            return loaded
