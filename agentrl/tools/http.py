"""Plain HTTP function tools, the Agent RFT contract: one bearer-authenticated endpoint per tool.

    POST http://127.0.0.1:8000/search
    Authorization: Bearer ...            (from the entry's headers, ``${ENV}`` expanded)
    X-Agentrl-Rollout-Id: r-3f2a...      (the rollout id, on every call)
    {"arguments": {"query": "revenue"}, "call_id": "c0"}
    ->  200 {"output": "...", "call_id": "c0"}

What the model reads and what makes the rollout unscorable:

* 200 with ``output`` -> the output (JSON other than a string is shown as JSON); 200 with ``error`` -> a tool error.
* 400-499 (but 401, 403, 408, 429) -> a tool error: the body is shown to the model, which can fix its arguments.
* 401 / 403 -> :class:`TransportFailure` ``unauthorized``, not retried: the token is wrong, not the model.
* 5xx, 408, 429, refused connections, timeouts -> :class:`TransportFailure`, retried by the hub (3 times by
  default) and then the rollout is unscorable. 429 and 503 are push-back: retried after their ``Retry-After``
  (seconds or an HTTP date) for as long as the call's ``deadline`` allows (:mod:`agentrl.tools.pushback`).

A :class:`FunctionConnection` has the interface of :class:`agentrl.tools.client.Connection`, so the hub gives it
the same concurrency cap, rate cap (``rate_limit`` calls per second), timeout, retries and circuit breaker.
The tool's schema comes from the entry's ``parameters`` or from an OpenAPI document (the request body's
``arguments`` property of ``POST <path>``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from agentrl.tools.config import ServerSpec, ToolConfigError
from agentrl.tools.pushback import PUSHBACK_STATUSES, retry_after_seconds
from agentrl.tools.types import ROLLOUT_HEADER, CallOutcome, ToolSpec, TransportFailure, refused

MAX_BODY = 1_000_000  # the Agent RFT contract's 1 MB payload


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _openapi_schema(spec: ServerSpec, doc: Any) -> tuple[dict, str]:
    """``(parameters, description)`` of ``POST <url path>`` in an OpenAPI document."""
    path = urlsplit(spec.url).path or "/"
    paths = doc.get("paths", {}) if isinstance(doc, dict) else {}
    op = next((ops.get("post") for p, ops in paths.items() if p.rstrip("/") == path.rstrip("/") and isinstance(ops, dict)), None)
    if not isinstance(op, dict):
        raise ToolConfigError(f"function tool {spec.name!r}: the OpenAPI document {spec.openapi!r} has no POST {path}; "
                              f"it has: {', '.join(sorted(paths)) or 'no paths'}")
    schema = (((op.get("requestBody") or {}).get("content") or {}).get("application/json") or {}).get("schema") or {}
    schema = _deref(schema, doc)
    props = schema.get("properties") or {}
    params = _deref(props["arguments"], doc) if "arguments" in props else schema
    return params or {"type": "object", "properties": {}}, op.get("description") or op.get("summary") or ""


def _deref(schema: Any, doc: dict, depth: int = 0) -> Any:
    """Inline ``$ref``s (FastAPI writes the request models under components/schemas)."""
    if depth > 20:
        return schema
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = doc
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            return _deref(target, doc, depth + 1)
        return {k: _deref(v, doc, depth + 1) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_deref(v, doc, depth + 1) for v in schema]
    return schema


class FunctionConnection:
    """Calls to one HTTP function tool, over one pooled httpx client."""

    def __init__(self, spec: ServerSpec, rollout_id: str | None = None) -> None:
        self.spec = spec
        self.rollout_id = rollout_id
        self._http: httpx.AsyncClient | None = None
        self._tool: ToolSpec | None = None

    @property
    def alive(self) -> bool:
        return self._http is not None and not self._http.is_closed

    async def start(self) -> None:
        self._http = httpx.AsyncClient(headers=dict(self.spec.headers), timeout=httpx.Timeout(
            self.spec.timeout + 5.0, connect=self.spec.connect_timeout))

    async def close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def list_tools(self) -> list[ToolSpec]:
        if self._tool is None:
            params, description = self.spec.parameters, self.spec.description
            if params is None and self.spec.openapi:
                params, found = _openapi_schema(self.spec, await self._load_openapi())
                description = description or found
            self._tool = ToolSpec(self.spec.name, description, params or {"type": "object", "properties": {}})
        return [self._tool]

    async def _load_openapi(self) -> Any:
        where = self.spec.openapi
        try:
            if where.startswith(("http://", "https://")):
                response = await self._http.get(where)
                if response.status_code in (401, 403):
                    raise self._unauthorized(response.status_code, where)
                response.raise_for_status()
                return response.json()
            return json.loads(Path(where).read_text())
        except (OSError, ValueError, httpx.HTTPStatusError) as exc:
            raise ToolConfigError(f"function tool {self.spec.name!r}: cannot read the OpenAPI document {where!r}: "
                                  f"{type(exc).__name__}: {exc}") from None
        except httpx.TransportError as exc:
            raise TransportFailure("transport", f"cannot fetch the OpenAPI document {where}: {type(exc).__name__}: {exc}") from exc

    async def probe(self) -> None:
        """Is the endpoint up? One GET of its URL: a POST-only route refuses it (405) without running the tool.
        No answer or a 5xx means down (the circuit breaker's probe)."""
        try:
            response = await self._http.get(self.spec.url)
        except httpx.TransportError as exc:
            raise TransportFailure("transport", f"{self.spec.url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise TransportFailure("http_5xx", f"HTTP {response.status_code} from {self.spec.url}")

    async def check_token(self) -> tuple[bool | None, str]:
        """Does the endpoint take the configured token, without running the tool? ``(verdict, what was seen)``:
        True accepted, False refused, None could not tell.

        It POSTs ``{"call_id": "agentrl-check"}``: no ``arguments``, which the contract requires, so an
        endpoint that follows it rejects the call (422) instead of running the tool. An endpoint that checks
        the token first answers 401/403 to a wrong one; to tell that from one that rejects the body first,
        the same request goes once more without the Authorization header: only when that one is refused
        and ours is not was our token checked and accepted.
        """
        body = {"call_id": "agentrl-check"}
        try:
            ours = await self._http.post(self.spec.url, json=body)
            if ours.status_code in (401, 403):
                return False, str(self._unauthorized(ours.status_code, self.spec.url))
            if ours.status_code >= 500:
                raise TransportFailure("http_5xx", f"HTTP {ours.status_code} from {self.spec.url}: {ours.text[:200]}")
            auth = [k for k in self.spec.headers if k.lower() == "authorization"]
            if not auth:
                return True, f"HTTP {ours.status_code} to a call without arguments (no Authorization header configured)"
            bare = await self._http.post(self.spec.url, json=body, headers={auth[0]: ""})
        except httpx.TransportError as exc:
            reason = "connection refused (is the server running?)" if refused(exc) else f"{type(exc).__name__}: {exc}"
            raise TransportFailure("transport", f"{self.spec.url}: {reason}") from exc
        if bare.status_code in (401, 403):
            return True, f"HTTP {ours.status_code} with the token, {bare.status_code} without it"
        return None, (f"HTTP {ours.status_code} with the token and {bare.status_code} without it: the endpoint "
                      f"rejects a call without arguments before it checks the token, so the token was not checked; "
                      f"`agentrl tools call CONFIG {self.spec.name} '{{...}}'` checks it with a real call")

    def _unauthorized(self, status: int, url: str) -> TransportFailure:
        has = "Authorization" in {k.title() for k in self.spec.headers}
        hint = ("the token in its Authorization header was refused; check the header (and the ${VAR} it reads)"
                if has else "it sent no Authorization header; add \"headers\": {\"Authorization\": \"Bearer ${TOKEN}\"}")
        word = "401 Unauthorized" if status == 401 else "403 Forbidden"
        return TransportFailure("unauthorized", f"HTTP {word} from {url}: {hint}")

    async def call_tool(self, name: str, arguments: dict, rollout_id: str | None, call_id: str | None = None) -> CallOutcome:
        if self._http is None:
            raise TransportFailure("connection_closed", "the HTTP client is closed")
        headers = {ROLLOUT_HEADER: rollout_id} if rollout_id is not None else {}
        body = {"arguments": arguments, "call_id": call_id}
        try:
            response = await self._http.post(self.spec.url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise TransportFailure("timeout", f"no answer from {self.spec.url}: {type(exc).__name__}") from exc
        except httpx.TransportError as exc:
            reason = "connection refused (is the server running?)" if refused(exc) else f"{type(exc).__name__}: {exc}"
            raise TransportFailure("transport", f"{self.spec.url}: {reason}") from exc
        status, text = response.status_code, response.text[:MAX_BODY]
        if status in (401, 403):
            raise self._unauthorized(status, self.spec.url)
        if status >= 500 or status in (408, 429):
            kind = "rate_limited" if status == 429 else "http_5xx" if status >= 500 else "timeout"
            after = response.headers.get("retry-after")
            raise TransportFailure(kind, f"HTTP {status} from {self.spec.url}"
                                   + (f" (Retry-After: {after})" if after else "") + f": {text[:200]}",
                                   pushback=status in PUSHBACK_STATUSES, retry_after=retry_after_seconds(after))
        if status >= 400:
            return CallOutcome(f"Error: HTTP {status}: {_reply_text(text)}", True)
        return _outcome(text)


def _reply_text(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict):
        for key in ("error", "detail", "output"):
            if key in data:
                return _text(data[key])
    return _text(data)


def _outcome(text: str) -> CallOutcome:
    """A 200 answer: ``{"output": ...}``, ``{"error": ...}``, or anything else shown as it is."""
    try:
        data = json.loads(text)
    except ValueError:
        return CallOutcome(text, False)
    if isinstance(data, dict) and data.get("error") not in (None, "", False):
        return CallOutcome(f"Error: {_text(data['error'])}", True)
    if isinstance(data, dict) and "output" in data:
        return CallOutcome(_text(data["output"]), bool(data.get("is_error")))
    return CallOutcome(_text(data), False)
