"""End to end: `agentrl train` runs verl's real GRPO trainer on the CPU with the real calculator MCP server.

A small demo build (short warm-up) stands in for a real model; everything else is the real thing:
verl's main_ppo, Ray, the agentrl_cpu rollout, the agent loop, MCP over stdio, the reward presets and a
sandboxed reward file. One run, shared by most tests here, is written the way the README shows a config
(relative paths, kl_coef, LoRA, save_every left unset, validation data) and lives through three attempts:
interrupted with SIGINT after its first checkpoint, resumed and killed with `kill -9` after its next one,
then resumed to the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from runs import AGENTRL, after_kill, alive, at_checkpoint, commands, read_jsonl, tracker_step, tree_of  # tests/e2e/runs.py
from train_config import write_config  # tests/train_config.py

STEPS_RESUMED = 6  # steps are short here: room for two stops before the end
MY_REWARD = """
def grade(sample, item):
    expected = item["metadata"].get("expected_answer")
    if expected is None:
        return None
    return 1.0 if expected in (sample["final_answer"] or "") else 0.0
"""


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory, demo):
    """The README's kind of config, trained through SIGINT, kill -9 and two resumes. Returns what each
    attempt printed and what the kill left behind."""
    root = tmp_path_factory.mktemp("readme")
    cfg = root / "project"
    cfg.mkdir()
    rows = Path(demo["train_path"]).read_text().splitlines()
    (cfg / "train.jsonl").write_text("\n".join(rows[:2]) + "\n")  # one step an epoch: a checkpoint each step
    (cfg / "val.jsonl").write_text("\n".join(rows[2:4]) + "\n")
    (cfg / "my_reward.py").write_text(MY_REWARD)
    run = root / "run"
    block = {
        "name": "readme", "model": demo["model_path"], "train_data": "train.jsonl", "val_data": "val.jsonl",
        "tools": ["calculator"],
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0},
                    {"name": "./my_reward.py", "weight": 0.5}],
        "batch_size": 2, "samples_per_prompt": 4, "max_steps": STEPS_RESUMED, "kl_coef": 0.001,
        "lora": {"rank": 4, "alpha": 8}, "max_prompt_length": 320, "max_response_length": 64,
        "learning_rate": 5e-4, "run_dir": str(run), "agent": {"max_turns": 2, "max_tool_calls": 2},
        # every sequence updated: with flat groups left out, a step of this model can take about a second, and the
        # first attempt could finish all its steps between checkpoint 1 and the SIGINT (seen once in a CI run)
        "skip_flat_groups": False,
    }
    config = cfg / "config.yaml"
    config.write_text(yaml.safe_dump({"agentrl": block}))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    elsewhere = root  # not the config's folder: relative paths must still resolve against it
    seen = ZygoteWatch()  # this run's own sandbox workers: other jobs on the machine have theirs
    result: dict = {"run": run}

    # a shell's background job ignores SIGINT and passes that on: give agentrl the terminal's default back
    first = subprocess.Popen(AGENTRL + ["train", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env, cwd=elsewhere,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    def ctrl_c() -> list:  # on the watcher's thread, the moment checkpoint 1 is complete
        tree = tree_of(first.pid)
        first.send_signal(signal.SIGINT)  # what Ctrl-C does
        result["running_at_ctrl_c"] = commands(tree)  # read after the signal, not to delay it: nothing ends that fast
        return tree

    tree = at_checkpoint(run, 1, ctrl_c, first)
    result["out1"], _ = first.communicate(timeout=240)
    result["rc1"] = first.returncode
    result["alive_after_sigint"] = commands(tree)
    result["step_after_sigint"] = tracker_step(run)

    step_before_kill = tracker_step(run)
    second = subprocess.Popen(AGENTRL + ["train", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env, cwd=elsewhere)
    def kill() -> tuple[bool, list]:  # the moment the attempt's first checkpoint is complete
        running, tree = second.poll() is None, tree_of(second.pid)
        second.kill()  # kill -9: agentrl gets no chance to clean up
        return running, tree

    result["running_at_kill"], tree = at_checkpoint(run, step_before_kill + 1, kill, second)
    killed = after_kill(second, tree, run)
    result["tree_size"], result["seconds_to_clean"] = killed["tree_size"], killed["seconds"]
    result["lock_free_while_alive"], result["alive_after_kill"] = killed["lock_free_while"], killed["left"]
    result["step_at_kill"] = tracker_step(run)  # what verl really reached; the watcher died with agentrl
    (root / "kill9.json").write_text(json.dumps({k: result[k] for k in ("tree_size", "seconds_to_clean",
                                                                        "step_at_kill")}))

    third = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, env=env,
                           cwd=elsewhere, timeout=1200)
    result["out3"], result["rc3"] = third.stdout + third.stderr, third.returncode
    seen.stop()
    assert seen.found, "no sandbox worker of this run was ever seen: the check below would prove nothing"
    deadline = time.monotonic() + 30
    while alive(seen.found) and time.monotonic() < deadline:
        time.sleep(1)
    result["zygotes_left"] = {p.pid for p in alive(seen.found)}
    return result


def test_sigint_stops_everything_and_exits_130(resumed_run):
    assert resumed_run["rc1"] == 130, resumed_run["out1"]
    assert resumed_run["step_after_sigint"] < STEPS_RESUMED, "verl trained on to the end after Ctrl-C"
    assert "interrupted" in resumed_run["out1"]
    assert resumed_run["alive_after_sigint"] == []


def test_the_run_starts_no_idle_verl_process(resumed_run):
    """Requests are routed by agentrl's router, whose process imports neither verl nor torch, not by verl's own
    balancer; no reward-loop worker idles (agentrl's agent loop scores every rollout itself); and verl's task
    runner runs in verl's driver process (agentrl.verl.main), not in an actor process of its own."""
    titles = [" ".join(cmd) for cmd in resumed_run["running_at_ctrl_c"]]
    assert any("ray::WorkerDict" in t for t in titles), titles  # the actors of the run were there to be seen
    assert any("-m agentrl.verl.main " in t for t in titles), titles
    assert not any("TaskRunner" in t for t in titles), titles
    assert any("ray::Router" in t for t in titles), titles
    assert not any("GlobalRequestLoadBalancer" in t or "RewardLoopWorker" in t for t in titles), titles


def test_kill_9_leaves_nothing_running_within_10_s(resumed_run):
    assert resumed_run["running_at_kill"], "the attempt finished before it could be killed"
    assert resumed_run["tree_size"] >= 4  # guard, verl, Ray's daemons and workers
    assert resumed_run["alive_after_kill"] == []
    assert resumed_run["seconds_to_clean"] < 10, resumed_run["seconds_to_clean"]
    assert not resumed_run["lock_free_while_alive"], ("a new run could have started beside these",
                                                      resumed_run["lock_free_while_alive"])


def test_resume_reports_the_step_verl_really_reached_and_finishes(resumed_run):
    out = resumed_run["out3"]
    assert resumed_run["rc3"] == 0, out
    assert f"from checkpoint step {resumed_run['step_at_kill']} of {STEPS_RESUMED}" in out
    assert f"step {STEPS_RESUMED}/{STEPS_RESUMED}" in out and "eta" in out and "reward" in out
    assert f"done, step {STEPS_RESUMED} of {STEPS_RESUMED}" in out


def test_readme_config_with_kl_and_lora_leaves_a_checkpoint(resumed_run):
    run = resumed_run["run"]
    for name in ("config.yaml", "training.log", "metrics.jsonl", "rollouts.jsonl", "agentrl_spec.json"):
        assert (run / name).exists(), name
    status = json.loads((run / "checkpoint_status.json").read_text())
    assert status["complete"] and status["step"] == STEPS_RESUMED  # save_every unset: every epoch and the end
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, loading = AutoModelForCausalLM.from_pretrained(status["hf_model"], output_loading_info=True)
    assert not any(loading.values()), loading  # LoRA folded in: plain names, nothing missing or unexpected
    AutoTokenizer.from_pretrained(status["hf_model"])
    from safetensors import safe_open

    for weights in sorted(run.glob("checkpoints/global_step_*/actor/huggingface/model.safetensors")):
        with safe_open(str(weights), "pt") as fh:  # every checkpoint, also those of the killed attempts
            assert not any("lora_" in k or "base_layer" in k for k in fh.keys()), weights
    metrics = [m for m in read_jsonl(run / "metrics.jsonl") if not m["validation"]]
    logged = [m for m in metrics if not m.get("recovered")]
    assert logged and all(m["kl_loss"] is not None for m in logged)  # the reference model ran: kl_coef > 0 on CPU


def test_metrics_show_each_step_once_and_validation_apart(resumed_run):
    run = resumed_run["run"]
    metrics = read_jsonl(run / "metrics.jsonl")
    train = [m for m in metrics if m["validation"] is False]
    val = [m for m in metrics if m["validation"] is True]
    assert [m["step"] for m in train] == list(range(1, STEPS_RESUMED + 1))
    # a step checkpointed just before an attempt stopped may have lost verl's own metrics, not its line
    for key in ("reward_mean", "reward_std", "reward/math", "reward/my_reward", "response_length", "ppo_kl",
                "advantages_mean", "loss", "entropy", "grad_norm", "learning_rate", "tool_calls_per_rollout",
                "step_time", "unscorable"):
        assert key in train[-1], key
    assert all(m["rollouts"] == 2 * 4 for m in train)  # this step's training rollouts only
    val_steps = [m["step"] for m in val]
    assert len(val_steps) == len(set(val_steps)) and 0 in val_steps and STEPS_RESUMED in val_steps
    for m in val:
        assert m["val/rollouts"] == 2 and "val/reward_mean" in m and "val/reward/math" in m
        assert "reward_mean" not in m


def test_rollouts_carry_their_step_and_split_and_none_is_repeated(resumed_run):
    run = resumed_run["run"]
    rollouts = read_jsonl(run / "rollouts.jsonl")
    ids = [r["rollout_id"] for r in rollouts]
    assert len(ids) == len(set(ids))
    train = [r for r in rollouts if not r["validation"]]
    assert sorted({r["step"] for r in train}) == list(range(1, STEPS_RESUMED + 1))
    for step in range(1, STEPS_RESUMED + 1):
        assert sum(r["step"] == step for r in train) == 2 * 4, step
    assert {r["source"].rsplit(":", 1)[0].rsplit("/", 1)[-1] for r in rollouts if r["validation"]} == {"val.jsonl"}
    r = rollouts[-1]
    for key in ("prompt_id", "step", "messages", "trajectories", "reward", "components", "tool_calls"):
        assert key in r
    # the relative reward file ran in the sandbox inside verl's worker and scored every rollout
    assert all(r["unscorable"] is None for r in rollouts), [r["unscorable"] for r in rollouts][:3]
    assert all(r["components"]["my_reward"] in (0.0, 1.0) for r in rollouts)
    assert set(rollouts[0]["components"]) == {"math", "tool_use", "my_reward"}
    called = [s for x in rollouts for s in x["trajectories"] if s["tool_calls"]]
    for step in called:  # every tool call the model made got a result from the real calculator server
        assert len(step["tool_results"]) >= len(step["tool_calls"])
    assert resumed_run["zygotes_left"] == set(), "sandbox workers outlived the training run"


def test_dead_tool_server_makes_rollouts_unscorable_not_zero(tmp_path, demo):
    """Every rollout's tool server is dead: the step must still train (no NaN), count every rollout as
    unscorable with the cause, and never record a 0 reward for them."""
    dead = {"dead": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"], "retries": 1}}
    config = write_config(tmp_path, demo, tools=dead, max_steps=1, save_every=0)
    checked = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=300)
    assert checked.returncode == 2 and "--skip-tool-check" in checked.stderr  # found before Ray starts
    result = subprocess.run(AGENTRL + ["train", str(config), "--skip-tool-check"], capture_output=True, text=True,
                            timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    run = tmp_path / "run"
    rollouts = read_jsonl(run / "rollouts.jsonl")
    assert rollouts and all(r["unscorable"] and "dead" in r["unscorable"] for r in rollouts)
    assert all(r["reward"] is None for r in rollouts)
    metrics = read_jsonl(run / "metrics.jsonl")[-1]
    assert metrics["unscorable"] == metrics["rollouts"] == len(rollouts)
    assert metrics["reward_mean"] is None
    for key in ("loss", "grad_norm", "entropy"):  # a finite update: the unscorable rollouts got advantage 0
        assert metrics[key] is not None and metrics[key] == metrics[key], key
    assert "unscorable" in result.stdout


FAMILIES = Path(__file__).parent.parent / "fixtures" / "families"


@pytest.fixture(scope="module")
def coder_demo(tmp_path_factory):
    """The demo model built with another family's markup: Qwen3-Coder's published chat template and tokens,
    so its calls are <tool_call><function=add><parameter=a>…, read by the qwen3_coder parser."""
    from agentrl.demo import build

    tokens = json.loads((FAMILIES / "families.json").read_text())["qwen3-coder"]
    return build(str(tmp_path_factory.mktemp("coder-demo")), warmup_steps=30, eval_samples=0, log=lambda m: None,
                 chat_template=(FAMILIES / tokens["template"]).read_text(), tokens=tokens)


def test_a_qwen3_coder_model_trains_in_its_own_format(tmp_path, coder_demo):
    """The format is found from the model folder (no tool_parser in the config) and a GRPO step trains with
    every rollout scored, the turns read in the Qwen3-Coder format."""
    # the barely warmed-up model seldom answers right: a reward on the visible answer's length gives the group
    # the variance a GRPO update needs (all-equal rewards would make the step a no-op)
    (tmp_path / "length.py").write_text("def grade(sample, item):\n    return min(len(sample['final_answer']), 60) / 60\n")
    config = write_config(tmp_path, coder_demo, max_steps=1, save_every=0, max_prompt_length=1024,
                          max_response_length=96, rewards=[{"name": "math", "weight": 1.0},
                                                           {"name": str(tmp_path / "length.py"), "weight": 0.5}])
    dry = subprocess.run(AGENTRL + ["train", str(config), "--dry-run"], capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert yaml.safe_load(dry.stdout)["actor_rollout_ref"]["rollout"]["multi_turn"]["format"] == "qwen3_coder"
    result = subprocess.run(AGENTRL + ["train", str(config)], capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = tmp_path / "run"
    rollouts = read_jsonl(run / "rollouts.jsonl")
    assert rollouts and all(r["unscorable"] is None and r["reward"] is not None for r in rollouts)
    steps = [s for r in rollouts for s in r["trajectories"]]
    for step in steps:  # what rewards read is the visible text: no call markup, no special tokens
        assert "<tool_call>" not in step["response"] and "<|im_end|>" not in step["response"]
    metrics = read_jsonl(run / "metrics.jsonl")[-1]
    for key in ("loss", "grad_norm", "entropy"):
        assert metrics[key] is not None and metrics[key] == metrics[key], key
    assert metrics["grad_norm"] > 0  # a real update of the weights, through the family's token stream


class ZygoteWatch:
    """Collects the sandbox workers (zygotes) among this test process's descendants, every half second, until
    stopped: the runs it starts, and nothing another job on the machine started."""

    def __init__(self) -> None:
        import threading

        self.found: list = []
        self._pids: set[tuple[int, float]] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._done.wait(0.5):
            for p in me.children(recursive=True):
                try:
                    key = (p.pid, p.create_time())
                    if key not in self._pids and "agentrl.sandbox.zygote" in " ".join(p.cmdline()):
                        self._pids.add(key)
                        self.found.append(p)
                except psutil.Error:
                    pass

    def stop(self) -> None:
        self._done.set()
        self._thread.join(5)
