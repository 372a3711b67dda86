"""The pluggy registry: built-ins load through entry points like third-party plugins; clear errors."""

from __future__ import annotations

import sys
import types
from importlib import metadata

import pytest

from agentrl import plugins
from agentrl.hookspecs import hookimpl


def _plugin(name: str, rewards=(), servers=()):
    mod = types.ModuleType(name)

    @hookimpl
    def register_rewards(register):
        for r in rewards:
            register(r, lambda sample, item: 1.0, description=f"{r} from {name}")

    @hookimpl
    def register_tool_servers(register):
        for s in servers:
            register(s, {"command": "true"})

    mod.register_rewards = register_rewards
    mod.register_tool_servers = register_tool_servers
    return mod


def test_builtins_come_from_entry_points_with_their_distribution():
    plugins.reset_plugin_manager()
    try:
        rewards = plugins.rewards()
        assert {"math", "coding", "llm_judge", "tool_use", "custom"} <= set(rewards)
        assert rewards["math"].distribution == "agentrl"
        servers = plugins.tool_servers()
        # the first-party plugin under plugins/ is its own distribution
        assert servers["calculator"].distribution == "agentrl-calculator"
    finally:
        plugins.reset_plugin_manager()


def test_duplicate_name_names_both_plugins():
    pm = plugins.new_plugin_manager(_plugin("alpha", rewards=["exact"]), _plugin("beta", rewards=["exact"]))
    with pytest.raises(plugins.PluginError) as err:
        plugins.rewards(pm)
    text = str(err.value)
    assert "'exact'" in text and "registered twice" in text
    assert text.count("plugin ") >= 2


def test_unknown_name_lists_what_exists_and_the_nearest():
    pm = plugins.new_plugin_manager(_plugin("alpha", rewards=["exact_match", "math"]))
    with pytest.raises(plugins.PluginError) as err:
        plugins.lookup("reward", "exact_mtch", where="configs/x.yaml", pm=pm)
    text = str(err.value)
    assert "exact_mtch" in text and "Did you mean 'exact_match'" in text
    assert "exact_match, math" in text and "configs/x.yaml" in text


class _FakeDist(metadata.Distribution):
    """A distribution that exists only in this test, declaring one agentrl entry point."""

    def __init__(self, name: str, value: str) -> None:
        self._files = {
            "METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
            "entry_points.txt": f"[agentrl]\nfake = {value}\n",
        }

    def read_text(self, filename):
        return self._files.get(filename)

    def locate_file(self, path):
        return path


def _with_fake_entry_point(monkeypatch, dist):
    real = plugins._entry_points

    def fake():
        eps = list(real()) + list(dist.entry_points)
        return eps

    monkeypatch.setattr(plugins, "_entry_points", fake)
    plugins.reset_plugin_manager()


def test_pip_installed_plugin_is_loaded_from_its_entry_point(monkeypatch):
    sys.modules["agentrl_fake_plugin"] = _plugin("agentrl_fake_plugin", rewards=["fake_reward"])
    _with_fake_entry_point(monkeypatch, _FakeDist("agentrl-fake", "agentrl_fake_plugin"))
    try:
        reg = plugins.rewards()["fake_reward"]
        assert reg.distribution == "agentrl-fake" and reg.plugin == "fake"
    finally:
        plugins.reset_plugin_manager()
        sys.modules.pop("agentrl_fake_plugin", None)


def test_broken_plugin_names_its_distribution(monkeypatch):
    _with_fake_entry_point(monkeypatch, _FakeDist("agentrl-broken", "agentrl_no_such_module_xyz"))
    try:
        with pytest.raises(plugins.PluginError) as err:
            plugins.get_plugin_manager()
        assert "agentrl-broken" in str(err.value) and "AGENTRL_LOAD_PLUGINS" in str(err.value)
    finally:
        plugins.reset_plugin_manager()


def test_load_plugins_env_limits_what_loads(monkeypatch):
    monkeypatch.setenv("AGENTRL_LOAD_PLUGINS", "builtin_rewards")
    plugins.reset_plugin_manager()
    try:
        assert "math" in plugins.rewards()
        assert plugins.tool_servers() == {}
    finally:
        plugins.reset_plugin_manager()


def test_a_plugin_preset_is_known_by_its_registration_alone(tmp_path):
    """A preset is a registration with ``source=``: `reward new` offers it, and a file equal to it byte for byte
    runs in-process as trusted as the plugin; a changed copy goes to the sandbox. No table elsewhere."""
    from agentrl.rewards import load_reward, preset_source, presets

    source = tmp_path / "shout.py"
    source.write_text("def grade(sample, item):\n    return 1.0\n")
    module = types.ModuleType("shout_plugin")

    @hookimpl
    def register_rewards(register):
        register("shout", lambda sample, item: 1.0, description="always 1", source=source)

    module.register_rewards = register_rewards
    plugins.reset_plugin_manager(plugins.new_plugin_manager(module))
    try:
        assert "shout" in presets() and preset_source("shout") == source.read_text()
        copy = tmp_path / "copy.py"
        copy.write_text(source.read_text())
        assert load_reward(str(copy)).sandboxed is False
        copy.write_text(source.read_text() + "# edited\n")
        assert load_reward(str(copy)).sandboxed is True
    finally:
        plugins.reset_plugin_manager(None)
