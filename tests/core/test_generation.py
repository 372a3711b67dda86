"""The CPU rollout's sampler: budgets, stop tokens, and log-probs equal to the model's own."""

from __future__ import annotations

import asyncio

import pytest
import torch

from agentrl.verl.cpu.generation import Batcher, Request, generate_batch


@pytest.fixture(scope="module")
def model():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg).eval()


def test_logprobs_match_a_full_forward_pass(model):
    requests = [Request(prompt_ids=[1, 2, 3], max_tokens=6, temperature=0.7),
                Request(prompt_ids=[4, 5, 6, 7, 8, 9], max_tokens=4, temperature=1.0)]
    results = generate_batch(model, requests, pad_id=0, eos_ids=set(), generator=torch.Generator().manual_seed(1))
    for req, res in zip(requests, results):
        assert len(res.token_ids) == req.max_tokens and res.stop_reason == "length"
        ids = torch.tensor([req.prompt_ids + res.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(req.prompt_ids) - 1:-1] / req.temperature
        expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(res.token_ids).unsqueeze(-1))
        assert torch.allclose(torch.tensor(res.log_probs), expected.squeeze(-1), atol=1e-4)


def test_stop_tokens_end_a_sequence_and_are_kept(model):
    greedy = generate_batch(model, [Request([1, 2, 3], max_tokens=8, temperature=0)], 0, set())[0]
    stop = greedy.token_ids[2]
    first = greedy.token_ids.index(stop)
    res = generate_batch(model, [Request([1, 2, 3], max_tokens=8, temperature=0, stop_token_ids=(stop,))], 0, set())[0]
    assert res.token_ids == greedy.token_ids[: first + 1] and res.stop_reason == "completed"
    eos = generate_batch(model, [Request([1, 2, 3], max_tokens=8, temperature=0)], 0, {stop})[0]
    assert eos.token_ids == res.token_ids
    ignored = generate_batch(model, [Request([1, 2, 3], max_tokens=8, temperature=0, ignore_eos=True)], 0, {stop})[0]
    assert len(ignored.token_ids) == 8


def test_batched_equals_alone_for_greedy(model):
    alone = [generate_batch(model, [Request(p, max_tokens=5, temperature=0)], 0, set())[0].token_ids
             for p in ([1, 2], [3, 4, 5, 6, 7])]
    together = generate_batch(model, [Request([1, 2], 5, temperature=0), Request([3, 4, 5, 6, 7], 5, temperature=0)],
                              0, set())
    assert [r.token_ids for r in together] == alone


def test_batcher_serves_concurrent_requests_and_loads_weights(model):
    batcher = Batcher(model, pad_id=0, eos_ids=set())

    state = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}

    async def main():
        results = await asyncio.gather(*[batcher.submit(Request([1, 2, i], max_tokens=3)) for i in range(5, 13)])
        loaded = batcher.load_weights(state, 3)
        return results, loaded, await batcher.submit(Request([1, 2], max_tokens=1))

    results, loaded, after = asyncio.run(main())
    assert len(results) == 8 and all(len(r.token_ids) == 3 for r in results)
    assert batcher.sequences == 9 and batcher.batches < 9  # bursts are batched
    assert {r.version for r in results} == {0} and after.version == 3  # the weights that generated each
    assert loaded == len(state)  # tied lm_head.weight included
    assert float(model.model.embed_tokens.weight.detach().abs().sum()) == 0.0
    with pytest.raises(KeyError, match="does not have"):
        batcher.load_weights({"no.such.weight": torch.zeros(1)})


def test_a_group_shares_its_prompt_and_samples_as_if_computed_alone(model, monkeypatch):
    """A GRPO group's rows (one prompt, several samples) run the prompt once; the samples' log-probs are the
    model's own for each row, and greedy rows of one prompt agree with a batch that computed every row."""
    from agentrl.verl.cpu import generation

    seen = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: (seen.append(tuple(k["input_ids"].shape)), forward(*a, **k))[1])
    group = [Request(prompt_ids=[4, 5, 6, 7], max_tokens=5, temperature=1.0) for _ in range(4)]
    other = [Request(prompt_ids=[9, 8], max_tokens=5, temperature=1.0) for _ in range(2)]
    results = generate_batch(model, group + other, pad_id=0, eos_ids=set(), generator=torch.Generator().manual_seed(3))
    assert seen[0] == (2, 4)  # the prefill: two distinct prompts, not six rows
    assert all(shape == (6, 1) for shape in seen[1:])
    for req, res in zip(group + other, results):
        ids = torch.tensor([req.prompt_ids + res.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(req.prompt_ids) - 1:-1]
        expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(res.token_ids).unsqueeze(-1))
        assert torch.allclose(torch.tensor(res.log_probs), expected.squeeze(-1), atol=1e-4)
    assert len({tuple(r.token_ids) for r in results[:4]}) > 1  # the group's samples are drawn apart
    greedy = [Request(prompt_ids=[4, 5, 6, 7], max_tokens=6, temperature=0) for _ in range(3)]
    shared = generate_batch(model, greedy + [Request([9, 8], 6, temperature=0)], 0, set())
    monkeypatch.setattr(generation, "_prefill", lambda m, i, a, p, prompts: (lambda o: (o.past_key_values,
                        o.logits[:, -1, :]))(m(input_ids=i, attention_mask=a, position_ids=p, use_cache=True)))
    alone = generate_batch(model, greedy + [Request([9, 8], 6, temperature=0)], 0, set())
    assert [r.token_ids for r in shared] == [r.token_ids for r in alone]


def test_a_batch_whose_cache_outgrows_the_cap_runs_in_sub_batches_groups_whole(model, monkeypatch):
    """Above the cap (glibc's largest heap block in a real run) a batch runs as sub-batches: each one's key cache
    at full length within the cap, a prompt's rows together, every result back in its request's place, and greedy
    tokens those of the whole batch run at once."""
    from agentrl.verl.cpu import generation

    per_token = generation.kv_bytes_per_token(model)
    assert per_token == 4 * (32 // 4) * 4  # every attention head (4; the cache has 2) x head_dim 8 x float32
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8], [9, 10], [11, 12, 13, 14]]
    requests = [Request(prompts[i % 4], max_tokens=4, temperature=0) for i in range(12)]  # groups interleaved
    cap = 7000  # 6 rows of the two shortest prompts (6 x 7 x 128 B) fit; 9 rows of 8 tokens (9216 B) do not

    chunks = generation.split_by_cache(requests, per_token, cap)
    assert sorted(i for c in chunks for i in c) == list(range(12)) and len(chunks) == 2
    for chunk in chunks:
        longest = max(len(requests[i].prompt_ids) for i in chunk)
        assert len(chunk) * (longest + 4) * per_token <= cap
        for p in {tuple(requests[i].prompt_ids) for i in chunk}:  # every row of a prompt is in this chunk
            assert {i for i in range(12) if tuple(requests[i].prompt_ids) == p} <= set(chunk)
    assert generation.split_by_cache(requests, per_token, 10 ** 9) == [list(range(12))]  # within the cap: as is
    assert generation.split_by_cache(requests[:1], per_token, 1) == [[0]]  # one group above the cap goes whole
    assert generation.split_by_cache(requests, None, 1) == [list(range(12))]  # size unknown: not split

    whole = [r.token_ids for r in generate_batch(model, requests, 0, set())]
    seen: list[list[tuple[int, ...]]] = []
    real = generation.generate_batch

    def recording(model_, batch, *a, **k):
        seen.append([tuple(r.prompt_ids) for r in batch])
        return real(model_, batch, *a, **k)

    monkeypatch.setattr(generation, "generate_batch", recording)
    batcher = Batcher(model, pad_id=0, eos_ids=set(), cache_cap=cap)
    results = batcher._generate(requests)
    assert [len(s) for s in seen] == [6, 6] and batcher.sub_batches == 2 and batcher.batches == 1
    assert [r.token_ids for r in results] == whole
    seen.clear()
    assert [r.token_ids for r in Batcher(model, pad_id=0, eos_ids=set())._generate(requests)] == whole
    assert [len(s) for s in seen] == [12]  # the default cap (32 MiB) holds this batch whole
