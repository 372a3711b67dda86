"""agentrl_grpo over rollouts that reached verl as several sequences: each rollout counts once in its group."""

from __future__ import annotations

import numpy as np
import torch

from agentrl.verl import sessions


def test_final_rows_picks_each_sessions_highest_index():
    finals, rows = sessions.final_rows(["u1_s0_0", "u1_s0_1", "u1_s1_0", "u2_s0_2", "u2_s0_0"])
    assert finals == {"u1_s0": 1, "u1_s1": 2, "u2_s0": 3}
    assert rows == ["u1_s0", "u1_s0", "u1_s1", "u2_s0", "u2_s0"]


def _data(scores, uids):
    from verl import DataProto

    n, length = len(scores), 4
    mask = torch.ones(n, length, dtype=torch.int64)
    rewards = torch.zeros(n, length)
    rewards[:, -1] = torch.tensor(scores)
    return DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": mask},
                               non_tensors={"uid": np.array(uids, dtype=object)})


def test_a_rollout_of_three_sequences_counts_once_and_all_three_share_its_advantage():
    from verl.trainer.ppo.ray_trainer import compute_advantage

    import agentrl.verl.grpo  # noqa: F401  (registers agentrl_grpo)

    def original(data, batch_keys, adv_estimator, **kw):
        return compute_advantage(data, adv_estimator=adv_estimator, **kw)

    compute = sessions.wrap(original)
    # one group (uid g): rollout s0 scored 1 in three sequences, s1 and s2 scored 0 in one each
    keys = ["g_s0_0", "g_s0_1", "g_s0_2", "g_s1_0", "g_s2_0"]
    out = compute(_data([1.0, 1.0, 1.0, 0.0, 0.0], ["g"] * 5), batch_keys=keys, adv_estimator="agentrl_grpo",
                  norm_adv_by_std_in_grpo=True, num_repeat=3)
    adv = out.batch["advantages"][:, 0]
    alone = compute(_data([1.0, 0.0, 0.0], ["g"] * 3), batch_keys=["g_s0_0", "g_s1_0", "g_s2_0"],
                    adv_estimator="agentrl_grpo", norm_adv_by_std_in_grpo=True, num_repeat=3).batch["advantages"][:, 0]
    # the same advantages as if each rollout were one row: mean 1/3, not 3/5
    assert torch.allclose(adv, torch.stack([alone[0], alone[0], alone[0], alone[1], alone[2]]))
    assert adv[0] > 0 > adv[3]
    # one row per rollout: verl's own path, untouched
    assert sessions.wrap(original) is not original and sessions.wrap(compute) is compute


def test_installed_in_verls_v1_trainer_when_verl_loads_its_plugins():
    import subprocess
    import sys

    code = ("import verl; from verl.trainer.ppo.v1 import trainer_base; "
            "print(getattr(trainer_base.compute_advantage_for_multi_trajectories, '_agentrl_sessions', False))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "True", out.stderr[-2000:]
