"""``agentrl train``: prepare a run directory, start verl's trainer, watch it, and keep the run resumable.

    runs/NAME/
      config.yaml              the config as resolved (agentrl block + verl overrides)
      agentrl_spec.json        what the agent loop and rewards read inside verl's workers
      data/train.jsonl         the checked dataset in verl's row format
      training.log             everything verl printed (all attempts, appended)
      metrics.jsonl            one line per step: verl's metrics plus reward components and tool use
      rollouts.jsonl           every trajectory: ids, step, messages, tool calls and results, reward parts
      checkpoints/global_step_N/...  verl checkpoints, with an HF-format model under actor/huggingface
      checkpoint_status.json   the last *complete* checkpoint (written only after verl finished it)

Running ``agentrl train`` again on the same run directory resumes from the last complete checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from agentrl import metrics as run_metrics
from agentrl.config import ConfigError, check_verl_keys, flatten, load_config, verl_defaults
from agentrl.dataset import convert
from agentrl.errors import AgentrlError
from agentrl.verl_args import build_overrides, child_env, on_cpu, to_cli

MIN_FREE_BYTES = 200 * 1024 * 1024


class RunError(AgentrlError):
    """The run cannot start or continue; the message says what and where."""


def _check_writable(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise RunError(f"run directory {str(run_dir)!r} is not writable ({exc.strerror}); "
                       f"set agentrl.run_dir to a folder you can write") from None
    free = shutil.disk_usage(run_dir).free
    if free < MIN_FREE_BYTES:
        raise RunError(f"only {free // 2**20} MiB free under {run_dir}; checkpoints need at least "
                       f"{MIN_FREE_BYTES // 2**20} MiB. Free space or set agentrl.run_dir elsewhere")


def resolve_model(model: str) -> tuple[str, dict]:
    """The model directory, building the demo model offline when asked for ``demo``."""
    if model != "demo":
        if not Path(model).is_dir():
            raise RunError(f"agentrl.model {model!r} is not a folder with a HuggingFace model "
                           f"(config.json and weights); give a local path, or 'demo'")
        return model, {}
    from agentrl.demo import build

    home = Path(os.environ.get("AGENTRL_HOME", Path.home() / ".cache" / "agentrl"))
    paths = build(str(home / "demo"))
    return paths["model_path"], paths


def prepare(config_path: str, overrides: list[str]) -> dict[str, Any]:
    """Validate everything that can be validated before Ray starts; return the launch plan."""
    settings, verl_part, doc = load_config(config_path, overrides)
    verl_keys = flatten(verl_part)
    if verl_keys:
        check_verl_keys(verl_keys, verl_defaults(), str(config_path))
    name = settings.name
    run_dir = Path(settings.run_dir.replace("${name}", name)).expanduser()
    if not run_dir.is_absolute():
        run_dir = Path.cwd() / run_dir
    _check_writable(run_dir)
    lock = _lock_run_dir(run_dir)  # before anything in the run directory is rewritten

    from agentrl.rewards import RewardSet

    rewards = RewardSet.from_config(settings.rewards, where=f"{config_path}: agentrl.rewards")
    _check_sandbox(rewards.describe(), run_dir, str(config_path))
    if settings.tools:
        from agentrl.tools import parse_servers_config

        parse_servers_config(settings.tools, allow=settings.tool_allow)

    model_path, demo_paths = resolve_model(settings.model)
    train_src = settings.train_data if settings.train_data != "demo" else demo_paths.get("train_path")
    val_src = settings.val_data if settings.val_data != "demo" else demo_paths.get("val_path")
    data_dir = run_dir / "data"
    n_train = convert(train_src, data_dir / "train.jsonl")
    n_val = convert(val_src, data_dir / "val.jsonl") if val_src else 0

    spec = {
        "run_dir": str(run_dir),
        "tools": settings.tools,
        "tool_allow": settings.tool_allow,
        "rewards": settings.rewards,
        "agent": settings.agent.model_dump(),
    }
    spec_path = run_dir / "agentrl_spec.json"
    spec_path.write_text(json.dumps(spec, indent=2))
    cpu = on_cpu(settings)
    verl_overrides = build_overrides(settings, verl_part, model_path=model_path,
                                     train_file=str(data_dir / "train.jsonl"),
                                     val_file=str(data_dir / "val.jsonl") if n_val else None,
                                     spec_path=str(spec_path), run_dir=run_dir, cpu=cpu)
    steps_per_epoch = n_train // settings.batch_size
    total = settings.max_steps or steps_per_epoch * settings.epochs
    if total < 1:
        raise RunError(f"{train_src} has {n_train} rows, fewer than agentrl.batch_size={settings.batch_size}: "
                       f"no full training step; lower batch_size or add rows")
    resolved = {"agentrl": {**settings.model_dump(), "model": model_path}, "verl_overrides": verl_overrides,
                "source": str(Path(config_path).resolve()), "command_line_overrides": list(overrides)}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
    return {"run_dir": run_dir, "lock": lock, "overrides": verl_overrides, "total_steps": min(total, settings.max_steps or total),
            "cpu": cpu, "rows": n_train, "settings": settings}


def _attempt_number(run_dir: Path) -> int:
    logs = run_dir / "logs"
    logs.mkdir(exist_ok=True)
    return len(list(logs.glob("verl_metrics.*.jsonl"))) + 1


def _stop(proc: subprocess.Popen, grace: float = 30.0) -> None:
    """Stop verl and everything it started (Ray included): SIGINT, then SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:  # Ray's own daemons live in the same process group; make sure none outlives the run
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _die_with_parent() -> None:
    """In the verl child: get SIGINT if the agentrl process dies (kill -9 included), so verl and Ray stop too."""
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)


def _lock_run_dir(run_dir: Path):
    """One trainer per run directory: a second `agentrl train` on it fails instead of interleaving files."""
    import fcntl

    handle = open(run_dir / ".agentrl.lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RunError(f"another `agentrl train` is already running in {run_dir}; wait for it, stop it, "
                       f"or set agentrl.run_dir to another folder") from None
    return handle


def _check_sandbox(described: list[dict], run_dir: Path, where: str) -> None:
    """Say what isolation untrusted code gets on this machine before anything starts, and refuse to start
    when a reward runs model-written code under isolation too weak for it (unless the user opted in)."""
    model_code = [r["label"] for r in described if r.get("runs_model_code")]
    if not model_code and not any(r.get("sandboxed") for r in described):
        return
    from agentrl.sandbox import Sandbox, SandboxError
    from agentrl.sandbox.api import WEAK_ADVICE

    box = Sandbox(size=1)  # the rewards start their own in verl's workers; this one only measures
    try:
        report = box.isolation_report()
        print(report.summary(), file=sys.stderr)
        (run_dir / "sandbox_isolation.json").write_text(json.dumps(report.as_dict(), indent=2))
        if model_code:
            box.require_strong()
    except SandboxError as exc:
        if exc.cause != "weak_isolation":
            raise RunError(f"{where}: the sandbox for reward code could not start: {exc}") from None
        raise RunError(f"{where}: agentrl.rewards {', '.join(model_code)} run model-written code, but "
                       + WEAK_ADVICE.format(", ".join(report.missing()))) from None
    finally:
        box.close()


def train(config_path: str, overrides: list[str], out=sys.stdout) -> int:
    plan = prepare(config_path, overrides)
    if not plan["cpu"]:
        from agentrl import gpu_plan

        try:
            gpu_plan.preflight(plan["settings"])
        except AgentrlError:
            plan["lock"].close()
            raise
        print("\n".join(gpu_plan.describe_run(plan["settings"], plan["overrides"])), file=out, flush=True)
    run_dir: Path = plan["run_dir"]
    lock = plan["lock"]
    attempt = _attempt_number(run_dir)
    resume = run_metrics.last_complete_checkpoint(run_dir)
    if resume:
        print(f"resuming {run_dir} from checkpoint step {resume['step']}", file=out)
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *to_cli(plan["overrides"])]
    (run_dir / "logs" / f"command.{attempt}.json").write_text(json.dumps(cmd, indent=1))
    env = child_env(run_dir, attempt, plan["overrides"])
    print(f"agentrl: training {plan['settings'].name} for {plan['total_steps']} steps on "
          f"{'CPU' if plan['cpu'] else 'GPU'}; run directory {run_dir}", file=out, flush=True)
    log = open(run_dir / "training.log", "ab", buffering=0)
    log.write(f"\n===== attempt {attempt} {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n".encode())
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(run_dir),
                            start_new_session=True, preexec_fn=_die_with_parent)
    watcher = run_metrics.Watcher(run_dir, attempt, plan["total_steps"], out=out)
    interrupted = False
    try:
        while proc.poll() is None:
            watcher.poll()
            time.sleep(1.0)
        watcher.poll()
    except KeyboardInterrupt:
        interrupted = True
        print("\nagentrl: interrupted; stopping verl and Ray (the run resumes from its last checkpoint)",
              file=out, flush=True)
    finally:
        _stop(proc)
        watcher.poll()
        log.close()
    lock.close()
    if interrupted:
        return 130
    if proc.returncode != 0:
        tail = run_metrics.error_tail(run_dir / "training.log")
        print(f"agentrl: verl exited with code {proc.returncode}. Last error in {run_dir / 'training.log'}:\n{tail}",
              file=out, flush=True)
        return proc.returncode or 1
    watcher.finish()
    return 0
