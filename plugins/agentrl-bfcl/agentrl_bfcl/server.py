"""BFCL's multi-turn environments as one stateful MCP server (stdio): ``python -m agentrl_bfcl.server``.

    config: tools: ["bfcl"]      # registered by the plugin, one server process per rollout ("stateful")
    row:    metadata.tool_setup == [{"name": "bfcl_load_scenario",
                                     "arguments": {"id": "multi_turn_base_0", "initial_config": {...},
                                                   "involved_classes": ["GorillaFileSystem", "TwitterAPI"]}}]
            metadata.allowed_tools == ["cd", "ls", ..., "post_tweet", ...]
    model:  cd(folder="document")  ->  '{"current_working_directory": "document"}'

It lists every function of bfcl-eval's eight multi-turn classes (GorillaFileSystem, MathAPI, MessageAPI,
TwitterAPI, TicketAPI, TradingBot, TravelAPI, VehicleControlAPI; plain Python inside the bfcl_eval wheel) with
the schemas BFCL gives a function-calling model (``convert_to_tool`` over its multi-turn function docs), and one
more tool, ``bfcl_load_scenario``, that the agent loop calls before the model's first turn (a row's
``metadata.tool_setup``; the model never sees it). A call runs as BFCL's own inference loop runs it:
``execute_multi_turn_func_call`` on instances of the row's classes, created at the first call from the row's
initial config (``_load_scenario``; long_context rows with BFCL's long-context padding) and kept for the rest of
the rollout, with the result text BFCL feeds back to the model ("Error during execution: ..." included).
Each rollout gets a process of its own, so no state is shared between rollouts.
"""

from __future__ import annotations


from typing import Any

from agentrl_bfcl import bfcl

SETUP = "bfcl_load_scenario"
CLASSES = ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot", "TravelAPI",
           "VehicleControlAPI")
_SETUP_SCHEMA = {"type": "object", "required": ["id", "initial_config", "involved_classes"], "properties": {
    "id": {"type": "string", "description": "the BFCL row id"},
    "initial_config": {"type": "object", "description": "the row's initial_config"},
    "involved_classes": {"type": "array", "items": {"type": "string"}},
    "long_context": {"type": "boolean", "description": "BFCL's long-context padding (multi_turn_long_context)"}}}


def function_schemas() -> list[dict]:
    """The OpenAI-style schemas of every function of the eight classes, as BFCL offers them."""
    bfcl.require()
    from bfcl_eval.constants.eval_config import MULTI_TURN_FUNC_DOC_PATH
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler.utils import convert_to_tool
    from bfcl_eval.utils import load_file

    docs = [doc for name in CLASSES for doc in load_file(MULTI_TURN_FUNC_DOC_PATH / MULTI_TURN_FUNC_DOC_FILE_MAPPING[name])]
    return [t["function"] for t in convert_to_tool(docs, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)]


class Environment:
    """One rollout's BFCL state: the scenario, then the calls run on it in order."""

    def __init__(self) -> None:
        self.scenario: dict[str, Any] | None = None

    def load(self, arguments: dict) -> str:
        if self.scenario is not None:
            raise ValueError(f"a scenario ({self.scenario['id']}) is already loaded in this rollout")
        unknown = [c for c in arguments["involved_classes"] if c not in CLASSES]
        if unknown:
            raise ValueError(f"unknown BFCL classes {unknown}; this server has {', '.join(CLASSES)}")
        self.scenario = {"id": str(arguments["id"]), "initial_config": arguments["initial_config"],
                         "involved_classes": list(arguments["involved_classes"]),
                         "long_context": bool(arguments.get("long_context", False))}
        self.call("", {})  # creates the instances from the initial config, as BFCL does before the first turn
        return f"loaded {self.scenario['id']}: {', '.join(self.scenario['involved_classes'])}"

    def call(self, name: str, arguments: dict) -> str:
        """BFCL's execution of one call (``name`` empty: none, only the instances are made)."""
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call
        from bfcl_eval.model_handler.utils import convert_to_function_call

        if self.scenario is None:
            raise ValueError(f"no BFCL scenario is loaded: the row's metadata.tool_setup must call {SETUP} first")
        calls = convert_to_function_call([{name: arguments}]) if name else []
        s = self.scenario
        results, _ = execute_multi_turn_func_call(calls, s["initial_config"], s["involved_classes"], bfcl.MODEL,
                                                  s["id"], long_context=s["long_context"])
        return results[0] if results else ""


def build_server(env: Environment | None = None):
    """The MCP server (low-level API: the schemas are BFCL's, not Python type hints)."""
    from mcp import types
    from mcp.server.lowlevel import Server

    env = env or Environment()
    tools = [types.Tool(name=f["name"], description=f.get("description", ""), input_schema=f["parameters"])
             for f in function_schemas()]
    tools.append(types.Tool(name=SETUP, description="Load a BFCL row's scenario (called by agentrl before the "
                            "model's first turn; not offered to the model)", input_schema=_SETUP_SCHEMA))

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params):
        arguments = dict(params.arguments or {})
        try:
            text = env.load(arguments) if params.name == SETUP else env.call(params.name, arguments)
        except Exception as exc:  # the call could not run at all: an error result the caller reads
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"Error: {exc}")], is_error=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("bfcl", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_server()

    async def run():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()


