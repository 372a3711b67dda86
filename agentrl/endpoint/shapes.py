"""OpenAI's chat-completions shapes, as the endpoint reads and writes them.

    request = read_request({"model": "policy", "messages": [...], "tools": [...], "max_tokens": 64})
    request.messages                        # for the chat template: text content, tool-call arguments as dicts
    completion(request_id, "policy", Answer(text="", calls=[("add", '{"a": 1, "b": 2}')], finish="tool_calls"))
    chunks(request_id, "policy", answer)    # the same answer as server-sent events (stream=true)
    error_body(400, "n=2 is not supported ...", param="n")

Nothing here samples or renders: :mod:`agentrl.endpoint.server` serves these, the rollout behind it decides.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from agentrl.errors import AgentrlError


class RequestError(AgentrlError):
    """A request the endpoint refuses: OpenAI's error body with ``status``, ``param`` and ``code``."""

    def __init__(self, message: str, *, status: int = 400, param: Optional[str] = None,
                 code: Optional[str] = None, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.param, self.code, self.kind = status, param, code, kind

    def body(self) -> dict:
        return error_body(self.status, str(self), param=self.param, code=self.code, kind=self.kind)


def error_body(status: int, message: str, *, param: Optional[str] = None, code: Optional[str] = None,
               kind: str = "invalid_request_error") -> dict:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@dataclass
class ChatRequest:
    """One chat-completions request, ready for the chat template."""

    messages: list[dict]
    tools: Optional[list[dict]] = None
    tool_choice: Any = "auto"
    max_tokens: Optional[int] = None
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    stream: bool = False
    include_usage: bool = False
    model: str = "policy"
    stop: list = field(default_factory=list)  # the turn is cut after the token that completes one


@dataclass
class Answer:
    """What the model said in one turn: the visible text, its calls as ``(name, JSON arguments)``, the reason it
    stopped (``stop``, ``tool_calls``, ``length``) and the token counts."""

    text: str
    calls: list = field(default_factory=list)
    finish: str = "stop"
    reasoning: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    call_ids: list = field(default_factory=list)


def _text(content: Any, where: str) -> str:
    """Message content as text: a string, None, or a list of text parts (what the SDKs send)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for n, part in enumerate(content):
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
                out.append(str(part.get("text") or ""))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise RequestError(f"{where}.content[{n}]: only text parts are served (got {kind!r}); the policy "
                                   f"is a text model", param=f"{where}.content")
        return "".join(out)
    raise RequestError(f"{where}.content must be a string or a list of text parts", param=f"{where}.content")


def _arguments(value: Any) -> Any:
    """Tool-call arguments as the chat template takes them: a dict when the JSON parses, else the text."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return value if value is not None else {}


def _message(raw: Any, n: int, where: Optional[str] = None) -> dict:
    where = where or f"messages[{n}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        raise RequestError(f"{where} must be an object with a role", param=where)
    role = raw["role"]
    if role == "developer":  # the OpenAI SDKs' newer name for system
        role = "system"
    if role not in ("system", "user", "assistant", "tool"):
        raise RequestError(f"{where}.role {role!r} is not one of system, developer, user, assistant, tool",
                           param=f"{where}.role")
    message: dict[str, Any] = {"role": role, "content": _text(raw.get("content"), where)}
    if role == "assistant" and raw.get("tool_calls"):
        calls = []
        for k, call in enumerate(raw["tool_calls"]):
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise RequestError(f"{where}.tool_calls[{k}] needs function.name", param=f"{where}.tool_calls")
            calls.append({"type": "function", "id": call.get("id") or f"call_{n}_{k}",
                          "function": {"name": fn["name"], "arguments": _arguments(fn.get("arguments"))}})
        message["tool_calls"] = calls
    if role == "tool":
        message["tool_call_id"] = raw.get("tool_call_id")
        if raw.get("name"):
            message["name"] = raw["name"]
    return message


def _tool_choice(choice: Any, tools: list) -> Any:
    """``tool_choice`` checked as OpenAI reads it: "auto", "none", "required", or one named function of ``tools``.

    How the rollout honours it (:mod:`agentrl.verl.program_loop`): "none" serves the turn as text, calls unread;
    "required" and a named function sample the policy unconstrained and take the first sample that makes the call
    (a turn that never does is refused), so every trained token is one the policy chose freely."""
    if choice is None:
        return "auto"
    names = [t["function"]["name"] for t in tools]
    if choice in ("auto", "none"):
        return choice
    if choice == "required" or isinstance(choice, dict):
        if not tools:
            raise RequestError(f"tool_choice {choice!r} needs tools: send the tools the model may call",
                               param="tool_choice")
        if choice == "required":
            return choice
        fn = choice.get("function") if choice.get("type") == "function" else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str):
            raise RequestError("tool_choice must be \"auto\", \"none\", \"required\" or "
                               "{type: function, function: {name}}", param="tool_choice")
        if name not in names:
            raise RequestError(f"tool_choice names {name!r}, which is not among the tools sent ({', '.join(names)})",
                               param="tool_choice")
        return {"type": "function", "function": {"name": name}}
    raise RequestError(f"tool_choice {choice!r} is not one of \"auto\", \"none\", \"required\" or "
                       f"{{type: function, function: {{name}}}}", param="tool_choice")


def read_request(body: Any) -> ChatRequest:
    """A chat-completions body checked and normalised; RequestError names the field and the fix."""
    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages: a non-empty list of messages is required", param="messages")
    n = body.get("n")
    if n not in (None, 1):
        raise RequestError(f"n={n} is not supported: each request is one step of one rollout; send n=1 (or "
                           f"leave it out) and raise samples_per_prompt for more rollouts", param="n")
    if body.get("logit_bias"):
        raise RequestError("logit_bias is not supported by the training endpoint (the tokens it samples must be "
                           "the policy's own); leave it out", param="logit_bias")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise RequestError("stop must be a string or a list of non-empty strings", param="stop")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestError("tools must be a list of {type: function, function: {...}}", param="tools")
    for k, tool in enumerate(tools or []):
        if not (isinstance(tool, dict) and isinstance(tool.get("function"), dict) and tool["function"].get("name")):
            raise RequestError(f"tools[{k}] must be {{type: function, function: {{name, description, parameters}}}}",
                               param=f"tools[{k}]")
    choice = _tool_choice(body.get("tool_choice"), tools or [])
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise RequestError("max_tokens must be a positive integer", param="max_tokens")
    options = body.get("stream_options") or {}
    return ChatRequest(messages=[_message(m, i) for i, m in enumerate(messages)], tools=tools or None,
                       tool_choice=choice, max_tokens=max_tokens, temperature=body.get("temperature"),
                       top_p=body.get("top_p"), stream=bool(body.get("stream")),
                       include_usage=bool(options.get("include_usage")), model=str(body.get("model") or "policy"),
                       stop=stop)


def _tool_calls(answer: Answer) -> list[dict]:
    return [{"id": answer.call_ids[i], "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(answer.calls)]


def _usage(answer: Answer) -> dict:
    return {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens}


def completion(request_id: str, model: str, answer: Answer) -> dict:
    """The non-streaming ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.text if (answer.text or not answer.calls) else None}
    if answer.calls:
        message["tool_calls"] = _tool_calls(answer)
    if answer.reasoning:
        message["reasoning_content"] = answer.reasoning
    return {"id": request_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": answer.finish, "logprobs": None}],
            "usage": _usage(answer)}


def chunks(request_id: str, model: str, answer: Answer, include_usage: bool = False) -> list[str]:
    """The same answer as ``chat.completion.chunk`` server-sent events, ``data: [DONE]`` last. The turn is
    sampled whole first (its tokens are kept for training), then sent: a role chunk, the text, each call."""
    created = int(time.time())

    def event(delta: dict, finish: Optional[str] = None, **extra: Any) -> str:
        chunk = {"id": request_id, "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
        return f"data: {json.dumps(chunk)}\n\n"

    out = [event({"role": "assistant", "content": ""})]
    if answer.text:
        out.append(event({"content": answer.text}))
    for i, call in enumerate(_tool_calls(answer)):
        out.append(event({"tool_calls": [{"index": i, **call}]}))
    out.append(event({}, answer.finish))
    if include_usage:
        chunk = {"id": request_id, "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": [], "usage": _usage(answer)}
        out.append(f"data: {json.dumps(chunk)}\n\n")
    out.append("data: [DONE]\n\n")
    return out
