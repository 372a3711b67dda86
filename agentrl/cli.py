"""The ``agentrl`` command.

    agentrl train CONFIG.yaml [key=value ...]     train (or resume) a run
    agentrl train CONFIG.yaml --dry-run [...]     check it, print verl's config; start nothing
    agentrl plugins                               what is loaded, from which distribution
    agentrl tools list|check CONFIG               the configured MCP servers and their tools
    agentrl tools call CONFIG SERVER.TOOL '{"a": 1}'
    agentrl reward new --preset NAME > reward.py  start a reward from a preset
    agentrl reward new --describe "..." --model M --out reward.py   draft one with an LLM, reviewed first
    agentrl reward review CONFIG [--cases FILE]   gold, adversarial, human-agreement and determinism checks
    agentrl rescore RUN --config NEW.yaml --out DIR   score a run's stored rollouts again with other rewards
    agentrl demo build DIR                        build the CPU demo's model and data offline
    agentrl ui [RUNS_DIR] [--host H] [--port P]   the job page: runs, charts, rollouts, live
    agentrl report RUN_DIR -o report.html         the same charts and a rollout sample in one offline file
    agentrl data check|split|convert ...          look at a dataset before training (agentrl.workflow)
    agentrl prior | eval | compare | inspect | export   before and after training (agentrl.workflow)
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _cmd_train(args: argparse.Namespace) -> int:
    overrides = [o for o in args.overrides if o != "--dry-run"]  # the flag may come after the overrides too
    if args.dry_run or len(overrides) != len(args.overrides):
        from agentrl.verl.dryrun import dry_run

        return dry_run(args.config, overrides)
    from agentrl.runner import train
    from agentrl.ui.server import announce, run_dir_of, running_servers

    if not args.no_review and "--no-review" not in overrides:
        from agentrl.rewards.review import preflight

        preflight(args.config, sys.stdout, overrides)
    overrides = [o for o in overrides if o != "--no-review"]
    if args.ui or running_servers():
        announce(run_dir_of(args.config, overrides), start=args.ui)
    return train(args.config, overrides, check_tools=not args.skip_tool_check)


def _cmd_ui(args: argparse.Namespace) -> int:
    from agentrl.ui.server import serve

    return serve(args.runs_dir, host=args.host, port=args.port)


def _cmd_report(args: argparse.Namespace) -> int:
    from agentrl.ui.report import write_report

    path = write_report(args.run_dir, args.output, steps=args.steps, per_step=args.per_step)
    print(f"agentrl: report written to {path} ({path.stat().st_size / 2**20:.1f} MiB; opens offline)")
    return 0


def _cmd_plugins(args: argparse.Namespace) -> int:
    from agentrl import plugins

    rows = []
    for kind, table in (("reward", plugins.rewards()), ("tool server", plugins.tool_servers()),
                        ("converter", plugins.dataset_converters()), ("agent", plugins.agents()),
                        ("command", plugins.commands())):
        for name, reg in sorted(table.items()):
            rows.append((kind, name, reg.plugin, reg.distribution, reg.description))
    if not rows:
        print("no plugins loaded")
        return 0
    widths = [max(len(str(r[i])) for r in rows + [("kind", "name", "plugin", "distribution", "")]) for i in range(4)]
    header = ("kind", "name", "plugin", "distribution")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)) + "  description")
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row[:4], widths)) + "  " + (row[4] or ""))
    return 0


def _servers_from(config: str):
    from agentrl.config import load_tools

    if config.endswith(".json"):
        return config
    tools = load_tools(config)  # only agentrl.tools: the rest of a config need not be written yet
    if not tools:
        raise SystemExit(f"{config}: agentrl.tools is empty; name tool servers there (e.g. tools: [calculator])")
    return tools


def _cmd_tools(args: argparse.Namespace) -> int:
    from agentrl.tools import cli as tools_cli

    servers = _servers_from(args.config)
    if args.action == "list":
        text, failures, records = tools_cli.list_servers(servers)
        print(json.dumps(records, indent=2) if args.json else text)
        if failures:
            print(f"agentrl: error: {len(failures)} of {len(records)} tool servers did not answer; "
                  f"`agentrl tools check {args.config}` times each", file=sys.stderr)
        return 1 if failures else 0
    if args.action == "check":
        text, ok = tools_cli.check(servers)
        if args.json:  # one record per server line: ok, FAIL, or ?? (reachable, token not verified)
            *lines, tail = text.splitlines()
            status = {"ok": "ok", "FA": "fail", "??": "unverified"}
            print(json.dumps({"ok": ok, "summary": tail, "servers": [
                {"server": line[5:].split(":", 1)[0], "status": status.get(line[:2], "fail"), "detail": line[5:]}
                for line in lines]}, indent=2))
        else:
            print(text)
        return 0 if ok else 1
    if not args.tool:
        raise SystemExit("usage: agentrl tools call CONFIG SERVER.TOOL '{\"arg\": 1}'")
    text, is_error = tools_cli.call_tool(servers, args.tool, args.arguments or "{}")
    print(text)
    return 1 if is_error else 0


def _cmd_reward(args: argparse.Namespace) -> int:
    if args.action == "review":
        from agentrl.rewards.review import review_config

        if not args.config:
            raise SystemExit("usage: agentrl reward review CONFIG [--cases FILE]")
        text, ok = review_config(args.config, cases=args.cases, rows=args.rows)
        print(text)
        return 0 if ok else 1
    if args.describe:
        from agentrl.rewards.drafting import new_reward

        if not args.model:
            raise SystemExit("agentrl reward new --describe needs --model (any litellm model, e.g. openai/gpt-4o-mini)")
        text, written = new_reward(args.describe, args.model, args.out, config=args.config, api_base=args.api_base,
                                   api_key_env=args.api_key_env, force=args.force)
        print(text)
        return 0 if written else 1
    if not args.preset:
        raise SystemExit("agentrl reward new needs --preset NAME or --describe \"...\" --model M")
    from agentrl.rewards import preset_source

    sys.stdout.write(preset_source(args.preset))
    return 0


def _cmd_rescore(args: argparse.Namespace) -> int:
    from agentrl.rescore import rescore

    rescore(args.run_dir, args.config, args.out, overrides=args.overrides)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from agentrl.demo import build

    paths = build(args.dir)
    for key, value in paths.items():
        print(f"{key}: {value}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentrl", description="Train tool-using LLM agents with RL (verl GRPO).")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train, or resume, the run a config describes")
    t.add_argument("config")
    t.add_argument("overrides", nargs="*", help="key=value, e.g. agentrl.batch_size=4 trainer.total_epochs=2")
    t.add_argument("--skip-tool-check", action="store_true",
                   help="start without first asking every tool server for its tools")
    t.add_argument("--ui", action="store_true", help="start the job page for this run (agentrl ui) and print its address")
    t.add_argument("--dry-run", action="store_true",
                   help="check everything, print the composed verl config and environment; start nothing")
    t.add_argument("--no-review", action="store_true", help="skip the reward review pre-flight")
    t.set_defaults(func=_cmd_train)
    pl = sub.add_parser("plugins", help="list loaded plugins and what they register")
    pl.set_defaults(func=_cmd_plugins)
    tl = sub.add_parser("tools", help="smoke-test the MCP tool servers of a config")
    tl.add_argument("action", choices=["list", "check", "call"])
    tl.add_argument("config", help="a training config, or an mcpServers JSON file")
    tl.add_argument("tool", nargs="?", help="SERVER.TOOL (for call)")
    tl.add_argument("arguments", nargs="?", help="JSON object of arguments (for call)")
    tl.add_argument("--json", action="store_true", help="list, check: the result as JSON")
    tl.set_defaults(func=_cmd_tools)
    rw = sub.add_parser("reward", help="reward helpers")
    rw.add_argument("action", choices=["new", "review"])
    rw.add_argument("config", nargs="?", help="a training config (review; optional for new --describe)")
    rw.add_argument("--preset", help="math, coding, llm_judge, tool_use or custom")
    rw.add_argument("--describe", help="new: the reward in plain words, drafted by --model")
    rw.add_argument("--model", help="new --describe: any litellm model")
    rw.add_argument("--api-base", help="new --describe: an OpenAI-compatible server's URL")
    rw.add_argument("--api-key-env", help="new --describe: the variable holding the API key")
    rw.add_argument("--out", default="reward.py", help="new --describe: where to write the file")
    rw.add_argument("--force", action="store_true", help="new --describe: write even if the review fails")
    rw.add_argument("--cases", help="review: JSONL of {sample, item, human_score} for Cohen's kappa")
    rw.add_argument("--rows", type=int, default=5, help="review: how many training rows to check")
    rw.set_defaults(func=_cmd_reward)
    rs = sub.add_parser("rescore", help="score a run's stored rollouts again with another config's rewards (no model)")
    rs.add_argument("run_dir")
    rs.add_argument("--config", required=True, help="the config whose agentrl.rewards score the rollouts")
    rs.add_argument("--out", required=True, help="folder for scores.jsonl, groups.jsonl and summary.json")
    rs.add_argument("overrides", nargs="*", help="key=value overrides of --config")
    rs.set_defaults(func=_cmd_rescore)
    dm = sub.add_parser("demo", help="the CPU demo")
    dm.add_argument("action", choices=["build"])
    dm.add_argument("dir")
    dm.set_defaults(func=_cmd_demo)
    ui = sub.add_parser("ui", help="the job page: a local web app for runs, charts and rollouts")
    ui.add_argument("runs_dir", nargs="?", default="runs", help="folder of run directories (default: runs)")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=int, default=8266)
    ui.set_defaults(func=_cmd_ui)
    rp = sub.add_parser("report", help="one self-contained HTML file: a run's charts and a rollout sample")
    rp.add_argument("run_dir")
    rp.add_argument("-o", "--output", default="report.html")
    rp.add_argument("--steps", type=int, default=12, help="steps sampled into the rollout explorer")
    rp.add_argument("--per-step", type=int, default=4, help="prompt groups per sampled step")
    rp.set_defaults(func=_cmd_report)
    from agentrl.workflow.commands import add_parsers

    add_parsers(sub)
    _add_plugin_commands(sub)
    return p


def _add_plugin_commands(sub) -> None:
    """The subcommands plugins register (``register_commands``), e.g. the BFCL plugin's ``agentrl bfcl``."""
    from agentrl import plugins

    try:
        registered = plugins.commands()
    except plugins.PluginError:
        return  # a broken plugin: the commands that load plugins say which, with the fix
    for name, reg in registered.items():
        if name in sub.choices:
            raise plugins.PluginError(f"plugin {reg.plugin!r} (distribution {reg.distribution!r}) registered the "
                                      f"command {name!r}, which agentrl already has: rename it in that plugin")
        reg.value(sub.add_parser(name, help=reg.description))


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra and args.command == "train" and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides += extra  # overrides after an option: `agentrl train my.yaml --ui a=1`
    elif extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    from agentrl.errors import AgentrlError

    try:
        return int(args.func(args) or 0)
    except AgentrlError as exc:
        print(f"agentrl: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `agentrl ... | head`: the reader stopped reading, which is not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's final flush does not fail again
        return 141


if __name__ == "__main__":
    sys.exit(main())
