"""``agentrl train``: prepare a run directory, start verl's trainer, watch it, and keep the run resumable.

    runs/NAME/
      config.yaml              the config as resolved (agentrl block + verl overrides)
      agentrl_spec.json        the typed RunSpec the agent loop and rewards read inside verl's workers
      data/train.jsonl         the checked dataset in verl's row format
      training.log             everything verl printed (all attempts, appended)
      metrics.jsonl            a line per training step and one per evaluation ("validation": true, val/* keys)
      rollouts.jsonl           every trajectory: ids, trainer step, split, messages, tool calls, reward parts
      checkpoints/global_step_N/...  verl checkpoints, with an HF-format model under actor/huggingface
      checkpoint_status.json   the last *complete* checkpoint (written only after verl finished it)

Running ``agentrl train`` again on the same run directory resumes from the last complete checkpoint.
verl runs under ``agentrl.guard``, which stops its whole process tree when this process dies, however.
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
from agentrl.config import check_verl_keys, flatten, load_config, verl_defaults
from agentrl.dataset import convert
from agentrl.errors import AgentrlError
from agentrl.placement import place_trained
from agentrl.precision import choose
from agentrl.rundir import RunDir
from agentrl.spec import RunSpec
from agentrl.verl.args import build_overrides, launch, launched_rollout, on_cpu, ray_address, step_plan, to_cli

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
    """The model directory, building the demo model offline when asked for ``demo``, and importing a model a
    registry package ships (``smollm2-135m-instruct``) on first use."""
    from agentrl.workflow.model_import import import_model, known

    if known(model):
        return str(import_model(model, log=lambda m: print(m, file=sys.stderr))), {}
    if model != "demo":
        if not Path(model).is_dir():
            raise RunError(f"agentrl.model {model!r} is not a folder with a HuggingFace model "
                           f"(config.json and weights); give a local path, 'demo', or a packaged model "
                           f"(`agentrl models list`)")
        return model, {}
    from agentrl.demo import build

    home = Path(os.environ.get("AGENTRL_HOME", Path.home() / ".cache" / "agentrl"))
    paths = build(str(home / "demo"))
    return paths["model_path"], paths


def prepare(config_path: str, overrides: list[str], check_tools: bool = True) -> dict[str, Any]:
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
    if settings.agent.program:  # a missing file or a `run` that is not async fails here, before Ray starts
        from agentrl.program import load_program

        load_program(settings.agent.program)
    from agentrl.rewards.versions import record_version

    changed = record_version(RunDir(run_dir), rewards, str(config_path))  # listed in reward_versions.json; a change is said now
    if changed:
        print(changed, file=sys.stderr, flush=True)
    offered = None
    if settings.tools:
        from agentrl.tools import parse_servers_config

        parse_servers_config(settings.tools, allow=settings.tool_allow)
        if check_tools:
            offered = _check_tools(settings.tools, str(config_path))

    model_path, demo_paths = resolve_model(settings.model)
    _check_positions(model_path, settings, str(config_path))
    train_src = settings.train_data if settings.train_data != "demo" else demo_paths.get("train_path")
    val_src = settings.val_data if settings.val_data != "demo" else demo_paths.get("val_path")
    if offered is not None:
        _check_tool_names(offered, [train_src, val_src], str(config_path))
    n_train = convert(train_src, RunDir(run_dir).train_data)
    n_val = convert(val_src, RunDir(run_dir).val_data, split="val") if val_src else 0

    spec_path = RunDir(run_dir).spec
    RunSpec.from_settings(settings, run_dir).write(spec_path)
    cpu = on_cpu(settings)
    verl_overrides = build_overrides(settings, verl_part, model_path=model_path,
                                     train_file=str(RunDir(run_dir).train_data),
                                     val_file=str(RunDir(run_dir).val_data) if n_val else None,
                                     spec_path=str(spec_path), run_dir=run_dir, cpu=cpu, train_rows=n_train)
    total = step_plan(settings, n_train).total_steps
    if total < 1:
        raise RunError(f"{train_src} has {n_train} rows, fewer than agentrl.batch_size={settings.batch_size}: "
                       f"no full training step; lower batch_size or add rows")
    precision = choose(settings.dtype) if cpu else None
    resolved = {"agentrl": {**settings.model_dump(), "model": model_path}, "verl_overrides": verl_overrides,
                **({"precision": {"dtype": precision.dtype, "reason": precision.reason}} if precision else {}),
                "source": str(Path(config_path).resolve()), "command_line_overrides": list(overrides)}
    RunDir(run_dir).config.write_text(yaml.safe_dump(resolved, sort_keys=False))
    return {"run_dir": run_dir, "lock": lock, "overrides": verl_overrides, "total_steps": total,
            "cpu": cpu, "rows": n_train, "settings": settings, "precision": precision,
            "rollout": launched_rollout(verl_overrides)}


def _note_start_error(config_path: str, overrides: list[str], exc: Exception) -> None:
    from agentrl.ui.server import run_dir_of

    try:
        run_dir = run_dir_of(config_path, overrides)
        if run_dir.is_dir():
            RunDir(run_dir).start_error.write_text(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {exc}\n")
    except (AgentrlError, OSError):  # no config to find the run directory by, or none was made: nothing to note
        pass


def _attempt_number(run_dir: Path) -> int:
    logs = RunDir(run_dir).logs
    logs.mkdir(exist_ok=True)
    return len(list(logs.glob("verl_metrics.*.jsonl"))) + 1


def _stop(guard: subprocess.Popen, grace: float = 30.0) -> None:
    """Ask the guard to stop verl and everything below it; it returns once none of them is left."""
    if guard.poll() is None:
        try:
            guard.send_signal(signal.SIGINT)
        except ProcessLookupError:
            return
    try:
        guard.wait(timeout=grace + 60.0)
    except subprocess.TimeoutExpired:
        guard.terminate()  # its fast path: SIGTERM, then SIGKILL to every descendant
        guard.wait()


def _lock_run_dir(run_dir: Path):
    """One trainer per run directory: a second `agentrl train` on it fails instead of interleaving files.
    The guard and verl's main process inherit the descriptor, so the lock stays taken until the last
    process of an attempt is gone, even when `agentrl train` itself was killed."""
    handle = RunDir(run_dir).lock()
    if handle is None:
        raise RunError(f"another `agentrl train` is already running in {run_dir}; wait for it, stop it, "
                       f"or set agentrl.run_dir to another folder")
    return handle


def _check_tools(tools: Any, where: str) -> dict[str, list[str]]:
    """Every tool server answers ``list_tools`` now, before Ray starts (``--skip-tool-check`` skips this);
    returns the tools each offers."""
    from agentrl.tools.cli import check_servers

    text, ok, offered = check_servers(tools)
    print(f"tool servers: {text.splitlines()[-1]}", file=sys.stderr)
    if not ok:
        raise RunError(f"{where}: agentrl.tools: a tool server did not answer:\n{text}\n"
                       f"Fix the server or its entry, check it with `agentrl tools check {where}`, or start "
                       f"anyway with `agentrl train --skip-tool-check`")
    return offered


def _check_positions(model_path: str, settings: Any, where: str) -> None:
    """A warning when a prompt and its response can be longer than the model has positions for."""
    try:
        config = json.loads((Path(model_path) / "config.json").read_text())
    except (OSError, ValueError):
        return
    config = config.get("text_config", config)
    positions = config.get("max_position_embeddings")
    total = settings.max_prompt_length + settings.max_response_length
    if isinstance(positions, int) and total > positions:
        print(f"agentrl: warning: {where}: max_prompt_length + max_response_length = {settings.max_prompt_length} + "
              f"{settings.max_response_length} = {total} tokens, but the model has {positions} positions "
              f"(max_position_embeddings in {model_path}/config.json); a rollout that long fails or degrades. "
              f"Lower them so that they add up to at most {positions}", file=sys.stderr, flush=True)


def _check_tool_names(offered: dict[str, list[str]], files: list, where: str) -> None:
    """Rows whose allowed_tools / expected_tools name a tool no server offers stop the run here."""
    from agentrl.dataset import read_rows, tool_name_problems

    rows = [(f"{f}:{lineno}", row) for f in files if f for lineno, row in read_rows(f)]
    problems = [f"{where}: {problem}" for where, problem in tool_name_problems(rows, offered)]
    if problems:
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise RunError(f"{where}: {len(problems)} row(s) name tools no server offers:\n  " + "\n  ".join(problems[:10])
                       + more + "\nFix the names (`agentrl tools list " + where + "` lists the tools) or the servers")


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
        RunDir(run_dir).sandbox_report.write_text(json.dumps(report.as_dict(), indent=2))
        if model_code:
            box.require_strong()
    except SandboxError as exc:
        if exc.cause != "weak_isolation":
            raise RunError(f"{where}: the sandbox for reward code could not start: {exc}") from None
        raise RunError(f"{where}: agentrl.rewards {', '.join(model_code)} run model-written code, but "
                       + WEAK_ADVICE.format(", ".join(report.missing()))) from None
    finally:
        box.close()


def train(config_path: str, overrides: list[str], out=sys.stdout, check_tools: bool = True) -> int:
    try:
        plan = prepare(config_path, overrides, check_tools=check_tools)
    except AgentrlError as exc:
        _note_start_error(config_path, overrides, exc)
        raise
    RunDir(plan["run_dir"]).start_error.unlink(missing_ok=True)
    if not plan["cpu"]:
        from agentrl.verl import gpu_plan

        try:
            gpu_plan.preflight(plan["settings"])
        except AgentrlError:
            plan["lock"].close()
            raise
        print("\n".join(gpu_plan.describe_run(plan["settings"], plan["overrides"])), file=out, flush=True)
    else:
        print(f"agentrl: {plan['precision'].line()}", file=out, flush=True)
        if plan["rollout"] == "vllm":
            from agentrl.verl import gpu_plan

            problem = gpu_plan.cpu_vllm_problem()
            if problem:
                plan["lock"].close()
                raise gpu_plan.GpuPlanError(f"agentrl.rollout=vllm on a machine with no GPU, but {problem}")
    address = ray_address()
    if address:  # a cluster started with `ray start`: it must be able to place the plan, or verl waits forever
        from agentrl.verl.cluster import check_cluster

        try:
            print("\n".join(check_cluster(address, plan["overrides"])), file=out, flush=True)
        except AgentrlError:
            plan["lock"].close()
            raise
    run_dir: Path = plan["run_dir"]
    lock = plan["lock"]
    attempt = _attempt_number(run_dir)
    run_metrics.check_checkpoint(run_dir)  # a checkpoint verl finished after its watcher died counts too
    place_trained(run_dir, plan["settings"].samples_per_prompt)  # and rollouts it had not placed
    resume = run_metrics.last_complete_checkpoint(run_dir)
    if resume:
        if resume["step"] >= plan["total_steps"]:
            print(f"agentrl: {run_dir} is already trained to step {resume['step']} of {plan['total_steps']}; "
                  f"nothing to do (raise agentrl.max_steps or epochs to train further)", file=out, flush=True)
            lock.close()
            return 0
        moved = run_metrics.rewind(run_dir, resume["step"], attempt)
        print(f"resuming {run_dir} from checkpoint step {resume['step']} of {plan['total_steps']}"
              + (f" ({moved} lines past it set aside in logs/)" if moved else ""), file=out)
    else:
        # no checkpoint: verl starts again from step 1, so what an earlier attempt wrote is set aside
        moved = run_metrics.rewind(run_dir, 0, attempt)
        if moved:
            print(f"restarting {run_dir} from step 1: no checkpoint was complete ({moved} lines of the earlier "
                  f"attempt set aside in logs/)", file=out)
    overrides, env = launch(run_dir, attempt, plan["overrides"])
    # verl's task runner in verl's driver process (agentrl/verl/main.py); AGENTRL_TASK_RUNNER=actor starts verl's
    # own main_ppo, whose runner is an actor process of its own (benchmarks/bench_train.py's baseline)
    entry = "verl.trainer.main_ppo" if os.environ.get("AGENTRL_TASK_RUNNER") == "actor" else "agentrl.verl.main"
    cmd = [sys.executable, "-m", entry, *to_cli(overrides)]
    (run_dir / "logs" / f"command.{attempt}.json").write_text(json.dumps(cmd, indent=1))
    print(f"agentrl: training {plan['settings'].name} for {plan['total_steps']} steps on "
          f"{'CPU' if plan['cpu'] else 'GPU'} with the {plan['rollout']} rollout; "
          f"run directory {run_dir}", file=out, flush=True)
    log = open(RunDir(run_dir).training_log, "ab", buffering=0)
    log.write(f"\n===== attempt {attempt} {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n".encode())
    guard_cmd = [sys.executable, "-m", "agentrl.guard", "--lock-fd", str(lock.fileno()), "--", *cmd]
    proc = subprocess.Popen(guard_cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(run_dir),
                            pass_fds=(lock.fileno(),))
    watcher = run_metrics.Watcher(run_dir, attempt, plan["total_steps"], out=out,
                                  start_step=resume["step"] if resume else 0,
                                  group_size=plan["settings"].samples_per_prompt)
    # Ctrl-C is acted on between polls, never inside one: a KeyboardInterrupt raised in the middle of a
    # LoRA checkpoint merge (its first poll imports torch, then writes the merged model) leaves torch
    # partly imported, so the poll after it fails (agentrl train died of SIGSEGV), or a merge half-written
    asked: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: asked.append(signum))
    try:
        while proc.poll() is None and not asked:
            watcher.poll()
            time.sleep(1.0)
        if not asked:
            watcher.poll()
    finally:
        signal.signal(signal.SIGINT, previous)
        interrupted = bool(asked)
        if interrupted:
            print("\nagentrl: interrupted; stopping verl and Ray (the run resumes from its last checkpoint)",
                  file=out, flush=True)
        _stop(proc)
        watcher.poll()
        log.close()
    lock.close()
    if interrupted:
        return 130
    if proc.returncode != 0:
        tail = run_metrics.error_tail(RunDir(run_dir).training_log)
        print(f"agentrl: verl exited with code {proc.returncode}. Last error in {RunDir(run_dir).training_log}:\n{tail}",
              file=out, flush=True)
        return proc.returncode or 1
    watcher.finish()
    return 0
