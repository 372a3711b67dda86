"""The one module that imports the MCP SDK: a connection to one server, stdio or streamable HTTP.

A :class:`Connection` runs the SDK client inside a task of its own, so it can be opened by one rollout,
used concurrently by many, and closed from anywhere (anyio scopes must exit in the task that entered them).
Failures are sorted here into two kinds the hub acts on:

* :class:`TransportFailure` -- the server could not be reached, died, answered 5xx or 429, or the connection
  closed. The hub retries these and counts them toward the circuit breaker.
* anything the server answered (a result with ``isError``, or a JSON-RPC error such as "unknown tool")
  is a :class:`CallOutcome` the model gets to read.

The rollout id travels in the request ``_meta`` (``agentrl/rollout_id``) to every server, and as the
``X-Agentrl-Rollout-Id`` header to HTTP servers (read from a context variable, because one HTTP session
is shared by concurrent rollouts).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import shutil
import sys
import tempfile
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_TIMEOUT

from agentrl.tools.config import ServerSpec
from agentrl.tools.pushback import PUSHBACK_STATUSES, retry_after_seconds
from agentrl.tools.types import ROLLOUT_HEADER, CallOutcome, ToolSpec, TransportFailure  # noqa: F401

META_KEY = "agentrl/rollout_id"
CALL_KEY = "agentrl/call_id"
CURRENT_ROLLOUT: contextvars.ContextVar[str | None] = contextvars.ContextVar("agentrl_rollout_id", default=None)

# JSON-RPC codes this module invents for HTTP failures, so they reach us through the SDK unmistakably.
_HTTP_5XX = -32050
_HTTP_TRANSPORT = -32051
_HTTP_429 = -32052
_HTTP_AUTH = -32053
_INFRA_CODES = {_HTTP_5XX: "http_5xx", _HTTP_429: "rate_limited", _HTTP_AUTH: "unauthorized", _HTTP_TRANSPORT: "transport", CONNECTION_CLOSED: "connection_closed",
                REQUEST_TIMEOUT: "timeout"}


def _other_python(spec: ServerSpec, tail: str) -> str:
    """For a stdio server started as a bare ``python`` that missed a module: which Python that was. Run from
    ``.venv/bin/agentrl`` without activating the environment, ``python`` is the one on PATH, not agentrl's."""
    command = spec.command or ""
    if command not in ("python", "python3") or "No module named" not in tail:
        return ""
    path = (spec.env or {}).get("PATH", os.environ.get("PATH"))
    found = shutil.which(command, path=path)
    if found and os.path.realpath(found) == os.path.realpath(sys.executable):
        return ""
    return (f"\n  {command!r} on PATH is {found or 'missing'}, not the Python agentrl runs in ({sys.executable}): "
            f"to run the server with agentrl's packages, write `command: {sys.executable}` (or activate that "
            f"environment before running agentrl)")


class _RolloutHeaderTransport(httpx2.AsyncBaseTransport):
    """Adds the rollout header; turns 5xx, 429 and connection errors into JSON-RPC errors the SDK passes on."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner
        self.last_refusal: str = ""  # the last answer that was not MCP (status, content type), for the error message

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        rollout = CURRENT_ROLLOUT.get()
        if rollout is not None:
            request.headers[ROLLOUT_HEADER] = rollout
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            request_id = _jsonrpc_id(request)
            if request_id is None:
                raise
            return _error_response(request, request_id, _HTTP_TRANSPORT, f"{type(exc).__name__}: {exc}")
        status, ctype = response.status_code, response.headers.get("content-type", "")
        if request.method == "POST" and (status >= 400 or not ctype.startswith(("application/json", "text/event-stream"))):
            self.last_refusal = f"HTTP {status}" + (f" ({ctype.split(';')[0]})" if ctype else "")
        if status in (401, 403):
            request_id = _jsonrpc_id(request)
            if request_id is not None:
                await response.aclose()
                word = "401 Unauthorized" if status == 401 else "403 Forbidden"
                has = any(k.lower() == "authorization" for k in request.headers.keys())
                hint = ("the token in its Authorization header was refused; check headers.Authorization (and the "
                        "${VAR} it reads)" if has else "no Authorization header was sent; add \"headers\": "
                        "{\"Authorization\": \"Bearer ${TOKEN}\"} to the server's entry")
                return _error_response(request, request_id, _HTTP_AUTH, f"HTTP {word} from {request.url}: {hint}")
        if response.status_code >= 500 or response.status_code == 429:  # retried by the hub; other 4xx go to the model
            request_id = _jsonrpc_id(request)
            if request_id is not None:
                await response.aclose()
                code = _HTTP_429 if response.status_code == 429 else _HTTP_5XX
                after = response.headers.get("retry-after")
                data = {"status": response.status_code, "retry_after": retry_after_seconds(after)}
                return _error_response(request, request_id, code, f"HTTP {response.status_code} from {request.url}"
                                       + (f" (Retry-After: {after})" if after else ""), data)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _jsonrpc_id(request: httpx2.Request) -> Any:
    """The JSON-RPC id of a POSTed request (None for GET/DELETE and notifications)."""
    if request.method != "POST":
        return None
    try:
        body = json.loads(request.content or b"null")
    except (ValueError, httpx2.RequestNotRead):
        return None
    return body.get("id") if isinstance(body, dict) else None


def _error_response(request: httpx2.Request, request_id: Any, code: int, message: str, data: Any = None) -> httpx2.Response:
    error = {"code": code, "message": message, **({"data": data} if data is not None else {})}
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return httpx2.Response(502, json=body, request=request)


def _transport(spec: ServerSpec, rollout_id: str | None, errlog, http_transport: "_RolloutHeaderTransport") -> Any:
    if spec.transport == "stdio":
        env = dict(spec.env) or None
        params = StdioServerParameters(command=spec.command, args=list(spec.args), env=env, cwd=spec.cwd)
        return stdio_client(params, errlog=errlog)
    headers = dict(spec.headers)
    if rollout_id is not None:
        headers[ROLLOUT_HEADER] = rollout_id
    http = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(spec.connect_timeout, read=max(spec.timeout, 1.0) + 5.0),
        transport=http_transport,
    )
    return _owned_http(spec.url, http)


class _owned_http:
    """streamable_http_client over our httpx2 client, closing that client afterwards."""

    def __init__(self, url: str, http: httpx2.AsyncClient) -> None:
        self._cm = streamable_http_client(url, http_client=http)
        self._http = http

    async def __aenter__(self):
        await self._http.__aenter__()
        try:
            return await self._cm.__aenter__()
        except BaseException:
            await self._http.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc):
        try:
            return await self._cm.__aexit__(*exc)
        finally:
            await self._http.__aexit__(None, None, None)


def classify(exc: BaseException) -> TransportFailure | None:
    """A TransportFailure for infrastructure errors; None for an answer the model should see."""
    if isinstance(exc, TransportFailure):
        return exc
    if isinstance(exc, MCPError):
        if exc.code == INVALID_REQUEST and "Session terminated" in str(exc):  # the HTTP server restarted
            return TransportFailure("session_lost", str(exc))
        kind = _INFRA_CODES.get(exc.code)
        data = exc.data if isinstance(exc.data, dict) else {}
        return TransportFailure(kind, str(exc), pushback=data.get("status") in PUSHBACK_STATUSES,
                                retry_after=data.get("retry_after")) if kind else None
    if isinstance(exc, (OSError, EOFError, httpx2.TransportError, asyncio.IncompleteReadError)):
        return TransportFailure("transport", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, BaseExceptionGroup):
        inner = [classify(e) for e in exc.exceptions]
        return next((i for i in inner if i), TransportFailure("transport", str(exc)))
    return None


def _leaf(exc: BaseException) -> BaseException:
    """The first innermost exception of nested exception groups (anyio wraps everything in them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _one_line(exc: BaseException) -> str:
    leaf = _leaf(exc)
    text = str(leaf).splitlines()[0][:300] if str(leaf) else ""
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def _flatten(result: Any) -> str:
    parts = []
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{kind} {getattr(block, 'mime_type', '') or ''}]".replace(" ]", "]"))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


class Connection:
    """One MCP session to one server, run by a task of its own. Open with :meth:`start`, end with :meth:`close`."""

    def __init__(self, spec: ServerSpec, rollout_id: str | None = None) -> None:
        self.spec = spec
        self.rollout_id = rollout_id
        self._client: Client | None = None
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self._http_transport = _RolloutHeaderTransport(httpx2.AsyncHTTPTransport())
        self._errlog = None
        self.died = ""  # why a live session ended, when it ended on its own (the server exited)

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and self._client is not None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"agentrl-mcp-{self.spec.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.spec.connect_timeout)
        except asyncio.TimeoutError:
            self._ready.cancel()  # nobody waits for it any more: the failure below says what happened
            what = ("the process started but never answered MCP's initialize on its stdout"
                    if self.spec.transport == "stdio" else f"{self.spec.url} accepted the connection but never answered")
            tail = self.stderr_tail()
            await self.close()
            raise TransportFailure("connect_timeout", f"no MCP handshake within {self.spec.connect_timeout}s: {what}"
                                   f"{tail}") from None
        except BaseException:
            if not self._ready.done():
                self._ready.cancel()
            await self.close()
            raise

    def stderr_tail(self, lines: int = 8, chars: int = 1500) -> str:
        """The last lines a stdio server wrote to stderr, for an error message ("" when it wrote none)."""
        log = self._errlog
        if log is None or log.closed:
            return ""
        try:
            log.flush()
            size = os.fstat(log.fileno()).st_size
            log.seek(max(0, size - 64_000))
            text = log.read()
        except (OSError, ValueError):
            return ""
        tail = "\n".join(text.strip().splitlines()[-lines:])[-chars:]
        return "; the server's stderr ends with:\n    " + tail.replace("\n", "\n    ") if tail.strip() else ""

    async def _run(self) -> None:
        # Server chatter would flood training logs: a stdio server's stderr goes to a temporary file whose
        # last lines are quoted when the server fails to start or dies. AGENTRL_MCP_STDERR=1 shows it live.
        if self.spec.transport != "stdio":
            errlog = None
        elif os.environ.get("AGENTRL_MCP_STDERR"):
            errlog = sys.stderr
        else:  # appending, so that it can be emptied under the writing server
            errlog = self._errlog = tempfile.TemporaryFile("a+", prefix="agentrl-mcp-stderr-")
        try:
            async with Client(_transport(self.spec, self.rollout_id, errlog, self._http_transport), cache=None) as client:
                self._client = client
                if not self._ready.done():
                    self._ready.set_result(None)
                if self._errlog is not None:  # start-up chatter is no longer needed: keep the file small
                    self._errlog.truncate(0)
                await self._stop.wait()
        except BaseException as exc:  # handed to start(), or ends a live connection (a crash)
            if not self._ready.done():
                self._ready.set_exception(self._connect_failure(exc))
            elif not self._stop.is_set():
                self.died = f"the session ended ({_one_line(exc)})"
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._client = None
            if self._stop.is_set():
                self._close_errlog()

    def _close_errlog(self) -> None:
        log, self._errlog = self._errlog, None
        if log is not None:
            log.close()

    def _connect_failure(self, exc: BaseException) -> TransportFailure:
        """One line for a failed handshake: refused, unauthorized, or a URL that is not an MCP server;
        for a stdio server, what it wrote to stderr (node's "no such directory", a Python traceback)."""
        failure = classify(exc)
        if self.spec.transport == "stdio":
            command = " ".join([self.spec.command or "", *self.spec.args])
            leaf = _leaf(exc)
            if isinstance(leaf, FileNotFoundError):
                return TransportFailure("transport", f"cannot start {command!r}: {leaf.strerror}: {leaf.filename}")
            tail = self.stderr_tail()
            return TransportFailure((failure.kind if failure else "connect"),
                                    f"{command!r} exited or closed its stdout before MCP's handshake "
                                    f"({_one_line(exc)})" + (tail or "; it wrote nothing to stderr")
                                    + _other_python(self.spec, tail))
        if failure is not None and failure.kind in ("unauthorized", "http_5xx", "rate_limited", "timeout"):
            return failure
        if failure is not None and failure.kind == "transport" and not self._http_transport.last_refusal:
            return TransportFailure("transport", f"cannot reach {self.spec.url or self.spec.command}: {failure}")
        leaf = _leaf(exc)
        if isinstance(leaf, (OSError, httpx2.TransportError)):
            where = self.spec.url or self.spec.command
            return TransportFailure("transport", f"cannot reach {where}: {type(leaf).__name__}: {leaf}")
        if self.spec.transport == "http" and (self._http_transport.last_refusal or not isinstance(leaf, OSError)):
            got = self._http_transport.last_refusal or f"{type(leaf).__name__}: {str(leaf).splitlines()[0][:160] if str(leaf) else ''}"
            return TransportFailure("not_mcp", f"{self.spec.url} did not answer as an MCP server (streamable HTTP): "
                                    f"{got} on initialize. Check the URL (MCP servers usually end in /mcp); a plain "
                                    f"HTTP endpoint is declared as a function tool: [{{\"name\", \"url\", \"headers\"}}]")
        return failure or TransportFailure("connect", _one_line(leaf))

    async def close(self) -> None:
        """End the session (kills a stdio server). Safe to call twice, and while cancelled."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            self._close_errlog()
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), 10.0)
        except asyncio.TimeoutError:  # a server that will not stop: cancel, which kills a stdio process tree
            task.cancel()
            await asyncio.wait({task}, timeout=5.0)
        except asyncio.CancelledError:
            task.cancel()
            raise
        except Exception:  # the session ended badly; it is closed all the same
            pass

    def _live(self) -> Client:
        if not self.alive:
            raise TransportFailure("connection_closed", "the server connection is closed (the server may have exited)")
        return self._client

    async def list_tools(self) -> list[ToolSpec]:
        tools, cursor = [], None
        try:
            while True:
                page = await self._live().list_tools(cursor=cursor)
                tools += [ToolSpec(t.name, t.description or "", dict(t.input_schema or {})) for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    return tools
        except Exception as exc:
            raise (classify(exc) or TransportFailure("list_tools", f"{type(exc).__name__}: {exc}")) from exc

    async def call_tool(self, name: str, arguments: dict, rollout_id: str | None, call_id: str | None = None) -> CallOutcome:
        meta = {META_KEY: rollout_id} if rollout_id is not None else None
        if meta is not None and call_id:
            meta[CALL_KEY] = call_id
        token = CURRENT_ROLLOUT.set(rollout_id)
        try:
            result = await self._live().call_tool(name, arguments, meta=meta)
        except Exception as exc:
            failure = classify(exc)
            if failure is not None:
                raise failure from exc
            if isinstance(exc, MCPError):  # a protocol-level answer, e.g. unknown tool or invalid params
                return CallOutcome(f"Error: {exc}", True)
            raise TransportFailure("client", f"{type(exc).__name__}: {exc}") from exc
        finally:
            CURRENT_ROLLOUT.reset(token)
        return CallOutcome(_flatten(result), bool(result.is_error))
