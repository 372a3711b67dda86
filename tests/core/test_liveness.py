"""agentrl.verl.liveness on a real local Ray: a watched actor killed with SIGKILL (as Ray's memory monitor kills)
is reported by name with Ray's cause, a busy live one is not, and verl's replay buffer poll raises instead of
polling for ever."""

from __future__ import annotations

import asyncio
import builtins
import os
import signal
import time
import traceback
import types

import pytest

ray = pytest.importorskip("ray")

from agentrl.metrics import error_tail  # noqa: E402
from agentrl.verl import liveness  # noqa: E402


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    # Ray's driver replaces builtins.print with its tqdm-safe print and leaves it so after shutdown: later tests in
    # this process (a pickle payload naming builtins.print) would see Ray's function instead
    patch = os.environ.get("RAY_TQDM_PATCH_PRINT")
    os.environ["RAY_AUTH_MODE"], os.environ["RAY_TQDM_PATCH_PRINT"] = "disabled", "0"
    own_print = builtins.print
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             _temp_dir=str(tmp_path_factory.mktemp("ray")))
    yield
    ray.shutdown()
    builtins.print = own_print
    if patch is None:
        del os.environ["RAY_TQDM_PATCH_PRINT"]
    else:
        os.environ["RAY_TQDM_PATCH_PRINT"] = patch


@pytest.fixture(autouse=True)
def clean_watch():
    liveness.forget()
    yield
    liveness.forget()


@ray.remote
class Server:
    def pid(self) -> int:
        return os.getpid()

    def busy(self, seconds: float) -> None:
        time.sleep(seconds)


def _kill(actor) -> None:
    pid = ray.get(actor.pid.remote())
    os.kill(pid, signal.SIGKILL)
    while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z":
        time.sleep(0.01)


def _raises_within(seconds: float) -> liveness.RolloutActorDiedError:
    deadline = time.monotonic() + seconds  # Ray learns of the death from the raylet, a moment after the kill
    while time.monotonic() < deadline:
        try:
            liveness.check()
        except liveness.RolloutActorDiedError as exc:
            return exc
        time.sleep(0.1)
    raise AssertionError("no RolloutActorDiedError for a dead actor")


def test_a_killed_actor_is_named_with_its_cause(local_ray, tmp_path):
    alive, doomed = Server.remote(), Server.remote()
    liveness.watch("rollout server 0 of replica 0", alive)
    liveness.watch("agent loop worker 1", doomed)
    liveness.check()  # both alive: nothing raised
    _kill(doomed)
    error = _raises_within(60)
    message = str(error)
    assert "agent loop worker 1" in message and "rollout server" not in message
    assert "died" in message and "resumes from its last checkpoint" in message
    assert isinstance(error.__cause__, ray.exceptions.RayActorError)
    # what `agentrl train` prints when verl exits: the last error of training.log is this one, not Ray's cause
    log = tmp_path / "training.log"
    log.write_text("".join(traceback.format_exception(error)) + "\nSet the environment variable HYDRA_FULL_ERROR=1\n")
    errors = [line for line in error_tail(log).splitlines() if "Error" in line]
    assert errors[-1].startswith("agentrl.verl.liveness.RolloutActorDiedError: agentrl: a rollout actor died: "
                                 "agent loop worker 1"), errors


def test_a_busy_live_actor_is_not_taken_for_dead(local_ray):
    server = Server.options(max_concurrency=1).remote()
    ray.get(server.pid.remote())
    busy = server.busy.remote(5)  # its one thread is taken: __ray_ready__ waits behind it
    liveness.watch("rollout server 0 of replica 0", server)
    started = time.monotonic()
    liveness.check(timeout=0.5)
    assert time.monotonic() - started < 4
    ray.get(busy)


def test_verls_replay_buffer_poll_raises_instead_of_waiting_for_ever(local_ray, monkeypatch):
    from verl.trainer.ppo.v1 import replay_buffer

    liveness.patch_replay_buffer(replay_buffer)  # what the plugin does on import; once
    assert replay_buffer.ReplayBuffer._wait_for_next_poll._agentrl_liveness
    buffer = object.__new__(replay_buffer.ReplayBufferAsync)  # the off-policy one inherits the poll
    buffer.poll_interval = 0.0
    buffer.pending_keys = buffer.running_keys = buffer.finished_keys = buffer.failure_keys = {"train": set()}
    monkeypatch.setattr(liveness, "CHECK_EVERY", 0.0)
    worker = Server.remote()
    liveness.watch("agent loop worker 0", worker)
    buffer._wait_for_next_poll("train", time.time())  # alive: the poll goes on
    _kill(worker)
    deadline = time.monotonic() + 60
    with pytest.raises(liveness.RolloutActorDiedError, match="agent loop worker 0"):
        while time.monotonic() < deadline:
            buffer._wait_for_next_poll("train", time.time())
            time.sleep(0.1)


def test_the_workers_and_servers_verl_creates_are_watched():
    class Manager:  # verl's AgentLoopManager: _init_agent_loop_workers fills agent_loop_workers
        reward_loop_worker_handles = ["reward-0"]

        async def _init_agent_loop_workers(self):
            self.agent_loop_workers = ["worker-0", "worker-1"]

    class Replica:  # verl's RolloutReplica: each init_* ends by launching its servers
        replica_rank = 3

        async def init_standalone(self):
            self.servers = ["server-0"]

    liveness.patch_agent_loop(types.SimpleNamespace(AgentLoopManager=Manager))
    liveness.patch_replica(types.SimpleNamespace(RolloutReplica=Replica))
    asyncio.run(Manager()._init_agent_loop_workers())
    asyncio.run(Replica().init_standalone())
    assert [(what, h) for what, h in liveness._watched] == [
        ("agent loop worker 0", "worker-0"), ("agent loop worker 1", "worker-1"),
        ("reward loop worker 0", "reward-0"), ("rollout server 0 of replica 3", "server-0")]


def test_the_plugin_installs_the_watch_in_verls_processes():
    import subprocess
    import sys

    code = ("import verl.trainer.ppo.v1.replay_buffer as rb, verl.experimental.agent_loop.agent_loop as al, "
            "verl.workers.utils as _, verl.workers.rollout.replica as rp\n"
            "print(rb.ReplayBuffer._wait_for_next_poll._agentrl_liveness, "
            "al.AgentLoopManager._init_agent_loop_workers._agentrl_liveness, "
            "rp.RolloutReplica.init_standalone._agentrl_liveness)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["True", "True", "True"], out.stderr[-2000:]
