"""agentrl.verl.flatgroups: the update without zero-advantage sequences gives the gradient of the whole batch.

The gradient check goes through verl's own policy loss (``compute_policy_loss_vanilla`` and its aggregation), with
old log-probs apart from the new ones so that ratios and clipping are in play; the plumbing (the scale reaching the
worker's loss) is checked by a real run in tests/e2e (test_train_flat_groups).
"""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from agentrl.verl.flatgroups import applies, choose, loss_scale

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")


def _batch(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    rows, width = 12, 7
    lengths = torch.randint(2, width + 1, (rows,), generator=gen)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
    scores = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]  # groups of 4: spread, flat, flat
    advantages = torch.zeros(rows, width)
    for g in range(3):
        group = torch.tensor(scores[4 * g: 4 * g + 4])
        if group.std() > 0:
            advantages[4 * g: 4 * g + 4] = ((group - group.mean()) / (group.std() + 1e-6))[:, None]
    advantages *= mask
    theta = torch.randn(rows, width, generator=gen, requires_grad=True)
    old = (theta.detach() + 0.3 * torch.randn(rows, width, generator=gen))  # ratios away from 1, some clipped
    return theta, old, advantages, mask


def _grad(theta, old, advantages, mask, rows, mode, scale=1.0):
    config = OmegaConf.create({"clip_ratio": 0.2, "clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0,
                               "global_batch_info": {}})
    theta.grad = None
    log_prob = torch.log_softmax(theta, dim=-1)[rows]
    old_log_prob = torch.log_softmax(old, dim=-1)[rows]
    loss, _ = core_algos.compute_policy_loss_vanilla(old_log_prob, log_prob, advantages[rows], mask[rows],
                                                     loss_agg_mode=mode, config=config)
    (loss * scale).backward()
    return theta.grad.clone()


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "token-sum"])
def test_the_kept_sequences_with_the_scale_give_the_whole_batchs_gradient(mode):
    theta, old, advantages, mask = _batch()
    everything = list(range(len(mask)))
    full = _grad(theta, old, advantages, mask, everything, mode)
    kept, _ = choose([row.tolist() for row in advantages])
    assert kept == [0, 1, 2, 3]  # the one group with spread
    tokens = mask.sum(dim=1)
    scale = loss_scale(mode, int(tokens[kept].sum()), int(tokens.sum()), len(kept), len(everything))
    assert scale != 1.0 or mode == "token-sum"
    part = _grad(theta, old, advantages, mask, kept, mode, scale)
    assert full.abs().sum() > 0
    torch.testing.assert_close(part, full, rtol=1e-5, atol=1e-7)
    unscaled = _grad(theta, old, advantages, mask, kept, mode)
    if mode != "token-sum":  # without the scale the step would be larger than the batch's
        assert not torch.allclose(unscaled, full)


def test_the_kept_count_fits_verls_split():
    flat, spread = [0.0, 0.0], [0.5, -0.2]
    assert choose([flat] * 8, micro=4) == ([0], 1)  # every group flat: one sequence, its zero gradient, one step
    assert choose([spread] * 5 + [flat] * 3, micro=4) == (list(range(8)), 4)
    assert choose([spread] * 6 + [flat] * 1, micro=4) == (list(range(7)), 4)  # cannot fill: train on all
    kept, micro = choose([spread] * 3 + [flat] * 5, dp_size=2, micro=4)
    assert len(kept) == 4 and micro == 2  # two ranks, two each
    assert choose([spread] * 3 + [flat] * 5, dp_size=2) == ([0, 1, 2, 3], None)  # micro-batches by tokens


def _config(**over):
    base = {"agentrl": {"skip_flat_groups": True}, "data": {"train_batch_size": 8},
            "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": 8, "ppo_epochs": 1, "use_kl_loss": False,
                                            "entropy_coeff": 0.0, "loss_agg_mode": "token-mean",
                                            "policy_loss": {"loss_mode": "vanilla"}}}}
    config = OmegaConf.create(base)
    for key, value in over.items():
        OmegaConf.update(config, key, value, force_add=True)
    return config


def test_it_applies_only_where_the_update_is_provably_the_same():
    assert applies(_config())
    assert applies(OmegaConf.create({"data": {"train_batch_size": 8},  # a plain verl config: on by default
                                     "actor_rollout_ref": {"actor": {"ppo_mini_batch_size": 8}}}))
    for key, value in [("agentrl.skip_flat_groups", False),
                       ("actor_rollout_ref.actor.use_kl_loss", True),  # the KL term has a gradient at A = 0
                       ("actor_rollout_ref.actor.entropy_coeff", 0.01),  # so has the entropy bonus
                       ("actor_rollout_ref.actor.ppo_epochs", 2),
                       ("actor_rollout_ref.actor.ppo_mini_batch_size", 4),  # two optimizer steps a step
                       ("actor_rollout_ref.actor.policy_loss.loss_mode", "gspo"),
                       ("actor_rollout_ref.actor.loss_agg_mode", "some-new-mode")]:
        assert not applies(_config(**{key: value})), key
