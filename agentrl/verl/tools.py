"""verl's own tool mechanism naming agentrl's tools: MCP servers and Agent-RFT endpoints for verl's
``tool_agent`` loop, through ``actor_rollout_ref.rollout.multi_turn.tool_config_path``.

    python -m agentrl.verl.tools '[calculator]' -o tools.yaml      # any value agentrl.tools takes
    python -m verl.trainer.main_ppo ... actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent \\
        actor_rollout_ref.rollout.multi_turn.tool_config_path=$PWD/tools.yaml

The file lists one verl tool per agentrl tool (``class_name: agentrl.verl.tools.AgentrlTool``), with the
schema the server listed when the file was written. Each call goes through agentrl's ToolHub (retries, circuit
breaker, result truncation; one session per trajectory for stateful servers). verl's loop has no notion of a
rollout that could not be scored: a tool server that is down reaches the model as an error text, where
agentrl's own loop (``default_agent_loop=agentrl``) marks the rollout unscorable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from typing import Any, Optional

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

_hubs: dict[tuple[str, int], Any] = {}


def _hub(tools: Any, allow: Any):
    """One ToolHub per tools entry and event loop (MCP sessions belong to the loop that opened them)."""
    from agentrl.tools import ToolHub

    key = (json.dumps([tools, allow], sort_keys=True, default=str), id(asyncio.get_running_loop()))
    if key not in _hubs:
        _hubs[key] = ToolHub.from_config(tools, allow=allow)
    return _hubs[key]


class AgentrlTool(BaseTool):
    """One tool of agentrl's ``tools`` (``config.tools``: the value ``agentrl.tools`` takes) as a verl tool."""

    def __init__(self, config: dict, tool_schema: Optional[OpenAIFunctionToolSchema]) -> None:
        if tool_schema is None:
            raise ValueError("agentrl.verl.tools.AgentrlTool needs its tool_schema in the tool config; write the "
                             "file with `python -m agentrl.verl.tools TOOLS -o tools.yaml`")
        super().__init__(config, tool_schema)
        self.tools = config["tools"]
        self.allow = config.get("tool_allow")
        self.sessions: dict[str, Any] = {}

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        from agentrl.tools.session import RolloutSession

        instance_id = instance_id or f"verl-{uuid.uuid4().hex[:16]}"
        self.sessions[instance_id] = RolloutSession(_hub(self.tools, self.allow), instance_id)
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        from agentrl.tools import ToolCall, ToolInfraError

        if instance_id not in self.sessions:
            await self.create(instance_id)
        try:
            result = await self.sessions[instance_id].call(ToolCall(id="c0", name=self.name, arguments=parameters))
        except ToolInfraError as exc:
            return ToolResponse(text=f"error: the tool could not be reached: {exc}"), 0.0, {"infra_error": 1}
        return ToolResponse(text=result.content), 0.0, {"is_error": int(result.is_error)}

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        session = self.sessions.pop(instance_id, None)
        if session is not None:
            await session.aclose()


async def _schemas(tools: Any, allow: Any) -> list[dict]:
    from agentrl.tools import ToolHub

    hub = ToolHub.from_config(tools, allow=allow)
    try:
        async with hub.rollout("agentrl-verl-tools") as session:
            return await session.tool_schemas()
    finally:
        await hub.aclose()


def tool_config(tools: Any, allow: Any = None) -> dict:
    """verl's tool config for ``tools`` (asks every server for its tools now)."""
    config = {"type": "native", "tools": tools}
    if allow:
        config["tool_allow"] = allow
    return {"tools": [{"class_name": "agentrl.verl.tools.AgentrlTool", "config": json.loads(json.dumps(config)),
                       "tool_schema": schema}
                      for schema in asyncio.run(_schemas(tools, allow))]}


def main(argv: list[str] | None = None) -> int:
    import yaml

    parser = argparse.ArgumentParser(prog="python -m agentrl.verl.tools",
                                     description="write verl's tool_config_path file for agentrl's tools")
    parser.add_argument("tools", help="what agentrl.tools takes: '[calculator]', an mcpServers JSON file, ...")
    parser.add_argument("-o", "--out", help="the YAML file to write (default: standard output)")
    args = parser.parse_args(argv)
    text = yaml.safe_dump(tool_config(yaml.safe_load(args.tools)), sort_keys=False)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
