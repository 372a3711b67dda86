"""The agentrl-calculator server as users start it (``--delay`` and all), with each call's wait written down by
the server itself: ``traced_calculator.py TRACE -- ARGS`` appends one JSON line to TRACE when a call starts its
``--delay`` wait and one when the wait ends, in the order the server's event loop ran them:

    {"event": "enter", "seconds": 1.5, "at": 12.01}
    {"event": "exit", "seconds": 1.5, "at": 13.52}

(``at`` is the server's monotonic clock). Only the server module's ``asyncio.sleep`` is wrapped; the tools,
their schemas and the MCP transport are the plugin's own.
"""

import asyncio
import json
import sys
import time
import types

from agentrl_calculator import server

trace_path, _, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
trace = open(trace_path, "a", buffering=1)  # one line a write: the test reads it after the server exits


async def traced_sleep(seconds: float) -> None:
    trace.write(json.dumps({"event": "enter", "seconds": seconds, "at": time.monotonic()}) + "\n")
    await asyncio.sleep(seconds)
    trace.write(json.dumps({"event": "exit", "seconds": seconds, "at": time.monotonic()}) + "\n")


server.asyncio = types.SimpleNamespace(sleep=traced_sleep)
server.main(argv)
