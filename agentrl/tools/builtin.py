"""Built-in tool servers, registered through the ``agentrl`` entry point like any plugin.

agentrl ships no tool server of its own: servers come from configs (the ``mcpServers`` shape) or from
plugins such as ``agentrl-calculator``. This module is the place for one, and a worked example of the hook:

    @hookimpl
    def register_tool_servers(register):
        register("docs", {"url": "http://127.0.0.1:9000/mcp"}, description="search the handbook")
"""

from agentrl.hookspecs import hookimpl


@hookimpl
def register_tool_servers(register):  # noqa: ARG001 - nothing built in (yet)
    return None
