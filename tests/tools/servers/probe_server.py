"""A test MCP server that shows what it received and misbehaves on request (stdio, or --http --port N)."""

import argparse
import os
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("probe", log_level="WARNING")
_count = {"n": 0}


@app.tool()
def echo_context(ctx: Context) -> dict:
    """The request _meta and HTTP headers this call arrived with."""
    headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
    return {"meta": dict(ctx.request_context.meta or {}), "rollout_header": headers.get("x-agentrl-rollout-id")}


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers (clashes with the calculator's add on purpose)."""
    return a + b


@app.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@app.tool()
def count() -> int:
    """How many times this server process has been asked to count (state kept per process)."""
    _count["n"] += 1
    return _count["n"]


@app.tool()
async def slow(marker: str, seconds: float) -> str:
    """Touch the file `marker`, then wait `seconds` and answer."""
    import anyio

    Path(marker).write_text(str(os.getpid()))
    await anyio.sleep(seconds)
    return "slept"


_in_flight: dict = {}


@app.tool()
async def overlap(tag: str, seconds: float) -> int:
    """Wait `seconds`; answer the most calls with this `tag` that were running at once so far."""
    import anyio

    now, peak = _in_flight.get(tag, (0, 0))
    _in_flight[tag] = (now + 1, max(peak, now + 1))
    await anyio.sleep(seconds)
    now, peak = _in_flight[tag]
    _in_flight[tag] = (now - 1, peak)
    return peak


@app.tool()
async def hang() -> str:
    """Never answers."""
    import anyio

    await anyio.sleep(3600)
    return "unreachable"


@app.tool()
def crash(message: str) -> str:
    """Write ``message`` to stderr and exit at once with status 3, as a server that hits a fatal error does."""
    import sys

    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    os._exit(3)


@app.tool()
def big(n: int) -> str:
    """A text of n characters."""
    return "x" * n


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.http:
        app.run("streamable-http", host="127.0.0.1", port=args.port)
    else:
        app.run()
