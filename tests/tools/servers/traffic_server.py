"""A loopback tool endpoint for traffic tests: it records how many calls are in flight at once, answers after a
heavy-tailed latency, and pushes back (429 / 503 with Retry-After) when told to. ``python traffic_server.py
--port N [--p50 0.4 --p99 4 --p429 0.1 --retry-after 1]``.

    POST /tool   {"arguments": {...}, "call_id": "c0"}  ->  {"output": "ok <call_id>", "call_id": "c0"}
    POST /add, /subtract, /multiply  {"arguments": {"a": 2, "b": 3}}  ->  {"output": "5"}  (the demo model's tools)
    GET  /stats  ->  {"calls", "in_flight", "peak", "pushed_back", "answered", "times": {call_id: [t, ...]},
                      "route_peak": {route: most calls at once}}  (each route is a tool, a server of its own)

Latency: log-normal with the given median and 99th percentile (``--p50 0.4 --p99 4``: 400 ms and 4 s).
Push-back: a share ``--p429`` of the requests is answered 429 (``Retry-After: --retry-after``), spread evenly over
them by arrival (0.1: the 10th, 20th, ... request), not drawn by chance: a test of 32 calls sees 3 of them, never
none (a 0.9^32 = 3% chance with a coin per request, seen once in CI). A call can
also script its own: ``{"arguments": {"fail": 2, "status": 503, "retry_after": "1"}}`` answers the first 2
requests of that ``call_id`` with 503 and that Retry-After (seconds, or an HTTP date), then 200;
``{"arguments": {"sleep": 30}}`` answers after 30 s instead of the drawn latency.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import time
from collections import defaultdict

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

app = FastAPI()
OPTIONS = {"p50": 0.0, "p99": 0.0, "p429": 0.0, "retry_after": "1"}
STATE: dict = {}


def _reset() -> None:
    STATE.update(calls=0, in_flight=0, peak=0, pushed_back=0, answered=0, served=0, times=defaultdict(list),
                 route_in_flight=defaultdict(int), route_peak=defaultdict(int))


_reset()


def latency() -> float:
    p50, p99 = OPTIONS["p50"], OPTIONS["p99"]
    if p50 <= 0:
        return 0.0
    sigma = math.log(max(p99, p50) / p50) / 2.3263  # the 99th percentile of a standard normal
    return random.lognormvariate(math.log(p50), sigma)


OPS = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b}


@app.post("/{name}")
async def tool(name: str, request: Request):
    body = await request.json()
    args, call_id = body.get("arguments") or {}, str(body.get("call_id"))
    STATE["calls"] += 1
    STATE["times"][call_id].append(time.time())
    STATE["in_flight"] += 1
    STATE["peak"] = max(STATE["peak"], STATE["in_flight"])
    STATE["route_in_flight"][name] += 1
    STATE["route_peak"][name] = max(STATE["route_peak"][name], STATE["route_in_flight"][name])
    try:
        if len(STATE["times"][call_id]) <= int(args.get("fail", 0)):
            STATE["pushed_back"] += 1
            return JSONResponse({"error": "slow down"}, status_code=int(args.get("status", 429)),
                                headers={"Retry-After": str(args.get("retry_after", "1"))})
        await asyncio.sleep(float(args["sleep"]) if "sleep" in args else latency())
        STATE["served"] += 1  # requests that reached the shared push-back: every (1/p429)-th is pushed back
        if math.floor(STATE["served"] * OPTIONS["p429"]) > math.floor((STATE["served"] - 1) * OPTIONS["p429"]):
            STATE["pushed_back"] += 1
            return JSONResponse({"error": "slow down"}, status_code=429, headers={"Retry-After": OPTIONS["retry_after"]})
        STATE["answered"] += 1
        if name in OPS:
            try:
                return {"output": str(OPS[name](args["a"], args["b"])), "call_id": call_id}
            except (KeyError, TypeError) as exc:
                return {"output": None, "error": f"{name} needs numbers a and b ({exc})", "call_id": call_id}
        return {"output": f"ok {call_id}", "call_id": call_id}
    finally:
        STATE["in_flight"] -= 1
        STATE["route_in_flight"][name] -= 1


@app.get("/stats")
async def stats():
    return {**STATE, "times": dict(STATE["times"]), "route_in_flight": dict(STATE["route_in_flight"]),
            "route_peak": dict(STATE["route_peak"])}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")  # another only for a test cluster's own host address
    parser.add_argument("--p50", type=float, default=0.0)
    parser.add_argument("--p99", type=float, default=0.0)
    parser.add_argument("--p429", type=float, default=0.0)
    parser.add_argument("--retry-after", default="1")
    a = parser.parse_args()
    OPTIONS.update(p50=a.p50, p99=a.p99, p429=a.p429, retry_after=a.retry_after)
    # a held call (``sleep``: 600) must not keep a SIGTERM waiting for it: the tests end the server by its pid
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning", backlog=4096, timeout_graceful_shutdown=1)
