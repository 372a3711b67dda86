"""The policy update leaves out sequences whose advantage is zero: the same gradient for less compute.

    agentrl.skip_flat_groups: true      (default; verl key +agentrl.skip_flat_groups)

In GRPO a group whose rollouts all scored alike has advantage 0 on every token, and with no KL or entropy term
such a sequence adds exactly nothing to the policy gradient (its loss is -A * ratio = 0, and so is its derivative).
On a real model half the groups or more are like that (SmolLM2-135M on BFCL: 37-88% of groups a step, median 62%),
and the update, the most expensive phase on a CPU, still runs their forward and backward passes.

So before verl's ``_update_actor`` the trainer reads the step's advantages and hands the update only the sequences
with a non-zero advantage. The loss is scaled back to what the whole batch gives (verl normalises token-mean by
the batch's tokens, seq-mean by its sequences): the optimizer sees the same gradient up to rounding, and its step
(Adam's moments move even on a zero gradient) happens as before, also when every group is flat (one sequence is
then kept, with its zero gradient). What changes: the actor's metrics (entropy, pg_loss, clip fraction) describe
the sequences trained, and ``agentrl/flat_skipped`` says how many were left out.

It applies only where the result is provably the same: vanilla policy loss, no KL loss, entropy coefficient 0,
one PPO epoch with one mini-batch a step (agentrl's own plan); otherwise the update runs on everything.
"""

from __future__ import annotations

import functools
from typing import Any

from agentrl.verl.patching import patch_on_import

TRAINER = "verl.trainer.ppo.v1.trainer_base"
LOSSES = "verl.workers.utils.losses"
SCALE_KEY = "agentrl_loss_scale"  # extra_info -> the micro-batches' non-tensor data -> ppo_loss
SEQ_MODES = ("seq-mean-token-sum", "seq-mean-token-sum-norm", "seq-mean-token-mean")


def applies(config: Any) -> bool:
    """Whether leaving out zero-advantage sequences gives the same update under this verl config."""
    def get(path: str, default: Any = None) -> Any:
        return _get(config, path, default)

    if not get("agentrl.skip_flat_groups", True):
        return False
    actor = "actor_rollout_ref.actor."
    return (get(actor + "policy_loss.loss_mode", "vanilla") == "vanilla"
            and not get(actor + "use_kl_loss", False)
            and float(get(actor + "entropy_coeff", 0.0) or 0.0) == 0.0
            and int(get(actor + "ppo_epochs", 1)) == 1
            and int(get(actor + "ppo_mini_batch_size", 0)) == int(get("data.train_batch_size", -1))
            and get(actor + "loss_agg_mode", "token-mean") in ("token-mean", "token-sum", *SEQ_MODES)
            and not get("distillation.enabled", False))


def _get(config: Any, path: str, default: Any) -> Any:
    from omegaconf import OmegaConf

    value = OmegaConf.select(config, path, default=default)
    return default if value is None else value


def choose(advantages: list[list[float]], dp_size: int = 1, micro: int | None = None) -> tuple[list[int], int | None]:
    """The sequences to train on and the micro-batch for them: every sequence with a non-zero advantage, topped up
    with flat ones until verl can split them (each of ``dp_size`` ranks the same count; with a fixed micro-batch of
    ``micro`` sequences, whole micro-batches, a smaller one where the kept fit in one). ``micro`` None: verl sizes
    micro-batches by tokens.

    >>> choose([[0.0, 0.0], [0.5, 0.5], [0.0], [-0.5, -0.5]])
    ([1, 3], None)
    >>> choose([[0.0], [0.0], [0.0]], dp_size=2)
    ([0, 1], None)
    >>> choose([[0.1]] * 5 + [[0.0]] * 11, micro=4)
    ([0, 1, 2, 3, 4, 5, 6, 7], 4)
    >>> choose([[0.1]] * 3 + [[0.0]] * 13, micro=4)
    ([0, 1, 2], 3)
    """
    kept = [i for i, adv in enumerate(advantages) if any(a != 0.0 for a in adv)]
    flat = [i for i, adv in enumerate(advantages) if not any(a != 0.0 for a in adv)]
    want = max(1, len(kept))
    per_rank = -(-want // dp_size)
    if micro is None:
        total, micro_kept = per_rank * dp_size, None
    elif per_rank <= micro:
        total, micro_kept = per_rank * dp_size, per_rank
    else:
        total, micro_kept = -(-per_rank // micro) * micro * dp_size, micro
    kept += flat[:max(0, total - len(kept))]
    if len(kept) < total:  # not enough flat ones to fill the last micro-batch: train on everything
        return list(range(len(advantages))), micro
    return sorted(kept), micro_kept


def loss_scale(loss_agg_mode: str, kept_tokens: int, all_tokens: int, kept_seqs: int, all_seqs: int) -> float:
    """The factor that turns the kept sequences' loss into the whole batch's (token-sum needs none)."""
    if loss_agg_mode == "token-mean":
        return kept_tokens / all_tokens if all_tokens else 1.0
    if loss_agg_mode in SEQ_MODES:
        return kept_seqs / all_seqs if all_seqs else 1.0
    return 1.0


def _dp_size(trainer: Any) -> int:
    try:
        mapping = trainer.actor_rollout_wg._dispatch_info["actor"]
        return max(mapping) + 1
    except (AttributeError, KeyError, TypeError, ValueError):
        return 1


def patch_trainer(module: Any) -> None:
    cls = module.PPOTrainer
    if getattr(cls._update_actor, "_agentrl_flat", False):
        return
    original = cls._update_actor

    @functools.wraps(original)
    def _update_actor(self, batch, metrics):
        if not applies(self.config) or len(batch) == 0:
            return original(self, batch, metrics)
        from verl.utils.transferqueue_utils import tq

        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                               select_fields=["advantages", "response_mask"])
        advantages = [row.tolist() for row in data["advantages"].unbind()]
        tokens = [int(row.sum()) for row in data["response_mask"].unbind()]
        actor = "actor_rollout_ref.actor."
        micro = (None if _get(self.config, actor + "use_dynamic_bsz", False)
                 else int(_get(self.config, actor + "ppo_micro_batch_size_per_gpu", 1) or 1))
        kept, micro_kept = choose(advantages, _dp_size(self), micro)
        metrics["agentrl/flat_skipped"] = len(batch) - len(kept)
        if len(kept) == len(batch):
            return original(self, batch, metrics)
        mode = _get(self.config, "actor_rollout_ref.actor.loss_agg_mode", "token-mean")
        scale = loss_scale(mode, sum(tokens[i] for i in kept), sum(tokens), len(kept), len(batch))
        metrics["agentrl/flat_loss_scale"] = scale  # the update reports the one it applied: actor/agentrl_loss_scale
        subset = batch.select_keys([batch.keys[i] for i in kept])
        group = self.actor_rollout_wg
        update = group.update_actor

        def update_kept(meta):  # verl has just written its extra_info for the whole batch's size
            meta.extra_info.update({"global_batch_size": len(subset), "mini_batch_size": len(subset),
                                    SCALE_KEY: scale})
            if micro_kept is not None:
                meta.extra_info["micro_batch_size_per_gpu"] = micro_kept
            return update(meta)

        group.update_actor = update_kept
        try:
            original(self, subset, metrics)
        finally:
            group.update_actor = update
        return batch

    _update_actor._agentrl_flat = True  # type: ignore[attr-defined]
    cls._update_actor = _update_actor


def patch_losses(module: Any) -> None:
    original = module.ppo_loss
    if getattr(original, "_agentrl_flat", False):
        return

    @functools.wraps(original)
    def ppo_loss(config, model_output, data, dp_group=None):
        loss, metrics = original(config, model_output, data, dp_group)
        from verl.utils import tensordict_utils as tu
        from verl.utils.metric import AggregationType, Metric

        scale = tu.get_non_tensor_data(data=data, key=SCALE_KEY, default=None)
        if scale is None:
            return loss, metrics
        metrics["actor/agentrl_loss_scale"] = Metric(value=float(scale), aggregation=AggregationType.MEAN)
        return loss * float(scale), metrics

    ppo_loss._agentrl_flat = True  # type: ignore[attr-defined]
    module.ppo_loss = ppo_loss


def install() -> None:
    patch_on_import(TRAINER, patch_trainer)
    patch_on_import(LOSSES, patch_losses)
