"""`agentrl train` refuses bad input before anything expensive starts: no Ray, no verl, no training.

    pytest tests/core/test_train_refuses.py -q

Each case is a real `agentrl train` process on a config the README's way (the demo build, tests/conftest.py, as the
model), with one thing wrong; it must exit 2 with a message naming that thing and no traceback. These ran in
tests/e2e, the suite's long pole, though none of them trains: here they run beside it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from train_config import write_config  # tests/train_config.py

AGENTRL = [sys.executable, "-m", "agentrl.cli"]


@pytest.mark.parametrize("change, needle", [
    ({"rewards": [{"name": "maths"}]}, "unknown reward 'maths'"),
    ({"tools": ["calculater"]}, "calculater"),
    ({"train_data": "/nonexistent/train.jsonl"}, "/nonexistent/train.jsonl"),
    ({"run_dir": "/proc/version/run"}, "not writable"),
    ({"rewards": [{"name": "./missing_reward.py"}]}, "missing_reward.py"),
    ({"rewards": [{"name": "./rejected_reward.py"}]}, "rejected_reward.py, line 2"),  # the sandbox's policy
    ({"group_size": 4}, "'agentrl.samples_per_prompt'"),
])
def test_bad_input_fails_before_training(tmp_path, demo, change, needle):
    (tmp_path / "rejected_reward.py").write_text("def grade(sample, item):\n    _x = 1\n    return 1.0\n")
    config = write_config(tmp_path, demo, **change)
    result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stdout + result.stderr
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_row_is_reported_with_file_and_line(tmp_path, demo):
    data = tmp_path / "train.jsonl"
    good = Path(demo["train_path"]).read_text().splitlines()[:5]
    data.write_text("\n".join(good + ['{"metadata": {"expected_answer": "3"}}']) + "\n")
    config = write_config(tmp_path, demo, train_data=str(data))
    result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert f"{data}:6" in result.stderr and 'no "messages" key' in result.stderr


def test_one_trainer_per_run_directory(tmp_path, demo):
    """A second `agentrl train` on a run directory in use fails before touching it."""
    import fcntl

    config = write_config(tmp_path, demo)
    run = tmp_path / "run"
    run.mkdir()
    with open(run / ".agentrl.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "already running" in result.stderr
    assert not (run / "config.yaml").exists()
