"""Runs on a Ray cluster, checked without one: what every worker's environment gets, how the CPU path spreads
over nodes and ranks, and what a cluster must have to place a plan. tests/e2e/test_two_nodes.py runs one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentrl.config import AgentrlSettings
from agentrl.verl.args import RUNTIME_ENV, PlanError, build_overrides, launch
from agentrl.verl.cluster import COLOCATE_CPUS, Needs, Node, check_fits, needs


def settings(**kw):
    base = dict(model="m", train_data="t.jsonl", rewards=["math"], device="cpu", batch_size=4, samples_per_prompt=4)
    base.update(kw)
    return AgentrlSettings(**base)


def cpu_overrides(s, verl_part=None):
    return build_overrides(s, verl_part or {}, model_path="/m", train_file="/t", val_file=None, spec_path="/s",
                           run_dir=Path("/run"), cpu=True, train_rows=16)


def test_every_worker_gets_the_metrics_file_and_agentrls_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTRL_MATH_WORKERS", "3")
    monkeypatch.setenv("SOME_SECRET", "x")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    overrides, env = launch(tmp_path, 2, cpu_overrides(settings()))
    runtime = {k[len(RUNTIME_ENV):]: v for k, v in overrides.items() if k.startswith(RUNTIME_ENV)}
    assert runtime["VERL_FILE_LOGGER_PATH"] == str(tmp_path / "logs" / "verl_metrics.2.jsonl") == env["VERL_FILE_LOGGER_PATH"]
    assert runtime["AGENTRL_MATH_WORKERS"] == "3" and runtime["AGENTRL_SANDBOX_WORKERS"] == env["AGENTRL_SANDBOX_WORKERS"]
    assert runtime["HF_HUB_OFFLINE"] == "1" and "SOME_SECRET" not in runtime and "PATH" not in runtime


def test_the_worker_environment_composes_into_verls_ray_init(tmp_path, monkeypatch):
    from agentrl.verl.dryrun import compose

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    overrides, _ = launch(tmp_path, 1, cpu_overrides(settings(), {"+ray_kwargs": {"ray_init": {"runtime_env": {
        "env_vars": {"MY_VAR": "mine"}}}}}))
    env = compose(overrides).ray_kwargs.ray_init.runtime_env.env_vars
    assert env.VERL_FILE_LOGGER_PATH.endswith("verl_metrics.1.jsonl") and env.MY_VAR == "mine"
    assert all(isinstance(v, str) for v in env.values())  # Ray refuses anything else in env_vars


def test_cpu_nodes_and_gpus_per_node_become_ranks_with_their_share_of_the_batch(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    o = cpu_overrides(settings(nodes=2, batch_size=4, samples_per_prompt=4))
    assert (o["trainer.nnodes"], o["trainer.n_gpus_per_node"]) == (2, 1)
    for key in ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"):
        assert o[key] == 8, key  # 16 sequences a step over 2 ranks
    assert o["actor_rollout_ref.rollout.agent.num_workers"] == 2
    # a cluster started with `ray start` is sized by its nodes: ray.init() refuses num_cpus/num_gpus there
    assert not {"ray_kwargs.ray_init.num_cpus", "+ray_kwargs.ray_init.num_gpus",
                "+ray_kwargs.ray_init.include_dashboard"} & set(o)
    o = cpu_overrides(settings(nodes=2, gpus_per_node=2, batch_size=4, samples_per_prompt=4))
    assert o["trainer.n_gpus_per_node"] == 2 and o["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == 4


def test_a_local_cpu_cluster_is_sized_for_its_ranks(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    o = cpu_overrides(settings(gpus_per_node=2))
    assert o["+ray_kwargs.ray_init.num_gpus"] == 2 and o["ray_kwargs.ray_init.num_cpus"] >= 2 * COLOCATE_CPUS + 3
    assert o["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == 8


def test_more_than_one_node_without_a_cluster_is_an_error_that_says_how(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(PlanError, match=r"agentrl.nodes=2 needs a Ray cluster.*ray start --head.*RAY_ADDRESS"):
        cpu_overrides(settings(nodes=2))


def test_a_batch_that_does_not_split_over_the_ranks_names_the_batch_size_to_use(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    with pytest.raises(PlanError, match=r"6 sequences a step cannot be split evenly over 4 trainer ranks.*multiple of 2"):
        cpu_overrides(settings(nodes=2, gpus_per_node=2, batch_size=3, samples_per_prompt=2))


def test_the_two_node_cpu_plan_passes_verls_validation(monkeypatch):
    from agentrl.verl.dryrun import compose, validate

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    cfg = compose(cpu_overrides(settings(nodes=2)))
    validate(cfg)
    assert cfg.ray_kwargs.ray_init.num_cpus is None


def test_colocated_cpus_per_rank_are_verls():
    from verl.single_controller.ray.base import ResourcePoolManager

    assert ResourcePoolManager.__dataclass_fields__["max_colocate_count"].default == COLOCATE_CPUS


def node(name, cpus, gpus, free_cpus=None, free_gpus=None):
    return Node(name, cpus, gpus, cpus if free_cpus is None else free_cpus, gpus if free_gpus is None else free_gpus)


def test_needs_follow_the_plan(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    need = needs(cpu_overrides(settings(nodes=2)))
    assert need == Needs(nodes=2, gpus_per_node=1, cpus_per_node=COLOCATE_CPUS, other_cpus=3)


def test_a_cluster_that_cannot_place_the_plan_says_what_is_missing():
    need = Needs(nodes=2, gpus_per_node=1, cpus_per_node=3, other_cpus=3)
    assert check_fits(need, [node("a", 8, 1), node("b", 8, 1)]) == ([], [])
    problems, _ = check_fits(need, [node("a", 8, 1), node("b", 8, 0)])  # no logical GPU on one node
    assert problems and "2 node(s) with 1 GPU(s) and 3 CPUs each" in problems[0] and "1 of the cluster's 2" in problems[0]
    problems, _ = check_fits(need, [node("a", 8, 2)])  # one node with two GPUs is not two nodes
    assert "1 of the cluster's 1 node(s)" in problems[0]
    problems, _ = check_fits(need, [node("a", 4, 1), node("b", 4, 1)])
    assert problems == ["the plan needs 9 CPUs in all (2 × 3 for the trainer ranks, 3 for TransferQueue and verl's "
                        "other actors); the cluster has 8"]


def test_a_busy_cluster_that_could_place_the_plan_is_a_note_not_an_error():
    need = Needs(nodes=1, gpus_per_node=1, cpus_per_node=3, other_cpus=3)
    problems, notes = check_fits(need, [node("a", 8, 1, free_gpus=0)])
    assert problems == [] and "other jobs hold part of it now" in notes[0]


def test_sizing_a_cluster_the_run_attaches_to_is_an_error_before_ray(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    with pytest.raises(PlanError, match=r"ray_kwargs.ray_init.num_cpus cannot be set .* `ray start --num-cpus=N"):
        cpu_overrides(settings(), {"ray_kwargs": {"ray_init": {"num_cpus": 32}}})


def test_gloo_binds_the_interface_of_the_ray_nodes_address_unless_the_user_chose_one(monkeypatch):
    """gloo would advertise what the host name resolves to (127.0.0.1 on this machine): the wrapper picks the
    interface holding the Ray node's address before the process group is made, and leaves a user's
    GLOO_SOCKET_IFNAME alone. The cross-host run itself is tests/e2e/test_two_nodes.py."""
    from agentrl.verl import gloo

    assert gloo.interface_for("127.0.0.1") == "lo"
    assert gloo.interface_for("192.0.2.77") is None  # an address no interface here holds
    assert gloo.node_interface() is None  # not in a Ray worker: gloo's own choice stands
    seen = []
    wrapped = gloo._with_node_interface(lambda *a, **k: seen.append(os.environ.get("GLOO_SOCKET_IFNAME")))
    monkeypatch.setattr(gloo, "node_interface", lambda: "lo")
    # set through monkeypatch first, so that what the wrapper writes into os.environ is undone after the test
    # (left behind, it reached the Ray nodes the e2e tests start from this process)
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "")
    wrapped("gloo")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7")
    wrapped("gloo")
    assert seen == ["lo", "eth7"]


def test_cpu_micro_batches_fit_a_large_vocabulary_and_divide_the_ranks_sequences(tmp_path):
    import json

    from agentrl.verl.cpuplan import LOGIT_COPIES, LOGITS_BUDGET, Ranks, cpu_micro_batch

    def folder(vocab):
        path = tmp_path / f"v{vocab}"
        path.mkdir(exist_ok=True)
        (path / "config.json").write_text(json.dumps({"vocab_size": vocab}))
        return str(path)

    s = AgentrlSettings(model="m", train_data="t", rewards=["math"], batch_size=8, samples_per_prompt=4,
                        max_prompt_length=768, max_response_length=128)
    assert cpu_micro_batch(s, Ranks(1, 1), folder(512)) == 32  # a small vocabulary: one pass, the fastest on a CPU
    micro = cpu_micro_batch(s, Ranks(1, 1), folder(49152))  # SmolLM2's: the step's 32 would hold ~16.5 GB
    assert 32 % micro == 0 and micro * 896 * 49152 * 4 * LOGIT_COPIES <= LOGITS_BUDGET and micro >= 1
    assert cpu_micro_batch(s, Ranks(1, 2), folder(49152)) <= 16  # two ranks share the step's sequences
    assert cpu_micro_batch(s, Ranks(1, 1), str(tmp_path / "missing")) == 32  # no config.json: as before
