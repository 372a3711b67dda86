"""How a CPU run's trainer is laid out: its ranks (logical Ray GPUs) and the sequences one micro-batch holds.

    >>> from agentrl.config import AgentrlSettings
    >>> s = AgentrlSettings(model="m", train_data="t", rewards=["math"], batch_size=8, samples_per_prompt=4)
    >>> ranks = cpu_ranks(s)                          # agentrl.nodes × agentrl.gpus_per_node (default 1)
    >>> ranks, ranks.world
    (Ranks(nodes=1, per_node=1), 1)
    >>> per_rank_sequences(s, Ranks(1, 2))            # the step's 8 × 4 sequences, split over two ranks
    16
    >>> cpu_micro_batch(s, ranks, "no/such/model")    # no config.json to read a vocabulary from: one pass
    32

With a model folder, the vocabulary decides: a 512-token one keeps all 32 sequences in one micro-batch (one pass is
the fastest on a CPU); SmolLM2's 49,152-token one would hold ~16.5 GB of logits that way, so the micro-batch is
the largest divisor of 32 whose logits fit :data:`LOGITS_BUDGET`. ``agentrl.verl.args.build_overrides`` writes
both into verl's ``trainer.nnodes``/``n_gpus_per_node`` and ``*_micro_batch_size_per_gpu`` keys.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from agentrl.config import AgentrlSettings
from agentrl.errors import AgentrlError


def ray_address() -> str | None:
    """The Ray cluster the run attaches to (``RAY_ADDRESS``, as verl's ``ray.init()`` reads it), or None
    (``local`` asks Ray for a cluster of its own, as no address does)."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    return address if address and address != "local" else None


class PlanError(AgentrlError):
    """The nodes, GPUs and batch sizes do not fit together; the message says which setting to change."""


@dataclass(frozen=True)
class Ranks:
    """The trainer's processes: one per GPU (a logical Ray GPU on the CPU), ``gpus_per_node`` on each node."""

    nodes: int
    per_node: int

    @property
    def world(self) -> int:
        return self.nodes * self.per_node


def cpu_ranks(settings: AgentrlSettings) -> Ranks:
    """The CPU path's ranks: ``agentrl.nodes`` × ``agentrl.gpus_per_node`` (default 1) logical GPUs."""
    ranks = Ranks(settings.nodes, settings.gpus_per_node or 1)
    if ranks.nodes > 1 and not ray_address():
        raise PlanError(f"agentrl.nodes={ranks.nodes} needs a Ray cluster of {ranks.nodes} nodes: start it (`ray start "
                        f"--head` on one node, `ray start --address=HEAD:6379` on the others; see the README's "
                        f"\"More than one machine\") and set RAY_ADDRESS=HEAD:6379 before `agentrl train`")
    return ranks


def per_rank_sequences(settings: AgentrlSettings, ranks: Ranks) -> int:
    """Sequences each rank trains on a step; verl splits the step's batch evenly over the ranks."""
    from agentrl.verl.gpu_plan import split_batch

    return split_batch(settings, ranks.world, f"{ranks.world} trainer ranks ({ranks.nodes} node(s) × "
                                              f"{ranks.per_node} GPU(s))", PlanError)


# Bytes of vocabulary-wide float32 tensors one CPU micro-batch may hold. verl's update keeps several per token
# (the logits, their log-softmax, the entropy's softmax, and the gradients of those): SmolLM2-135M (49,152-token
# vocabulary) with all 32 sequences of a step (8 prompts x 4, 768 + 128 tokens) in one micro-batch held 16.5 GB.
LOGITS_BUDGET = 4 << 30
LOGIT_COPIES = 6


def cpu_micro_batch(settings: AgentrlSettings, ranks: Ranks, model_path: str) -> int:
    """Sequences per micro-batch on a CPU rank: all of the rank's where the vocabulary is small (one pass is the
    fastest on a CPU), fewer where its logits would not fit :data:`LOGITS_BUDGET`; always a divisor of the
    rank's sequences, as verl requires. The gradient is the same; only the peak memory changes."""
    per_rank = per_rank_sequences(settings, ranks)
    try:
        vocab = int(json.loads((Path(model_path) / "config.json").read_text()).get("vocab_size") or 0)
    except (OSError, ValueError, TypeError):
        vocab = 0
    if not vocab:
        return per_rank
    per_sequence = (settings.max_prompt_length + settings.max_response_length) * vocab * 4 * LOGIT_COPIES
    cap = max(1, LOGITS_BUDGET // per_sequence)
    return max(d for d in range(1, per_rank + 1) if per_rank % d == 0 and d <= cap)
