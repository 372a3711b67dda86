"""verl's tool_config_path naming agentrl's tools: the file `python -m agentrl.verl.tools` writes, loaded by
verl's own loader, and its tools called as verl's tool_agent loop calls them, against the real calculator
MCP server."""

from __future__ import annotations

import asyncio
import subprocess
import sys


def test_verl_loads_agentrl_tools_from_the_written_file_and_calls_the_mcp_server(tmp_path):
    path = tmp_path / "tools.yaml"
    out = subprocess.run([sys.executable, "-m", "agentrl.verl.tools", "[calculator]", "-o", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]

    from verl.tools.tool_registry import load_all_tools

    tools = {t.name: t for t in load_all_tools(str(path), None)}
    assert {"add", "subtract", "multiply"} <= set(tools)
    assert tools["add"].tool_schema.function.parameters.required == ["a", "b"]

    async def trajectory():
        add = tools["add"]
        iid, _ = await add.create()
        try:
            good, _, metrics = await add.execute(iid, {"a": 37, "b": 48})
            bad, _, bad_metrics = await add.execute(iid, {"a": "x"})
        finally:
            await add.release(iid)
        return good, metrics, bad, bad_metrics

    good, metrics, bad, bad_metrics = asyncio.run(trajectory())
    assert good.text.strip() == "85" and metrics == {"is_error": 0}
    assert bad_metrics == {"is_error": 1} and bad.text  # an error the model can read, not an exception
