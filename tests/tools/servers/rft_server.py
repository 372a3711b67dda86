"""A tool server with the Agent RFT tutorial's contract, in FastAPI: ``python rft_server.py --port N``.

    POST /search      {"arguments": {"query": "..."}, "call_id": "c0"}  ->  {"output": "...", "call_id": "c0"}
    POST /lookup      {"arguments": {"metric": "gross margin"}, ...}   ->  the figure for a metric
    POST /flaky       answers 503 the first ``FLAKY_FAILS`` times (per process), then like /search
    POST /crash       always 500
    POST /bad_request always 422 with a structured error the model should read
    POST /add, /subtract, /multiply   {"arguments": {"a": 2, "b": 3}}  ->  {"output": "5"}  (the demo model's tools)

Bearer auth: every route but /openapi.json wants ``Authorization: Bearer $RFT_TOKEN`` (default "secret"), checked
before the body; with ``RFT_AUTH=after-body`` only after the body was validated (a wrong token with a bad body: 422).
Errors the model caused are structured output with status 200 ({"output": null, "error": "...", "call_id"}),
as the tutorial asks, not 500. Every call is logged to ``$RFT_LOG`` (one JSON line: route, call_id, rollout id).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import uvicorn
from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel, Field

TOKEN = os.environ.get("RFT_TOKEN", "secret")
LOG = os.environ.get("RFT_LOG")
AUTH_FIRST = os.environ.get("RFT_AUTH", "first") != "after-body"
FIGURES = {"gross margin": "13.4%", "revenue": "842 million dollars", "headcount": "1,204"}
state = {"flaky": int(os.environ.get("FLAKY_FAILS", "2"))}

app = FastAPI(title="research tools")


@app.middleware("http")
async def bearer(request, call_next):
    """Every route but the OpenAPI document wants the token, checked before anything else (as a gateway does).
    With RFT_AUTH=after-body the routes check it themselves, after FastAPI validated the body (422 first)."""
    from fastapi.responses import JSONResponse

    if (AUTH_FIRST and request.url.path != "/openapi.json"
            and request.headers.get("authorization") != f"Bearer {TOKEN}"):
        return JSONResponse({"detail": "invalid or missing bearer token"}, status_code=401)
    return await call_next(request)


class SearchArgs(BaseModel):
    query: str = Field(description="what to search the filings for")


class SearchCall(BaseModel):
    arguments: SearchArgs
    call_id: str | None = None


class LookupArgs(BaseModel):
    metric: str = Field(description="a metric name, e.g. 'gross margin'")


class LookupCall(BaseModel):
    arguments: LookupArgs
    call_id: str | None = None


class AnyCall(BaseModel):
    arguments: dict[str, Any] = {}
    call_id: str | None = None


def _auth(authorization: str | None) -> None:
    if authorization != f"Bearer {TOKEN}":
        raise HTTPException(status_code=401, detail="invalid or missing bearer token")


def _log(route: str, call_id: str | None, rollout: str | None) -> None:
    if LOG:
        with open(LOG, "a") as fh:
            fh.write(json.dumps({"route": route, "call_id": call_id, "rollout_id": rollout}) + "\n")


def _search(query: str) -> str:
    hits = [f"{k}: {v}" for k, v in FIGURES.items() if any(w in k for w in query.lower().split())]
    return "; ".join(hits) or f"no filing mentions {query!r}"


@app.post("/search", description="Full-text search over the company's filings")
def search(call: SearchCall, authorization: str | None = Header(None), x_agentrl_rollout_id: str | None = Header(None)):
    _auth(authorization)
    _log("search", call.call_id, x_agentrl_rollout_id)
    if not call.arguments.query.strip():
        return {"output": None, "error": "query must not be empty", "call_id": call.call_id}
    return {"output": _search(call.arguments.query), "call_id": call.call_id}


@app.post("/lookup", description="The reported figure of one metric")
def lookup(call: LookupCall, authorization: str | None = Header(None), x_agentrl_rollout_id: str | None = Header(None)):
    _auth(authorization)
    _log("lookup", call.call_id, x_agentrl_rollout_id)
    figure = FIGURES.get(call.arguments.metric.lower().strip())
    if figure is None:
        return {"output": None, "error": f"unknown metric; known: {sorted(FIGURES)}", "call_id": call.call_id}
    return {"output": figure, "call_id": call.call_id}


class Pair(BaseModel):
    a: float = Field(description="the first number")
    b: float = Field(description="the second number")


class PairCall(BaseModel):
    arguments: Pair
    call_id: str | None = None


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


@app.post("/add", description="Add two numbers: a + b.")
def add(call: PairCall, x_agentrl_rollout_id: str | None = Header(None)):
    _log("add", call.call_id, x_agentrl_rollout_id)
    return {"output": _number(call.arguments.a + call.arguments.b), "call_id": call.call_id}


@app.post("/subtract", description="Subtract b from a: a - b.")
def subtract(call: PairCall, x_agentrl_rollout_id: str | None = Header(None)):
    _log("subtract", call.call_id, x_agentrl_rollout_id)
    return {"output": _number(call.arguments.a - call.arguments.b), "call_id": call.call_id}


@app.post("/multiply", description="Multiply two numbers: a * b.")
def multiply(call: PairCall, x_agentrl_rollout_id: str | None = Header(None)):
    _log("multiply", call.call_id, x_agentrl_rollout_id)
    return {"output": _number(call.arguments.a * call.arguments.b), "call_id": call.call_id}


@app.post("/flaky")
def flaky(call: AnyCall, authorization: str | None = Header(None), x_agentrl_rollout_id: str | None = Header(None)):
    _auth(authorization)
    _log("flaky", call.call_id, x_agentrl_rollout_id)
    if state["flaky"] > 0:
        state["flaky"] -= 1
        raise HTTPException(status_code=503, detail="warming up")
    return {"output": "ok", "call_id": call.call_id}


@app.post("/crash")
def crash(call: AnyCall, authorization: str | None = Header(None)):
    _auth(authorization)
    _log("crash", call.call_id, None)
    raise HTTPException(status_code=500, detail="internal error")


@app.post("/bad_request")
def bad_request(call: AnyCall, authorization: str | None = Header(None)):
    _auth(authorization)
    raise HTTPException(status_code=422, detail="argument 'year' must be between 2000 and 2030")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    uvicorn.run(app, host="127.0.0.1", port=parser.parse_args().port, log_level="warning")
