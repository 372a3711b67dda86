"""The probe MCP server (streamable HTTP) behind a door that pushes back: the first ``--fail`` ``tools/call``
requests are answered ``--status`` (429 or 503) with ``Retry-After: --retry-after``, the rest reach the server.
``python pushback_mcp.py --port N --fail 2 --status 429 --retry-after 1``; ``GET /calls`` lists the times
(epoch seconds) at which each tools/call request arrived."""

from __future__ import annotations

import argparse
import json
import time

import uvicorn
from probe_server import app as probe

CALLS: list[float] = []


def door(inner, fail: int, status: int, retry_after: str):
    async def asgi(scope, receive, send):
        if scope["type"] != "http":
            return await inner(scope, receive, send)
        if scope["method"] == "GET" and scope["path"] == "/calls":
            body = json.dumps(CALLS).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            return await send({"type": "http.response.body", "body": body})
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if scope["method"] == "POST" and b'"tools/call"' in body:
            CALLS.append(time.time())
            if len(CALLS) <= fail:
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"retry-after", retry_after.encode()), (b"content-type", b"text/plain")]})
                return await send({"type": "http.response.body", "body": b"slow down"})
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await inner(scope, replay, send)
    return asgi


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--fail", type=int, default=2)
    parser.add_argument("--status", type=int, default=429)
    parser.add_argument("--retry-after", default="1")
    parser.add_argument("--http", action="store_true")  # accepted for start_http's command line
    a = parser.parse_args()
    uvicorn.run(door(probe.streamable_http_app(), a.fail, a.status, a.retry_after), host="127.0.0.1", port=a.port,
                log_level="warning")
