"""OpenAI's Responses shapes (``POST /v1/responses``), read into the same :class:`ChatRequest` the chat route uses.

    request, conversation = read_responses({"model": "policy", "instructions": "Be brief.", "input": [
        {"role": "user", "content": "What is 2 + 3?"},
        {"type": "function_call", "call_id": "call_0", "name": "add", "arguments": '{"a": 2, "b": 3}'},
        {"type": "function_call_output", "call_id": "call_0", "output": "5"}],
        "tools": [{"type": "function", "name": "add", "parameters": {...}}]})
    request.messages    # [system "Be brief.", user, assistant with the add call, tool "5" (name "add")]
    response_object("resp_1", body, answer, request)   # {"object": "response", "output": [message / function_call]}
    response_events("resp_1", body, answer, request)   # the same as the server-sent events the SDKs read

This is what the OpenAI Agents SDK's default model class (``OpenAIResponsesModel``) sends: input items (messages,
``function_call``, ``function_call_output``; ``reasoning`` items are dropped, their tokens are already in the
rollout), ``instructions`` as the system message, function tools in the flat Responses shape, ``tool_choice``,
``max_output_tokens``, ``stream``, and ``previous_response_id`` (the conversation of an earlier response of the same
rollout, kept by the server, with the new input after it). Whatever the route, the rollout behind it sees one
:class:`ChatRequest`, so the exact tokens go through the same :class:`agentrl.endpoint.tokens.TokenLedger`.

Refused with OpenAI's error body, naming the field: hosted tools (web search, file search, computer use: the policy
runs here, give them as function tools), ``conversation`` and ``background`` (nothing is stored beyond the
rollout), ``item_reference`` items, non-text input parts. ``text.format`` is not enforced, as ``response_format``
is not on the chat route: constrained decoding would train tokens the policy did not choose freely.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Optional

from agentrl.endpoint.shapes import Answer, ChatRequest, RequestError, _arguments, _message, _text, read_request

_NOT_STORED = ("conversation", "background", "prompt")


def _tool(raw: Any, k: int) -> dict:
    """A Responses function tool as the chat shape the template and the parser take."""
    if not isinstance(raw, dict) or raw.get("type") != "function" or not isinstance(raw.get("name"), str):
        kind = raw.get("type") if isinstance(raw, dict) else type(raw).__name__
        raise RequestError(f"tools[{k}]: {kind!r} tools are not served (the policy runs here, with no hosted tools); "
                           f"give it as {{type: function, name, description, parameters}} and run it in your agent",
                           param=f"tools[{k}]")
    function = {"name": raw["name"], "description": raw.get("description") or "",
                "parameters": raw.get("parameters") or {"type": "object", "properties": {}}}
    return {"type": "function", "function": function}


def _tool_choice(raw: Any) -> Any:
    """Responses' tool_choice in the chat shape: "auto" / "none" / "required" / a named function."""
    if raw is None or raw in ("auto", "none", "required"):
        return raw or "auto"
    if isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("name"), str):
        return {"type": "function", "function": {"name": raw["name"]}}
    raise RequestError(f"tool_choice {raw!r} is not served: give \"auto\", \"none\", \"required\" or "
                       f"{{type: function, name}}", param="tool_choice")


def _names(messages: list[dict]) -> dict[str, str]:
    return {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}


def _items(items: list, messages: list[dict]) -> list[dict]:
    """Input items appended to ``messages`` (the conversation so far) as chat messages."""
    for n, item in enumerate(items):
        where = f"input[{n}]"
        if not isinstance(item, dict):
            raise RequestError(f"{where} must be an object (a message or a function_call / function_call_output "
                               f"item)", param=where)
        kind = item.get("type") or ("message" if "role" in item else None)
        last = messages[-1] if messages else None
        if kind == "message" and item.get("role") == "assistant":
            text = _text(item.get("content"), where)
            if last is not None and last["role"] == "assistant" and not last.get("tool_calls"):
                last["content"] += text  # one turn served as several message items
            else:
                messages.append({"role": "assistant", "content": text})
        elif kind == "message":
            messages.append(_message({"role": item.get("role"), "content": item.get("content")}, n, where))
        elif kind == "function_call":
            if not isinstance(item.get("name"), str) or not item.get("call_id"):
                raise RequestError(f"{where}: a function_call item needs name and call_id", param=where)
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": ""}
                messages.append(last)
            last.setdefault("tool_calls", []).append({"type": "function", "id": item["call_id"], "function": {
                "name": item["name"], "arguments": _arguments(item.get("arguments"))}})
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            output = item.get("output")
            tool = {"role": "tool", "content": output if isinstance(output, str) else _text(output, where),
                    "tool_call_id": call_id}
            if _names(messages).get(call_id):
                tool["name"] = _names(messages)[call_id]
            messages.append(tool)
        elif kind == "reasoning":
            continue  # the model's own reasoning: its sampled tokens are already in the rollout
        else:
            raise RequestError(f"{where}: {kind!r} items are not served; send message, function_call, "
                               f"function_call_output or reasoning items (the whole input, not item references)",
                               param=where)
    return messages


def read_responses(body: Any, earlier: Callable[[str], Optional[list[dict]]] = lambda _id: None
                   ) -> tuple[ChatRequest, list[dict]]:
    """A Responses body as a :class:`ChatRequest`, and the conversation without instructions (kept for a later
    ``previous_response_id``). ``earlier(response_id)`` is that conversation for a response of this rollout."""
    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object")
    for key in _NOT_STORED:
        if body.get(key):
            raise RequestError(f"{key} is not served: the endpoint keeps nothing beyond one rollout; send the "
                               f"input items (or previous_response_id of this rollout)", param=key)
    conversation: list[dict] = []
    previous = body.get("previous_response_id")
    if previous:
        found = earlier(previous)
        if found is None:
            raise RequestError(f"previous_response_id {previous!r} is not a response of this rollout; send the "
                               f"whole input instead", param="previous_response_id",
                               code="previous_response_not_found", status=404, kind="not_found_error")
        conversation = [dict(m) for m in found]
    raw = body.get("input")
    if isinstance(raw, str):
        raw = [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not (raw or conversation):
        raise RequestError("input: a string or a non-empty list of input items is required", param="input")
    conversation = _items(raw, conversation)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise RequestError("instructions must be a string", param="instructions")
    messages = ([{"role": "system", "content": instructions}] if instructions else []) + conversation
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestError("tools must be a list of {type: function, name, parameters}", param="tools")
    if not messages:
        raise RequestError("input: nothing to answer", param="input")
    max_tokens = body.get("max_output_tokens")
    chat = {"model": body.get("model"), "messages": messages,
            "tools": [_tool(t, k) for k, t in enumerate(tools or [])] or None,
            "tool_choice": _tool_choice(body.get("tool_choice")), "max_tokens": max_tokens,
            "temperature": body.get("temperature"), "top_p": body.get("top_p"), "stream": body.get("stream")}
    try:
        return read_request(chat), conversation
    except RequestError as exc:
        if exc.param == "max_tokens":
            raise RequestError("max_output_tokens must be a positive integer", param="max_output_tokens") from None
        raise


def served_message(answer: Answer) -> dict:
    """The assistant message the answer is, as a later input item list reads it back."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.calls:
        message["tool_calls"] = [{"type": "function", "id": i, "function": {"name": n, "arguments": _arguments(a)}}
                                 for i, (n, a) in zip(answer.call_ids, answer.calls)]
    return message


def _output(answer: Answer) -> list[dict]:
    out: list[dict] = []
    if answer.reasoning:
        out.append({"type": "reasoning", "id": f"rs_{uuid.uuid4().hex}", "summary": [], "status": "completed",
                    "content": [{"type": "reasoning_text", "text": answer.reasoning}]})
    if answer.text or not answer.calls:
        out.append({"type": "message", "id": f"msg_{uuid.uuid4().hex}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": answer.text, "annotations": [], "logprobs": []}]})
    for call_id, (name, arguments) in zip(answer.call_ids, answer.calls):
        out.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": call_id, "name": name,
                    "arguments": arguments, "status": "completed"})
    return out


def response_object(response_id: str, body: dict, answer: Answer, *, output: Optional[list[dict]] = None,
                    status: Optional[str] = None) -> dict:
    """The ``response`` object: ``incomplete`` (reason ``max_output_tokens``) when the turn ran out of tokens."""
    cut = answer.finish == "length"
    status = status or ("incomplete" if cut else "completed")
    return {"id": response_id, "object": "response", "created_at": int(time.time()), "status": status,
            "model": str(body.get("model") or "policy"), "output": _output(answer) if output is None else output,
            "error": None, "incomplete_details": {"reason": "max_output_tokens"} if cut and status != "in_progress"
            else None, "instructions": body.get("instructions"), "metadata": body.get("metadata") or {},
            "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
            "previous_response_id": body.get("previous_response_id"), "temperature": body.get("temperature"),
            "top_p": body.get("top_p"), "max_output_tokens": body.get("max_output_tokens"),
            "tool_choice": body.get("tool_choice") or "auto", "tools": body.get("tools") or [],
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": bool(body.get("store", True)),
            "usage": None if status == "in_progress" else {
                "input_tokens": answer.prompt_tokens, "output_tokens": answer.completion_tokens,
                "total_tokens": answer.prompt_tokens + answer.completion_tokens,
                "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


def response_events(response_id: str, body: dict, answer: Answer) -> list[str]:
    """The answer as the Responses server-sent events, in OpenAI's order (the turn is sampled whole first)."""
    events: list[str] = []

    def event(kind: str, **data: Any) -> None:
        events.append(f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': len(events), **data})}\n\n")

    final = response_object(response_id, body, answer)
    event("response.created", response=response_object(response_id, body, answer, output=[], status="in_progress"))
    event("response.in_progress", response=response_object(response_id, body, answer, output=[], status="in_progress"))
    for index, item in enumerate(final["output"]):
        if item["type"] == "message":
            part = item["content"][0]
            event("response.output_item.added", output_index=index,
                  item={**item, "status": "in_progress", "content": []})
            event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                  part={**part, "text": ""})
            if part["text"]:
                event("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                      delta=part["text"], logprobs=[])
            event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                  text=part["text"], logprobs=[])
            event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part)
        elif item["type"] == "function_call":
            event("response.output_item.added", output_index=index,
                  item={**item, "status": "in_progress", "arguments": ""})
            event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                  delta=item["arguments"])
            event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                  name=item["name"], arguments=item["arguments"])
        else:
            event("response.output_item.added", output_index=index, item=item)
        event("response.output_item.done", output_index=index, item=item)
    event("response.incomplete" if final["status"] == "incomplete" else "response.completed", response=final)
    return events
