"""The hooks an agentrl plugin may implement.

Every hook is ``register_x(register)``: the plugin calls ``register(...)`` once per thing it
provides and returns nothing. Built-ins use these hooks exactly like pip-installed plugins.
"""

import pluggy

hookspec = pluggy.HookspecMarker("agentrl")
hookimpl = pluggy.HookimplMarker("agentrl")


@hookspec
def register_rewards(register):
    """Provide reward functions.

    Call ``register(name, grade, description="")`` for each one. ``grade`` is either a callable
    ``grade(sample, item) -> float | None`` (sync or async) or a path to a Python file defining
    ``grade``; a file is run in the sandbox like a user's own reward file.
    """


@hookspec
def register_tool_servers(register):
    """Provide MCP tool servers by name.

    Call ``register(name, server)`` where ``server`` is one entry of the ``mcpServers`` shape:
    ``{"command": ..., "args": [...], "env": {...}, "cwd": ...}`` for stdio or
    ``{"url": ..., "headers": {...}}`` for streamable HTTP.
    """


@hookspec
def register_dataset_converters(register):
    """Provide dataset converters for ``agentrl data convert --from NAME SOURCE -o FILE``.

    Call ``register(name, rows, description="")`` where ``rows(source: str) -> Iterable[dict]`` yields
    agentrl rows (``id``, ``messages``, ``metadata``) for ``source`` (a file, a category: the converter's
    own word); it raises ``ValueError`` naming what exists when ``source`` is unknown.
    """


@hookspec
def register_agents(register):
    """Provide agents written with any framework (see :mod:`agentrl.program`).

    Call ``register(name, run)`` where ``run`` is ``async def run(row, base_url, api_key) -> str | None``
    (or a path to a ``.py`` file defining it); ``agentrl.agent.program: NAME`` selects it.
    """


@hookspec
def register_commands(register):
    """Provide ``agentrl`` subcommands.

    Call ``register(name, add_arguments, description="")`` where ``add_arguments(parser)`` declares the
    command's arguments on its argparse parser and sets ``parser.set_defaults(func=run)``, ``run(args) -> int``;
    ``agentrl NAME ...`` then runs it. A name agentrl already has is an error naming the plugin.
    """
