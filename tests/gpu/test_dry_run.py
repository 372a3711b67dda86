"""``agentrl train CONFIG --dry-run`` as a user runs it, on a config written the way the README shows one
(relative paths, defaults left unset) with a tiny local model; and a GPU ``train`` that stops before Ray."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from agentrl.cli import main


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agentrl.demo.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("proj")
    tok = train_tokenizer(["What is 2 + 3? The answer is 5."] * 20)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256)
    Qwen2ForCausalLM(cfg).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    (root / "data").mkdir()
    rows = [{"messages": [{"role": "user", "content": f"What is {i} + 3?"}],
             "metadata": {"expected_answer": str(i + 3)}}
            for i in range(16)]
    (root / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "my.yaml").write_text(yaml.safe_dump({
        "agentrl": {"name": "gpu-plan", "model": "model", "train_data": "data/train.jsonl",
                    "rewards": [{"name": "math", "weight": 1.0}], "batch_size": 4, "samples_per_prompt": 4,
                    "lora": {"rank": 16}, "run_dir": str(root / "runs" / "gpu-plan")},
        "trainer": {"logger": ["console", "file"]}}))
    return root


def test_dry_run_prints_a_gpu_plan_verl_validated(project, capsys, monkeypatch):
    monkeypatch.chdir(project.parent)  # paths in the config are relative to the config file, not the cwd
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    rc = main(["train", str(project / "my.yaml"), "--dry-run", "agentrl.device=gpu", "agentrl.gpus_per_node=1"])
    captured = capsys.readouterr()
    out = captured.out
    assert rc == 0, captured.err
    cfg = yaml.safe_load(out)  # the comments are comments: the output is the config
    arr = cfg["actor_rollout_ref"]
    assert cfg["trainer"]["n_gpus_per_node"] == 1 and cfg["trainer"]["nnodes"] == 1
    assert arr["rollout"]["name"] == "vllm"
    assert arr["model"]["override_config"]["attn_implementation"] == "sdpa"
    assert arr["model"]["path"] == str(project / "model") and arr["model"]["lora_rank"] == 16
    assert cfg["data"]["train_files"].endswith("runs/gpu-plan/data/train.jsonl")
    assert "# verl: validate_config passed" in out
    assert "#   AGENTRL_DEVICE=gpu" in out
    assert "model weights on disk: " in out and " MiB;" in out
    assert "would stop here, before Ray" in out  # no vLLM on this machine, and the plan says so


def test_dry_run_of_the_cpu_path_is_the_cpu_plan(project, capsys):
    rc = main(["train", str(project / "my.yaml"), "agentrl.device=cpu", "agentrl.lora.rank=0", "--dry-run"])
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert rc == 0
    assert cfg["actor_rollout_ref"]["rollout"]["name"] == "agentrl_cpu"
    assert cfg["ray_kwargs"]["ray_init"]["num_cpus"] == 16


def test_gpu_train_without_vllm_stops_before_ray(project, capsys):
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    rc = main(["train", str(project / "my.yaml"), "agentrl.device=gpu", "agentrl.gpus_per_node=1"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "vLLM is not installed" in err and 'pip install -e ".[gpu]"' in err
    assert not (project / "runs" / "gpu-plan" / "training.log").exists()  # verl was never started


def test_multi_node_dry_run_attaches_to_ray_address(project, capsys, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    monkeypatch.setattr("agentrl.verl.dryrun.CLUSTER_TIMEOUT_S", 3.0)  # nothing answers there
    rc = main(["train", str(project / "my.yaml"), "--dry-run", "agentrl.device=gpu", "agentrl.nodes=2",
               "agentrl.gpus_per_node=8"])
    out = capsys.readouterr().out
    cfg = yaml.safe_load(out)
    assert rc == 0
    assert (cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"]) == (2, 8)
    assert cfg["actor_rollout_ref"]["rollout"]["agent"]["num_workers"] == 16
    assert cfg["ray_kwargs"]["ray_init"]["num_cpus"] is None  # ray.init() must not size a cluster it attaches to
    assert "attach to 10.1.2.3:6379" in out and "shared storage" in out
    assert "`agentrl train` would stop here, before verl: the Ray cluster at RAY_ADDRESS=10.1.2.3:6379 did not answer" in out
    env = cfg["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]  # what every worker on every node gets
    assert env["AGENTRL_DEVICE"] == "gpu"  # this run's own paths are printed apart (the test below)
    assert "#   +ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH=" in out
    assert os.environ["RAY_ADDRESS"] == "10.1.2.3:6379"


def test_dry_run_warns_when_prompt_and_response_outgrow_the_models_positions(project, capsys):
    """The project's model has 256 positions; the config leaves prompt and response at their defaults (512 each)."""
    assert main(["train", str(project / "my.yaml"), "agentrl.device=cpu", "agentrl.lora.rank=0", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "max_prompt_length + max_response_length = 512 + 512 = 1024 tokens, but the model has 256 positions" in err
    assert main(["train", str(project / "my.yaml"), "agentrl.device=cpu", "agentrl.lora.rank=0", "--dry-run",
                 "agentrl.max_prompt_length=192", "agentrl.max_response_length=64"]) == 0
    assert "positions" not in capsys.readouterr().err


def test_dry_run_prints_this_runs_part_apart_from_a_plain_verl_config(project, capsys, tmp_path):
    """The YAML is a verl config without this run's directory in Ray's worker variables (it would name a
    folder that need not exist where the config is reused); those overrides come apart, as comments."""
    from omegaconf import OmegaConf

    from agentrl.verl.dryrun import validate

    run_dir = str(project / "runs" / "gpu-plan")
    rc = main(["train", str(project / "my.yaml"), "agentrl.device=cpu", "agentrl.lora.rank=0", "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0
    env_vars = yaml.safe_load(out)["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]
    assert "AGENTRL_RUN_DIR" not in env_vars and "VERL_FILE_LOGGER_PATH" not in env_vars
    assert not [v for v in env_vars.values() if run_dir in str(v)], env_vars
    assert env_vars["AGENTRL_SANDBOX_WORKERS"] and env_vars["HF_HUB_OFFLINE"] == "1"  # the rest stays in it
    comments = [line for line in out.splitlines() if line.startswith("#")]
    head = next(i for i, line in enumerate(comments) if line.startswith("# this run only"))
    assert comments[head + 1:head + 3] == [
        f"#   +ray_kwargs.ray_init.runtime_env.env_vars.AGENTRL_RUN_DIR={run_dir}",
        f"#   +ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={run_dir}/logs/verl_metrics.1.jsonl"]
    # the plain part, taken as the start of a verl config elsewhere, still passes verl's own checks
    (tmp_path / "verl.yaml").write_text("\n".join(line for line in out.splitlines() if not line.startswith("#")))
    validate(OmegaConf.load(tmp_path / "verl.yaml"))
