"""GRPO over rollouts of several sequences: group statistics from one row per rollout, the advantage shared.

An agent that rewrites its history (``agent.program``, :mod:`agentrl.verl.program_loop`) reaches verl as several
``AgentLoopOutput`` of one rollout; verl 0.9.1's V1 trainer keys them ``{uid}_{session}_{i}`` and, for its own
``grpo`` only, computes each group's statistics from each session's final output and gives the others the same
advantage (``verl.trainer.ppo.v1.utils.compute_advantage_for_multi_trajectories``). Other estimators see every
row, so a rollout of three sequences would count three times in its group. This does the same for
``agentrl_grpo``:

    rows = final_rows(["u1_s0_0", "u1_s0_1", "u1_s1_0"])      # ({"u1_s0": 1, "u1_s1": 2}, ["u1_s0", "u1_s0", "u1_s1"])

It is installed into ``verl.trainer.ppo.v1.trainer_base`` when that module is imported (the trainer's process).
"""

from __future__ import annotations

from typing import Any

from agentrl.verl.patching import patch_on_import

TARGET = "verl.trainer.ppo.v1.trainer_base"


def final_rows(keys: list[str]) -> tuple[dict[str, int], list[str]]:
    """Each session's final row (the highest output index) and each row's session."""
    best: dict[str, tuple[int, int]] = {}
    sessions = []
    for row, key in enumerate(keys):
        session, _, index = key.rpartition("_")
        sessions.append(session)
        if session not in best or best[session][0] < int(index):
            best[session] = (int(index), row)
    return {s: row for s, (_, row) in best.items()}, sessions


def wrap(original: Any) -> Any:
    if getattr(original, "_agentrl_sessions", False):
        return original

    def compute(data, batch_keys, adv_estimator, **kwargs):
        from agentrl.verl.grpo import NAME

        finals, sessions = final_rows(list(batch_keys))
        if adv_estimator != NAME or len(finals) == len(sessions):  # not ours, or one row per rollout
            return original(data, batch_keys=batch_keys, adv_estimator=adv_estimator, **kwargs)
        import torch
        from verl.trainer.ppo.ray_trainer import compute_advantage

        order = list(finals.values())
        final = compute_advantage(data.select_idxs(order), adv_estimator=adv_estimator, **kwargs)
        mask = final.batch["response_mask"]
        first = mask.argmax(dim=1)  # the advantage is constant over a row's trained tokens
        scalar = final.batch["advantages"][torch.arange(len(order)), first] * (mask.sum(dim=1) > 0)
        local = {s: n for n, s in enumerate(finals)}
        per_row = scalar[[local[s] for s in sessions]]
        data.batch["advantages"] = per_row.unsqueeze(-1) * data.batch["response_mask"]
        data.batch["returns"] = data.batch["advantages"]
        return data

    compute._agentrl_sessions = True  # type: ignore[attr-defined]
    return compute


def patch(module: Any) -> None:
    module.compute_advantage_for_multi_trajectories = wrap(module.compute_advantage_for_multi_trajectories)


def install() -> None:
    patch_on_import(TARGET, patch)
