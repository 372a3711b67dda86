"""agentrl.verl.main runs verl's task runner in the driver process, as run_ppo drives it, on a real local Ray: the
runner gets the job's runtime environment variables and Ray's one compute thread, as the actor process had, and
its error reaches the driver as itself. (That `agentrl train` starts no task-runner process, and trains, is
tests/e2e/test_train.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

pytest.importorskip("ray")

SCRIPT = textwrap.dedent("""
    import json, os, sys
    import ray, torch
    from agentrl.verl.main import InProcess

    seen = {}

    @ray.remote
    class TaskRunner:  # what verl's TaskRunnerV1 is to run_ppo: a Ray actor class with run(config)
        def run(self, config):
            if config == "fail":
                raise KeyError("the trainer's own error")
            seen.update(pid=os.getpid(), env=os.environ.get("AGENTRL_TEST_JOB_VAR"),
                        omp=os.environ.get("OMP_NUM_THREADS"), threads=torch.get_num_threads())

    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", _temp_dir=sys.argv[1],
             runtime_env={"env_vars": {"AGENTRL_TEST_JOB_VAR": "from the job"}})
    try:
        cls = InProcess(TaskRunner)
        # run_ppo's two ways of starting its runner: .remote(), or .options(runtime_env=...).remote() (nsys)
        for runner in (cls.remote(), cls.options(runtime_env={"nsight": {}}).remote()):
            assert ray.get(runner.run.remote("config")) is None
        try:
            ray.get(cls.remote().run.remote("fail"))
            error = None
        except KeyError as exc:
            error = str(exc)
        print(json.dumps({**seen, "driver": os.getpid(), "error": error}))
    finally:
        ray.shutdown()
""")


def run_script(**env) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    environ.update(env, RAY_AUTH_MODE="disabled")
    with tempfile.TemporaryDirectory(prefix="ray") as temp:  # short: Ray's socket paths must fit in 107 bytes
        out = subprocess.run([sys.executable, "-c", SCRIPT, temp], capture_output=True, text=True, env=environ,
                             timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_runner_runs_here_with_the_jobs_environment_and_one_thread():
    got = run_script()
    assert got["pid"] == got["driver"]  # no process of its own
    assert got["env"] == "from the job"
    assert got["omp"] == "1" and got["threads"] == 1  # Ray's rule for an actor that asks no CPUs
    assert got["error"] == "\"the trainer's own error\""  # not wrapped, not lost

