"""The plugin registry: one pluggy manager, entry point group ``agentrl``.

There is no registry dict: each getter calls the hook and builds a fresh ``name -> entry`` map,
so what is loaded is always what pluggy holds. Built-ins are entry points of the ``agentrl``
distribution itself and load the same way as third-party ones.

``AGENTRL_LOAD_PLUGINS`` (comma-separated entry point names) limits which entry points load;
``AGENTRL_LOAD_PLUGINS=""`` loads none.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable

import pluggy

from agentrl import hookspecs
from agentrl.errors import AgentrlError

GROUP = "agentrl"


class PluginError(AgentrlError):
    """A plugin could not be loaded, or a name is unknown or provided twice."""


@dataclass(frozen=True)
class Registered:
    """One thing a plugin registered: a reward, a tool server or a dataset converter."""

    kind: str
    name: str
    value: Any
    plugin: str  # the plugin module or object name
    distribution: str  # the distribution that installed it, or "(not installed)"
    description: str = ""
    extra: dict = field(default_factory=dict)


_pm: pluggy.PluginManager | None = None


def _entry_points():
    return metadata.entry_points(group=GROUP)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, loading entry points on first use."""
    global _pm
    if _pm is None:
        pm = pluggy.PluginManager(GROUP)
        pm.add_hookspecs(hookspecs)
        allowed = os.environ.get("AGENTRL_LOAD_PLUGINS")
        names = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
        for ep in _entry_points():
            if names is not None and ep.name not in names:
                continue
            if pm.get_plugin(ep.name) is not None:
                continue
            try:
                module = ep.load()
            except Exception as exc:  # a broken plugin must say which one it is
                dist = ep.dist.name if ep.dist else "?"
                raise PluginError(
                    f"agentrl plugin {ep.name!r} (entry point {ep.value!r} from distribution {dist!r}) "
                    f"failed to import: {type(exc).__name__}: {exc}. Fix or uninstall that distribution, "
                    f"or set AGENTRL_LOAD_PLUGINS to the plugins you want."
                ) from exc
            pm.register(module, name=ep.name)
            pm._agentrl_dist = getattr(pm, "_agentrl_dist", {})
            pm._agentrl_dist[ep.name] = ep.dist.name if ep.dist else "(unknown)"
        pm.check_pending()
        _pm = pm
    return _pm


def reset_plugin_manager(pm: pluggy.PluginManager | None = None) -> None:
    """Replace the process-wide manager (tests use this to start from a known set)."""
    global _pm
    _pm = pm


def new_plugin_manager(*plugins: Any) -> pluggy.PluginManager:
    """A manager holding only ``plugins`` (no entry points): for tests and embedding."""
    pm = pluggy.PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    for p in plugins:
        pm.register(p)
    pm.check_pending()
    return pm


def _distribution_of(pm: pluggy.PluginManager, plugin: Any) -> str:
    name = pm.get_name(plugin)
    return getattr(pm, "_agentrl_dist", {}).get(name, "(registered in code)")


def _collect(kind: str, hook_name: str, pm: pluggy.PluginManager | None = None) -> dict[str, Registered]:
    pm = pm or get_plugin_manager()
    found: dict[str, Registered] = {}
    hook = getattr(pm.hook, hook_name)
    for impl in hook.get_hookimpls():
        plugin = impl.plugin
        plugin_name = pm.get_name(plugin) or repr(plugin)
        dist = _distribution_of(pm, plugin)

        def register(name: str, value: Any, description: str = "", **extra: Any) -> None:
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin {plugin_name!r} registered a {kind} with an empty or non-string name")
            if name in found:
                other = found[name]
                raise PluginError(
                    f"{kind} {name!r} is registered twice: by plugin {other.plugin!r} "
                    f"(distribution {other.distribution!r}) and by plugin {plugin_name!r} "
                    f"(distribution {dist!r}). Uninstall one, or block one with AGENTRL_LOAD_PLUGINS."
                )
            found[name] = Registered(kind, name, value, plugin_name, dist, description, dict(extra))

        impl.function(register=register)
    return found


def rewards(pm: pluggy.PluginManager | None = None) -> dict[str, Registered]:
    """Every registered reward, by name."""
    return _collect("reward", "register_rewards", pm)


def tool_servers(pm: pluggy.PluginManager | None = None) -> dict[str, Registered]:
    """Every registered MCP tool server, by name."""
    return _collect("tool server", "register_tool_servers", pm)


def dataset_converters(pm: pluggy.PluginManager | None = None) -> dict[str, Registered]:
    """Every registered dataset converter (``agentrl data convert --from NAME``), by name."""
    return _collect("dataset converter", "register_dataset_converters", pm)


def agents(pm: pluggy.PluginManager | None = None) -> dict[str, Registered]:
    """Every registered agent program, by name."""
    return _collect("agent", "register_agents", pm)


def commands(pm: pluggy.PluginManager | None = None) -> dict[str, Registered]:
    """Every registered ``agentrl`` subcommand, by name."""
    return _collect("command", "register_commands", pm)


def unknown_name_error(kind: str, name: str, known: list[str] | dict, where: str = "") -> PluginError:
    """An error for an unknown plugin name that lists what exists and the nearest match."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    loc = f" (in {where})" if where else ""
    return PluginError(
        f"unknown {kind} {name!r}{loc}.{hint} Known {kind}s: {', '.join(known) or '(none)'}. "
        f"Run `agentrl plugins` to see what is installed, or install the plugin that provides it."
    )


def lookup(kind: str, name: str, where: str = "", pm: pluggy.PluginManager | None = None) -> Registered:
    table: dict[str, Registered] = {"reward": rewards, "tool server": tool_servers,
                                       "dataset converter": dataset_converters}[kind](pm)
    if name not in table:
        raise unknown_name_error(kind, name, list(table), where)
    return table[name]


Callback = Callable[..., None]
