"""A run killed for memory is said in words, with the setting to change, above the traceback's tail.

The fixture is the end of training.log of a real run that died this way here: SmolLM2-135M on BFCL with a
32-sequence micro-batch, whose update grew to 19.6 GB on a 24 GB machine (Ray's memory monitor killed it).
"""

from __future__ import annotations

from pathlib import Path

from agentrl.failures import diagnose
from agentrl.metrics import error_tail

REAL_LOG = Path(__file__).parent / "data" / "ray_oom_training_log.txt"


def test_a_real_ray_memory_kill_names_the_update_and_its_setting():
    said = diagnose(REAL_LOG.read_text())
    first = said.splitlines()[0]
    assert first.startswith("out of memory: Ray's memory monitor killed 2 worker(s) at 22.58 of 23.54 GB")
    assert "19.59 GB, was the policy update" in first
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" in said
    assert "resumes from the last complete checkpoint" in said


def test_error_tail_puts_the_account_above_the_traceback(tmp_path):
    log = tmp_path / "training.log"
    log.write_text("step 1 ...\n" + REAL_LOG.read_text())
    tail = error_tail(log)
    assert tail.startswith("out of memory:")
    assert "ray.exceptions.OutOfMemoryError" in tail  # the original error is still shown


def test_the_phase_follows_the_largest_process():
    text = REAL_LOG.read_text().replace("ray::WorkerDict.actor_rollout_update_actor",
                                        "ray::WorkerDict.actor_rollout_compute_log_prob")
    assert "was the log-probability pass" in diagnose(text)
    assert "log_prob_micro_batch_size_per_gpu" in diagnose(text)
    unknown = REAL_LOG.read_text().replace("ray::WorkerDict.actor_rollout_update_actor", "python my_tool_server.py")
    assert "was python" in diagnose(unknown)


def test_without_the_process_table_the_kill_is_still_said():
    text = REAL_LOG.read_text()
    said = diagnose(text[:text.index("Top 10 memory users")])
    assert said.splitlines()[0] == "out of memory: Ray's memory monitor killed 2 worker(s) at 22.58 of 23.54 GB"


def test_other_failures_are_left_to_the_traceback(tmp_path):
    assert diagnose("Traceback (most recent call last):\nValueError: bad row\n") is None
    log = tmp_path / "training.log"
    log.write_text("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad row\n")
    assert error_tail(log).endswith("ValueError: bad row")
