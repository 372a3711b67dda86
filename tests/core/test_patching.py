"""agentrl.verl.patching: one patch-on-import finder for every verl module agentrl adjusts."""

from __future__ import annotations

import subprocess
import sys

from agentrl.verl.patching import _PatchOnImport, patch_on_import


def test_a_module_is_patched_right_after_its_import_and_once(tmp_path, monkeypatch):
    (tmp_path / "agentrl_patch_target.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    seen = []

    def patch(module):
        seen.append(module.VALUE)
        module.VALUE = 2

    patch_on_import("agentrl_patch_target", patch)
    patch_on_import("agentrl_patch_target", patch)  # a second install adds no second finder
    assert sum(isinstance(f, _PatchOnImport) and f.target == "agentrl_patch_target" for f in sys.meta_path) == 1
    try:
        import agentrl_patch_target

        assert agentrl_patch_target.VALUE == 2 and seen == [1]  # patched after the body ran, before any use
        patch_on_import("agentrl_patch_target", patch)  # already imported: patched at once
        assert seen == [1, 2]
    finally:
        sys.modules.pop("agentrl_patch_target", None)


def test_two_patches_of_one_module_both_run_in_the_order_asked(tmp_path, monkeypatch):
    (tmp_path / "agentrl_patch_target2.py").write_text("VALUE = []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    patch_on_import("agentrl_patch_target2", lambda m: m.VALUE.append("first"))

    def second(module):
        module.VALUE.append("second")

    patch_on_import("agentrl_patch_target2", second)
    patch_on_import("agentrl_patch_target2", second)
    try:
        import agentrl_patch_target2

        assert agentrl_patch_target2.VALUE == ["first", "second"]
    finally:
        sys.modules.pop("agentrl_patch_target2", None)


def test_every_one_of_agentrls_patches_reaches_verl_in_a_fresh_process():
    # sessions and flatgroups both patch trainer_base: the second must not be dropped for the first
    code = ("import verl; from verl.trainer.ppo.v1 import replay_buffer, trainer_base; "
            "from verl.workers.utils import losses; "
            "print(getattr(trainer_base.compute_advantage_for_multi_trajectories, '_agentrl_sessions', False), "
            "getattr(replay_buffer.ReplayBuffer.__init__, '_agentrl_paced', False), "
            "getattr(trainer_base.PPOTrainer._update_actor, '_agentrl_flat', False), "
            "getattr(losses.ppo_loss, '_agentrl_flat', False))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "True True True True", out.stderr[-2000:]
