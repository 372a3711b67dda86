"""``python -m agentrl.verl.main KEY=VALUE ...``: verl's ``main_ppo``, with its task runner run in this process.

``agentrl train`` starts verl through this module (under ``agentrl.guard``). It is verl's own entry point
(``verl.trainer.main_ppo.main``: the same Hydra config, ``validate_config``, ``ray.init`` with verl's runtime
environment, the same ``TaskRunnerV1.run``) with one difference: verl starts the task runner as a Ray actor of
its own, a new process that imports verl, torch and transformers again (16-18 s of CPU on a 2-core Intel Xeon)
before it creates the trainer's actors, and then waits on them. That process is the first link of the chain
in which a run's actors start one after another, so a run's first step came that much later. Here the runner
is the same class, run in verl's driver process, which has imported all of it already: the actors it creates,
and what they do, are the same.

What the actor had that this process lacks, it is given: the environment variables of the job's Ray runtime
environment (``TOKENIZERS_PARALLELISM``, ``TRANSFER_QUEUE_ENABLE``, agentrl's own), which a Ray worker finds in
its ``os.environ``, and the one compute thread Ray gives an actor (``OMP_NUM_THREADS=1``, unless set).

A plain verl config (``python -m verl.trainer.main_ppo``) keeps verl's actor, and so does ``agentrl train`` with
``AGENTRL_TASK_RUNNER=actor`` in its environment: the way to profile the runner with verl's nsys options (GPU),
which need the actor.
"""

from __future__ import annotations

import os
from typing import Any


class _Call:
    def __init__(self, method: Any) -> None:
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        import ray

        # a Ray worker's environment is its raylet's (this process's, for the cluster ray.init started here, or
        # the cluster's) with the job's runtime environment variables on top
        env_vars = (ray.get_runtime_context().runtime_env or {}).get("env_vars") or {}
        os.environ.update({str(k): str(v) for k, v in env_vars.items()})
        if "OMP_NUM_THREADS" not in os.environ:  # Ray's rule for an actor that asks no CPUs: one thread
            import torch

            os.environ["OMP_NUM_THREADS"] = "1"
            torch.set_num_threads(1)
        self._method(*args, **kwargs)
        return ray.put(None)  # what run_ppo's ray.get waits on: done, since the run ended here


class _Runner:
    def __init__(self, instance: Any) -> None:
        self.run = _Call(instance.run)


class InProcess:
    """Stands where run_ppo expects a Ray actor class: ``.remote()`` makes the class's instance here."""

    def __init__(self, actor_class: Any) -> None:
        self.actor_class = actor_class

    def options(self, **_options: Any) -> InProcess:  # only verl's nsys profiling passes options (GPU)
        return self

    def remote(self) -> _Runner:
        return _Runner(self.actor_class.__ray_actor_class__())


def main() -> None:
    import verl.trainer.main_ppo as main_ppo

    main_ppo.TaskRunnerV1 = InProcess(main_ppo.TaskRunnerV1)
    main_ppo.main()


if __name__ == "__main__":
    main()
