"""`agentrl train` says what isolation untrusted code gets before anything starts, and refuses to start a
run whose rewards execute model-written code when the sandbox's isolation on this machine is too weak.

The weak machine is made real with `setpriv` (root without CAP_SYS_ADMIN, as in a default container).
The config points at a model folder that does not exist: reaching that error proves the sandbox check
passed, and nothing slow (Ray, verl) ever starts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROW = {"messages": [{"role": "user", "content": "Write f(x) returning 2*x."}],
       "metadata": {"tests": ["assert f(2) == 4"]}}
MODEL = "/nonexistent/model-folder"
needs_setpriv = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                   reason="needs root and setpriv (util-linux)")


def train(tmp_path: Path, rewards: list, weak: bool = False, opt_in: bool = False) -> subprocess.CompletedProcess:
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps(ROW) + "\n")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"agentrl": {"name": "preflight", "model": MODEL, "train_data": str(data),
                                                  "rewards": rewards, "run_dir": str(tmp_path / "run")}}))
    env = {k: v for k, v in os.environ.items() if k != "AGENTRL_SANDBOX_ALLOW_WEAK"}
    if opt_in:
        env["AGENTRL_SANDBOX_ALLOW_WEAK"] = "1"
    cmd = [sys.executable, "-m", "agentrl.cli", "train", str(config)]
    if weak:
        cmd = ["setpriv", "--bounding-set", "-sys_admin", "--"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)


def test_isolation_is_reported_and_saved_before_the_run(tmp_path):
    result = train(tmp_path, [{"name": "coding"}])
    assert result.returncode == 2 and MODEL in result.stderr, result.stderr  # got past the sandbox check
    assert "sandbox isolation: strong" in result.stderr
    saved = json.loads((tmp_path / "run" / "sandbox_isolation.json").read_text())
    assert saved["landlock_fs"]["ok"] and saved["pid_ns"]["ok"] and "probe:" in saved["uid_drop"]["reason"]


@needs_setpriv
def test_weak_isolation_stops_model_code_rewards_before_the_run(tmp_path):
    result = train(tmp_path, [{"name": "math"}, {"name": "coding", "weight": 0.5}], weak=True)
    assert result.returncode == 2, result.stderr
    assert "sandbox isolation: WEAK (missing: net_ns, mount_ns, pid_ns, noatime, pid_reset, dev_readonly)" in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert "config.yaml: agentrl.rewards coding run model-written code" in error, error
    assert "missing: net_ns, mount_ns, pid_ns, noatime, pid_reset, dev_readonly" in error and "AGENTRL_SANDBOX_ALLOW_WEAK=1" in error, error
    assert MODEL not in result.stderr and "Traceback" not in result.stderr


@needs_setpriv
def test_weak_isolation_with_opt_in_goes_on(tmp_path):
    result = train(tmp_path, [{"name": "coding"}], weak=True, opt_in=True)
    assert result.returncode == 2 and MODEL in result.stderr, result.stderr
    assert "sandbox isolation: WEAK" in result.stderr


@needs_setpriv
def test_rewards_without_untrusted_code_need_no_sandbox(tmp_path):
    result = train(tmp_path, [{"name": "math"}], weak=True)
    assert result.returncode == 2 and MODEL in result.stderr, result.stderr
    assert "sandbox isolation" not in result.stderr
    assert not (tmp_path / "run" / "sandbox_isolation.json").exists()
