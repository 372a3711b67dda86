"""Declaring tool servers: the ``mcpServers`` shape MCP clients already use.

    {"mcpServers": {
        "calc":   {"command": "python", "args": ["-m", "agentrl_calculator"], "env": {...}, "cwd": "..."},
        "search": {"url": "https://tools.example/mcp", "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}},
        "calculator": "calculator"          # a name registered by a pip-installed plugin
    }}

Per-server options beside the connection keys: ``tools`` (allow-list of tool names), ``max_concurrency``,
``timeout`` (seconds per attempt), ``retries`` (on transport errors and 5xx), ``deadline`` (seconds for the
whole call, retries and 429/503 ``Retry-After`` waits included), ``limit_scope`` (``run``, the default: the
limits hold for all agent-loop processes of a run on Ray together, see :mod:`agentrl.tools.limits`; or
``process``), ``stateful`` (one MCP session
per rollout instead of one shared session), ``circuit_failures`` / ``circuit_reset`` (the breaker).
``${VAR}`` in ``url``, ``headers``, ``env``, ``args`` and ``cwd`` is replaced from the environment, so a
token never has to be written into the file. This module does not import the MCP SDK.

Plain HTTP function tools (no MCP) come in the Agent RFT list shape, as a list or a JSON file holding one:

    [{"name": "search", "url": "http://127.0.0.1:8000/search",
      "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
      "description": "full-text search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}]

Each entry is one tool and one "server" of its own (traffic control per endpoint). A plain endpoint lists no
tools, so its ``parameters`` schema comes from the entry, or from an OpenAPI document (``"openapi": "spec.json"``
or a URL). ``rate_limit`` caps calls per second (default 50, the Agent RFT contract's figure). In the
``mcpServers`` shape the same entry needs ``"type": "function"``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentrl import plugins
from agentrl.tools.entries import DEFAULT_FUNCTION_QPS, FunctionEntry, ServerEntry, ToolConfigError, validated

__all__ = ["DEFAULT_FUNCTION_QPS", "ServerSpec", "ToolConfigError", "parse_function", "parse_server",
           "parse_servers_config"]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
@dataclass(frozen=True)
class ServerSpec:
    """One tool server, validated and with ``${VAR}`` expanded."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] | None = None  # allow-list; None = every tool the server lists
    max_concurrency: int = 32
    timeout: float = 60.0
    connect_timeout: float = 30.0
    retries: int = 3
    stateful: bool = False
    circuit_failures: int = 5
    circuit_reset: float = 30.0
    rate_limit: float | None = None  # calls per second; None = no cap
    function: bool = False  # a plain HTTP function tool (Agent RFT shape), not an MCP server
    description: str = ""
    parameters: dict | None = None  # a function tool's JSON schema (None: from ``openapi``, or none)
    openapi: str | None = None
    deadline: float | None = None  # seconds for one call, retries and push-back waits included
    limit_scope: str = "run"  # max_concurrency and rate_limit for the whole run, or for each "process" (tools.limits)

    @property
    def call_deadline(self) -> float:
        """Seconds one call may take from its first attempt, retries and waits included (default: ``timeout``
        for each of the ``retries`` + 1 attempts)."""
        return self.deadline if self.deadline is not None else self.timeout * (self.retries + 1)

    @property
    def transport(self) -> str:
        return "function" if self.function else "stdio" if self.command else "http"


def _expand(value: str, server: str, key: str) -> str:
    def sub(m: re.Match) -> str:
        var = m.group(1)
        if var not in os.environ:
            raise ToolConfigError(
                f"tool server {server!r}: {key} uses ${{{var}}} but the environment variable {var} is not set. "
                f"Export it before starting (e.g. `export {var}=...`) or write the value in the config."
            )
        return os.environ[var]

    return _VAR.sub(sub, value)


def _str_map(raw: Any, server: str, key: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):  # an entry's are checked by its model; the endpoint grader's headers here
        raise ToolConfigError(f"tool server {server!r}: {key} must be an object of strings, got {type(raw).__name__}")
    return {str(k): _expand(str(v), server, f"{key}.{k}") for k, v in raw.items()}


def parse_server(name: str, raw: Any, *, pm=None) -> ServerSpec:
    """Validate one ``mcpServers`` entry. A string (or ``{"plugin": name}``) names a plugin-registered server."""
    if isinstance(raw, str) or (isinstance(raw, dict) and "plugin" in raw):
        plugin_name = raw if isinstance(raw, str) else raw["plugin"]
        registered = plugins.tool_servers(pm)
        if plugin_name not in registered:
            raise plugins.unknown_name_error("tool server", plugin_name, list(registered), f"mcpServers.{name}")
        base = dict(registered[plugin_name].value)
        if isinstance(raw, dict):  # options given beside "plugin" override the plugin's
            base.update({k: v for k, v in raw.items() if k != "plugin"})
        raw = base
    if isinstance(raw, dict) and raw.get("type") == "function":
        return parse_function(name, raw)
    if not isinstance(raw, dict):
        raise ToolConfigError(
            f"tool server {name!r}: expected an object with `command` (stdio) or `url` (streamable HTTP), "
            f"or a string naming a plugin-registered server; got {type(raw).__name__}"
        )
    entry = validated(ServerEntry, raw, "tool server", name)
    has_cmd, has_url = bool(entry.command), bool(entry.url)
    if has_cmd == has_url:
        raise ToolConfigError(
            f"tool server {name!r}: give exactly one of `command` (a stdio server, e.g. "
            f'{{"command": "python", "args": ["-m", "my_server"]}}) or `url` (streamable HTTP, e.g. '
            f'{{"url": "http://127.0.0.1:8000/mcp"}}); it has {"both" if has_cmd else "neither"}'
        )
    url = _url(entry, "tool server", name) if has_url else None
    return ServerSpec(
        name=name,
        command=_expand(str(entry.command), name, "command") if has_cmd else None,
        args=tuple(_expand(str(a), name, f"args[{i}]") for i, a in enumerate(entry.args)),
        env=_str_map(entry.env, name, "env"),
        cwd=_expand(str(entry.cwd), name, "cwd") if entry.cwd else None,
        url=url, tools=tuple(entry.tools) if entry.tools is not None else None, stateful=bool(entry.stateful),
        **_limits(entry, name),
    )


def _limits(entry: ServerEntry | FunctionEntry, name: str) -> dict:
    """The traffic-control keys both kinds of entry share, as ServerSpec takes them."""
    return dict(headers=_str_map(entry.headers, name, "headers"), max_concurrency=entry.max_concurrency,
                timeout=entry.timeout, connect_timeout=entry.connect_timeout, retries=entry.retries,
                circuit_failures=entry.circuit_failures, circuit_reset=entry.circuit_reset,
                rate_limit=entry.rate_limit, deadline=entry.deadline, limit_scope=entry.limit_scope)


def _url(entry: ServerEntry | FunctionEntry, what: str, name: str) -> str:
    url = _expand(str(entry.url), name, "url")
    if not url.startswith(("http://", "https://")):
        raise ToolConfigError(f"{what} {name!r}: url must start with http:// or https://, got {url!r}")
    return url


def parse_function(name: str, raw: dict) -> ServerSpec:
    """One Agent RFT tool entry ``{"name", "url", "headers", ...}``: a plain HTTP endpoint the tool POSTs to."""
    entry = validated(FunctionEntry, raw, "function tool", name)
    if not entry.url:
        raise ToolConfigError(f"function tool {name!r}: needs a \"url\" to POST calls to, "
                              f"e.g. {{\"name\": \"{name}\", \"url\": \"http://127.0.0.1:8000/{name}\"}}")
    url = _url(entry, "function tool", name)
    params = entry.parameters
    if params is not None and params.get("type", "object") != "object":
        raise ToolConfigError(f"function tool {name!r}: parameters must be a JSON schema object such as "
                              f'{{"type": "object", "properties": {{"query": {{"type": "string"}}}}}}, got {params!r}')
    return ServerSpec(
        name=name, url=url, function=True, description=str(entry.description or ""), parameters=params,
        openapi=_expand(entry.openapi, name, "openapi") if entry.openapi else None, **_limits(entry, name),
    )


def _from_list(entries: list, source: str) -> dict:
    """A list mixes plugin names (``"calculator"``) and Agent RFT tool entries (``{"name", "url", ...}``)."""
    out: dict = {}
    for n, entry in enumerate(entries):
        if isinstance(entry, str):
            key, value = entry, entry
        elif isinstance(entry, dict):
            key = entry.get("name")
            if not isinstance(key, str) or not key:
                raise ToolConfigError(f"{source}[{n}]: a tool entry needs a \"name\" (the tool's name the model sees), "
                                      f"got {entry!r}")
            value = {**entry, "type": "function"}
        else:
            raise ToolConfigError(f"{source}[{n}]: expected a plugin name or an object "
                                  f'{{"name", "url", "headers"}}, got {type(entry).__name__}')
        if key in out:
            raise ToolConfigError(f"{source}[{n}]: two tools are named {key!r}; names must be unique")
        out[key] = value
    return out


def start_in(base: Path, servers: Any) -> Any:
    """``servers`` with each stdio server the user declared set to start in ``base`` (the config file's folder, or
    a tools JSON file's): one without ``cwd`` gets ``base``, a relative ``cwd`` is taken under it. So
    ``{"command": "python", "args": ["my_server.py"]}`` finds its script wherever agentrl runs, and in verl's
    workers, which run in the run directory. Plugin names and HTTP servers are left as they are."""
    def one(entry: Any) -> Any:
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
            return entry
        cwd = entry.get("cwd")
        if cwd is None:
            return {**entry, "cwd": str(base)}
        if isinstance(cwd, str) and not cwd.startswith(("$", "~")) and not os.path.isabs(cwd):
            return {**entry, "cwd": str(base / cwd)}
        return entry

    if isinstance(servers, list):
        return [one(e) for e in servers]
    if isinstance(servers, dict):
        if isinstance(servers.get("mcpServers"), dict):
            return {**servers, "mcpServers": {k: one(v) for k, v in servers["mcpServers"].items()}}
        return {k: one(v) for k, v in servers.items()}
    return servers


def parse_servers_config(servers: Any, *, allow: dict[str, list[str]] | None = None, pm=None) -> dict[str, ServerSpec]:
    """Accept ``{"name": entry}``, ``{"mcpServers": {...}}``, a list of plugin names, or a path to a JSON file.

    ``allow`` maps a server name to the tools it may expose (narrowing any ``tools`` list in the entry).
    """
    source = "the tool server config"
    if isinstance(servers, (str, Path)):
        path = Path(servers)
        if not path.is_file():
            raise ToolConfigError(f"tool server config file {str(path)!r} does not exist")
        try:
            servers = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ToolConfigError(f"tool server config file {str(path)!r} is not valid JSON: {exc}") from None
        servers = start_in(path.resolve().parent, servers)
        source = str(path)
    if isinstance(servers, list):  # ["calculator", {"name": "search", "url": ...}]: plugins and function tools
        servers = _from_list(servers, source if source != "the tool server config" else "tools")
    if isinstance(servers, dict) and "mcpServers" in servers:
        servers = servers["mcpServers"]
    if not isinstance(servers, dict):
        raise ToolConfigError(f"{source}: expected an object of servers (the mcpServers shape), got {type(servers).__name__}")
    specs = {}
    for name, raw in servers.items():
        if isinstance(raw, dict) and raw.get("disabled"):
            continue
        if not isinstance(name, str) or not name or "." in name:
            raise ToolConfigError(f"{source}: server name {name!r} must be a non-empty string without '.'")
        if isinstance(raw, dict) and raw.get("type") == "function":
            raw = {k: v for k, v in raw.items() if k != "type"}
            specs[name] = parse_function(name, raw)
        else:
            specs[name] = parse_server(name, raw, pm=pm)
    for name, tools in (allow or {}).items():
        if name not in specs:
            raise plugins.unknown_name_error("tool server", name, list(specs), "allow")
        narrowed = tuple(t for t in tools if specs[name].tools is None or t in specs[name].tools)
        specs[name] = replace(specs[name], tools=narrowed)
    return specs
