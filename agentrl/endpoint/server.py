"""The OpenAI-compatible endpoint: one loopback HTTP server per process, one address per rollout.

    server = shared_server()                       # started on first use: 127.0.0.1, a free port, its own thread
    with server.rollout(handler) as (base_url, api_key):
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key)
        await client.chat.completions.create(model="policy", messages=[...], tools=[...])

``handler`` is the rollout behind the address: ``await handler.complete(request) -> Answer`` (a
:class:`agentrl.endpoint.shapes.ChatRequest` in, an :class:`~agentrl.endpoint.shapes.Answer` out) run on the
event loop that opened the rollout, one request at a time. Each rollout has its own key, in the URL
(``/rollouts/KEY/v1``) and as the bearer key, so concurrent rollouts never mix; a request naming no open
rollout gets OpenAI's 404 body.

Routes: ``POST /v1/chat/completions`` and ``POST /v1/responses`` (non-streaming, and ``stream: true`` as
server-sent events; :mod:`agentrl.endpoint.responses` reads the second into the same request), ``GET /v1/models``;
all also under ``/rollouts/KEY``. A rollout keeps its responses' conversations for ``previous_response_id``. Errors are OpenAI's ``{"error": {...}}`` bodies.
The server runs in a thread of its own, so uvicorn never takes the process's signals.
"""


import asyncio
import contextlib
import json
import secrets
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Protocol

from agentrl.endpoint.responses import read_responses, response_events, response_object, served_message
from agentrl.endpoint.shapes import Answer, ChatRequest, RequestError, chunks, completion, error_body, read_request

MODEL_NAME = "policy"  # what /v1/models lists; any model name in a request is served by the policy


class Handler(Protocol):
    async def complete(self, request: ChatRequest) -> Answer: ...


@dataclass
class _Open:
    handler: Handler
    loop: asyncio.AbstractEventLoop
    lock: asyncio.Lock  # one request at a time per rollout: its token stream is sequential
    responses: dict = field(default_factory=dict)  # response id -> its conversation (previous_response_id)


class EndpointServer:
    """The loopback server and its open rollouts."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        import uvicorn

        self._open: dict[str, _Open] = {}
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind((host, 0))
        self._sock.listen(512)
        self.host, self.port = self._sock.getsockname()[:2]
        self._server = uvicorn.Server(uvicorn.Config(self.app(), log_level="warning", lifespan="off",
                                                     access_log=False, timeout_keep_alive=60))
        self._thread = threading.Thread(target=self._serve, name="agentrl-endpoint", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._sock]))

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @contextlib.contextmanager
    def rollout(self, handler: Handler) -> Iterator[tuple[str, str]]:
        """Open an address for one rollout on the running event loop: ``(base_url, api_key)``; closed on exit."""
        key = f"rollout-{uuid.uuid4().hex}{secrets.token_hex(4)}"
        self._open[key] = _Open(handler, asyncio.get_running_loop(), asyncio.Lock())
        try:
            yield f"{self.base_url}/rollouts/{key}/v1", key
        finally:
            self._open.pop(key, None)

    def open_rollouts(self) -> int:
        return len(self._open)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()

    # ------------------------------------------------------------------ the app

    def app(self) -> Any:
        from fastapi import FastAPI, Request
        from fastapi.responses import JSONResponse, StreamingResponse

        app = FastAPI(title="agentrl rollout endpoint", docs_url=None, redoc_url=None, openapi_url=None)

        def refused(exc: RequestError) -> JSONResponse:
            return JSONResponse(exc.body(), status_code=exc.status)

        def find(key: Optional[str], request: Request) -> _Open:
            if key is None:
                auth = request.headers.get("authorization") or ""
                key = auth[7:].strip() if auth.lower().startswith("bearer ") else None
            if not key:
                raise RequestError("no rollout named: use the base_url and api_key agentrl passed to run()",
                                   status=401, code="invalid_api_key", kind="authentication_error")
            found = self._open.get(key)
            if found is None:
                raise RequestError(f"rollout {key[:24]!r} is not open (it finished, or the key is not one agentrl "
                                   f"gave); {len(self._open)} rollouts are open here", status=404,
                                   code="rollout_not_found", kind="not_found_error")
            return found

        async def answer_for(request: Request, key: Optional[str], read: Any) -> Any:
            """(the opened rollout, the JSON body, what ``read`` made of it, the answer) or an error response."""
            try:
                opened = find(key, request)
                try:
                    body = json.loads(await request.body())
                except json.JSONDecodeError as exc:
                    raise RequestError(f"the body is not JSON ({exc.msg} at column {exc.colno})") from None
                read_as = read(body, opened)
                chat_request = read_as[0] if isinstance(read_as, tuple) else read_as
                answer = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
                    _one_at_a_time(opened, chat_request), opened.loop))
            except RequestError as exc:
                return refused(exc)
            except Exception as exc:  # the rollout side failed: a 500 in OpenAI's shape, with the reason
                return JSONResponse(error_body(500, f"agentrl could not sample this turn: {type(exc).__name__}: {exc}",
                                               kind="server_error"), status_code=500)
            return opened, body, read_as, answer

        async def chat(request: Request, key: Optional[str]) -> Any:
            got = await answer_for(request, key, lambda body, _opened: read_request(body))
            if not isinstance(got, tuple):
                return got
            _, _, chat_request, answer = got
            request_id = f"chatcmpl-{uuid.uuid4().hex}"
            if chat_request.stream:
                events = chunks(request_id, chat_request.model, answer, chat_request.include_usage)
                return StreamingResponse(iter(events), media_type="text/event-stream")
            return JSONResponse(completion(request_id, chat_request.model, answer))

        async def responses(request: Request, key: Optional[str]) -> Any:
            got = await answer_for(request, key, lambda body, opened: read_responses(body, opened.responses.get))
            if not isinstance(got, tuple):
                return got
            opened, body, (chat_request, conversation), answer = got
            response_id = f"resp_{uuid.uuid4().hex}"
            opened.responses[response_id] = conversation + [served_message(answer)]
            if chat_request.stream:
                return StreamingResponse(iter(response_events(response_id, body, answer)),
                                         media_type="text/event-stream")
            return JSONResponse(response_object(response_id, body, answer))

        async def models(request: Request, key: Optional[str]) -> Any:
            try:
                find(key, request)
            except RequestError as exc:
                return refused(exc)
            return {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "created": 0,
                                                "owned_by": "agentrl"}]}

        @app.post("/v1/chat/completions")
        async def chat_by_key(request: Request):
            return await chat(request, None)

        @app.post("/rollouts/{key}/v1/chat/completions")
        async def chat_by_path(key: str, request: Request):
            return await chat(request, key)

        @app.post("/v1/responses")
        async def responses_by_key(request: Request):
            return await responses(request, None)

        @app.post("/rollouts/{key}/v1/responses")
        async def responses_by_path(key: str, request: Request):
            return await responses(request, key)

        @app.get("/v1/models")
        async def models_by_key(request: Request):
            return await models(request, None)

        @app.get("/rollouts/{key}/v1/models")
        async def models_by_path(key: str, request: Request):
            return await models(request, key)

        @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE"])
        async def unknown(path: str):
            return JSONResponse(error_body(404, f"/{path} is not served here: the endpoint serves "
                                                f"POST /v1/chat/completions, POST /v1/responses and "
                                                f"GET /v1/models", kind="not_found_error",
                                           code="unknown_url"), status_code=404)

        return app


async def _one_at_a_time(opened: _Open, request: ChatRequest) -> Answer:
    async with opened.lock:
        return await opened.handler.complete(request)


_shared: Optional[EndpointServer] = None
_shared_lock = threading.Lock()


def shared_server() -> EndpointServer:
    """This process's endpoint, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = EndpointServer()
        return _shared
