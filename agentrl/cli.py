"""The ``agentrl`` command.

    agentrl train CONFIG.yaml [key=value ...]     train (or resume) a run
    agentrl plugins                               what is loaded, from which distribution
    agentrl tools list|check CONFIG               the configured MCP servers and their tools
    agentrl tools call CONFIG SERVER.TOOL '{"a": 1}'
    agentrl reward new --preset NAME > reward.py  start a reward from a preset
    agentrl demo build DIR                        build the CPU demo's model and data offline
    agentrl data check|split|convert ...          look at a dataset before training (agentrl.workflow)
    agentrl prior | eval | compare | inspect | export   before and after training (agentrl.workflow)
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _cmd_train(args: argparse.Namespace) -> int:
    from agentrl.runner import train

    return train(args.config, args.overrides)


def _cmd_plugins(args: argparse.Namespace) -> int:
    from agentrl import plugins

    rows = []
    for kind, table in (("reward", plugins.rewards()), ("tool server", plugins.tool_servers())):
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
    from agentrl.config import load_config

    if config.endswith(".json"):
        return config
    settings, _, _ = load_config(config)
    if not settings.tools:
        raise SystemExit(f"{config}: agentrl.tools is empty; name tool servers there (e.g. tools: [calculator])")
    return settings.tools


def _cmd_tools(args: argparse.Namespace) -> int:
    from agentrl.tools import cli as tools_cli

    servers = _servers_from(args.config)
    if args.action == "list":
        print(tools_cli.list_tools(servers))
        return 0
    if args.action == "check":
        text, ok = tools_cli.check(servers)
        print(text)
        return 0 if ok else 1
    if not args.tool:
        raise SystemExit("usage: agentrl tools call CONFIG SERVER.TOOL '{\"arg\": 1}'")
    text, is_error = tools_cli.call_tool(servers, args.tool, args.arguments or "{}")
    print(text)
    return 1 if is_error else 0


def _cmd_reward(args: argparse.Namespace) -> int:
    from agentrl.rewards import preset_source

    sys.stdout.write(preset_source(args.preset))
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
    t.set_defaults(func=_cmd_train)
    pl = sub.add_parser("plugins", help="list loaded plugins and what they register")
    pl.set_defaults(func=_cmd_plugins)
    tl = sub.add_parser("tools", help="smoke-test the MCP tool servers of a config")
    tl.add_argument("action", choices=["list", "check", "call"])
    tl.add_argument("config", help="a training config, or an mcpServers JSON file")
    tl.add_argument("tool", nargs="?", help="SERVER.TOOL (for call)")
    tl.add_argument("arguments", nargs="?", help="JSON object of arguments (for call)")
    tl.set_defaults(func=_cmd_tools)
    rw = sub.add_parser("reward", help="reward helpers")
    rw.add_argument("action", choices=["new"])
    rw.add_argument("--preset", required=True, help="math, coding, llm_judge, tool_use or custom")
    rw.set_defaults(func=_cmd_reward)
    dm = sub.add_parser("demo", help="the CPU demo")
    dm.add_argument("action", choices=["build"])
    dm.add_argument("dir")
    dm.set_defaults(func=_cmd_demo)
    from agentrl.workflow.commands import add_parsers

    add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from agentrl.errors import AgentrlError

    try:
        return int(args.func(args) or 0)
    except AgentrlError as exc:
        print(f"agentrl: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
