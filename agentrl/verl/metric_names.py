"""verl's metric names that agentrl reads (what verl 0.9.1's trainer logs; its file logger writes them per step).

The watcher (``agentrl.metrics``) copies these into metrics.jsonl under agentrl's names, and the job page
(``agentrl.ui.rundir``) keeps the chart-worthy ones; a verl release that renames a metric is fixed here.
"""

from __future__ import annotations

# metrics.jsonl name <- verl metric name
VERL_KEYS = {
    "response_length": "response_length/mean",
    "ppo_kl": "actor/ppo_kl",  # the updated policy against the one that generated the rollouts, not the reference
    "kl_loss": "actor/kl_loss",
    "advantages_mean": "critic/advantages/mean",
    "advantages_max": "critic/advantages/max",
    "advantages_min": "critic/advantages/min",
    "loss": "actor/loss",
    "pg_loss": "actor/pg_loss",
    "entropy": "actor/entropy",
    "grad_norm": "actor/grad_norm",
    "learning_rate": "actor/lr",
    "step_time": "timing_s/step",
    "generation_time": "timing_s/gen",
    "update_time": "timing_s/update_actor",
    "verl_score_mean": "critic/score/mean",
    # the mean -log p, under the trainer's weights, of the tokens the rollout sampled (about the entropy at T=1)
    "rollout_log_ppl": "rollout_corr/training_log_ppl",
}

# read when the first name is missing: with bypass mode (agentrl's CPU rollout) verl measures entropy in the update
VERL_FALLBACKS = {"entropy": "actor/entropy_loss"}

SCORE_MEAN = "critic/score/mean"  # the mean reward verl trained on (NaN-free only when nothing was unscorable)
TRAINING_PREFIXES = ("actor/", "critic/")  # a line with these is a training step's
VALIDATION_PREFIX = "val"  # val-core/..., val-aux/...: a validation pass
CHART_PREFIXES = ("timing_s/", "val", "response_length/", "critic/score/")  # kept for the job page's charts
