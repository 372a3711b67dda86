"""``register_commands``: a plugin's subcommand runs as ``agentrl NAME ...``; a name agentrl has is an error."""

from __future__ import annotations

import types

import pytest

from agentrl import cli, plugins
from agentrl.hookspecs import hookimpl


def _plugin(command: str):
    mod = types.ModuleType(f"plugin_{command}")
    calls = []

    def add_arguments(parser):
        parser.add_argument("word")
        parser.add_argument("--times", type=int, default=1)
        parser.set_defaults(func=lambda args: calls.append((args.word, args.times)) or 3)

    @hookimpl
    def register_commands(register):
        register(command, add_arguments, description=f"{command} from a plugin")

    mod.register_commands = register_commands
    return mod, calls


@pytest.fixture
def loaded():
    def load(*mods):
        plugins.reset_plugin_manager(plugins.new_plugin_manager(*mods))
    yield load
    plugins.reset_plugin_manager()


def test_a_registered_command_runs_with_its_arguments(loaded, capsys):
    mod, calls = _plugin("greet")
    loaded(mod)
    assert cli.main(["greet", "hello", "--times", "2"]) == 3  # the command's own exit status
    assert calls == [("hello", 2)]
    assert cli.main(["plugins"]) == 0
    assert "greet from a plugin" in capsys.readouterr().out


def test_a_command_agentrl_has_is_an_error_naming_the_plugin(loaded):
    mod, _ = _plugin("train")
    loaded(mod)
    with pytest.raises(plugins.PluginError, match="plugin_train.*'train', which agentrl already has"):
        cli.parser()
