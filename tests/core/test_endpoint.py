"""The OpenAI-compatible endpoint on loopback, driven by the real OpenAI SDK and raw HTTP, with a scripted
rollout behind each address (the model side is tested with the demo model in tests/workflow/test_program.py)."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from agentrl.endpoint.server import EndpointServer
from agentrl.endpoint.shapes import Answer, RequestError, read_request
from agentrl.endpoint.tokens import Sequence, TokenLedger, continues

TOOLS = [{"type": "function", "function": {"name": "add", "description": "a + b", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}]


class Scripted:
    """Answers from a list; keeps every request it got."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests = []

    async def complete(self, request):
        self.requests.append(request)
        return self.answers.pop(0)


@pytest.fixture(scope="module")
def server():
    s = EndpointServer()
    yield s
    s.close()


def test_sdk_tool_call_then_answer_non_streaming(server):
    handler = Scripted(Answer(text="", calls=[("add", '{"a": 2, "b": 3}')], call_ids=["call_0"], finish="tool_calls",
                              prompt_tokens=10, completion_tokens=4),
                       Answer(text="The answer is 5.", prompt_tokens=20, completion_tokens=6))

    async def agent():
        with server.rollout(handler) as (base_url, key):
            client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
            messages = [{"role": "user", "content": "What is 2 + 3?"}]
            first = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
            msg = first.choices[0].message
            assert first.choices[0].finish_reason == "tool_calls" and msg.content is None
            assert msg.tool_calls[0].id == "call_0" and msg.tool_calls[0].function.name == "add"
            assert json.loads(msg.tool_calls[0].function.arguments) == {"a": 2, "b": 3}
            assert first.usage.prompt_tokens == 10 and first.usage.completion_tokens == 4
            messages += [msg.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": "call_0", "content": "5"}]
            second = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS,
                                                          max_tokens=16, temperature=0.7)
            return second

    second = asyncio.run(agent())
    assert second.choices[0].message.content == "The answer is 5." and second.choices[0].finish_reason == "stop"
    sent = handler.requests[1]
    assert sent.max_tokens == 16 and sent.tools == TOOLS
    # arguments come back from the SDK as JSON text; the template gets them as a dict
    assert sent.messages[1]["tool_calls"][0]["function"]["arguments"] == {"a": 2, "b": 3}
    assert sent.messages[2] == {"role": "tool", "content": "5", "tool_call_id": "call_0"}


def test_sdk_streaming_reassembles_text_and_calls(server):
    handler = Scripted(Answer(text="Let me add.", calls=[("add", '{"a": 1, "b": 1}')], call_ids=["call_7"],
                              finish="tool_calls", prompt_tokens=3, completion_tokens=9))

    async def agent():
        with server.rollout(handler) as (base_url, key):
            client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
            stream = await client.chat.completions.create(
                model="policy", messages=[{"role": "user", "content": "1+1"}], tools=TOOLS, stream=True,
                stream_options={"include_usage": True})
            return [chunk async for chunk in stream]

    chunks = asyncio.run(agent())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text == "Let me add." and finish == ["tool_calls"]
    assert [(tc.id, tc.function.name, tc.function.arguments) for tc in calls] == [("call_7", "add", '{"a": 1, "b": 1}')]
    assert chunks[-1].usage.completion_tokens == 9


def test_key_alone_selects_the_rollout_and_concurrent_rollouts_never_mix(server):
    a, b = Scripted(*[Answer(text=f"a{i}") for i in range(5)]), Scripted(*[Answer(text=f"b{i}") for i in range(5)])

    async def one(handler, tag):
        with server.rollout(handler) as (_, key):
            # the plain /v1 address with the rollout's key as the bearer key
            client = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key=key, max_retries=0)
            outs = []
            for i in range(5):
                r = await client.chat.completions.create(model="x", messages=[{"role": "user", "content": f"{tag}{i}"}])
                outs.append(r.choices[0].message.content)
            return outs

    async def both():
        return await asyncio.gather(one(a, "a"), one(b, "b"))

    out_a, out_b = asyncio.run(both())
    assert out_a == [f"a{i}" for i in range(5)] and out_b == [f"b{i}" for i in range(5)]
    assert [r.messages[0]["content"] for r in a.requests] == [f"a{i}" for i in range(5)]
    assert [r.messages[0]["content"] for r in b.requests] == [f"b{i}" for i in range(5)]
    assert server.open_rollouts() == 0


def test_models_and_openai_error_bodies(server):
    async def calls():
        with server.rollout(Scripted()) as (base_url, key):
            client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
            models = await client.models.list()
            with pytest.raises(openai.BadRequestError) as n2:
                await client.chat.completions.create(model="p", messages=[{"role": "user", "content": "x"}], n=2)
            async with httpx.AsyncClient() as http:
                bad_json = await http.post(base_url + "/chat/completions", content=b"{not json",
                                           headers={"authorization": f"Bearer {key}"})
                no_key = await http.post(server.base_url + "/v1/chat/completions", json={"messages": []})
                elsewhere = await http.get(server.base_url + "/v1/embeddings")
        closed = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
        with pytest.raises(openai.NotFoundError) as gone:
            await closed.chat.completions.create(model="p", messages=[{"role": "user", "content": "x"}])
        return models, n2.value, bad_json, no_key, elsewhere, gone.value

    models, n2, bad_json, no_key, elsewhere, gone = asyncio.run(calls())
    assert [m.id for m in models.data] == ["policy"]
    assert n2.status_code == 400 and n2.body["param"] == "n" and "samples_per_prompt" in n2.body["message"]
    assert bad_json.status_code == 400 and "not JSON" in bad_json.json()["error"]["message"]
    assert no_key.status_code == 401 and no_key.json()["error"]["code"] == "invalid_api_key"
    assert elsewhere.status_code == 404 and "/v1/chat/completions" in elsewhere.json()["error"]["message"]
    assert gone.status_code == 404 and "not open" in gone.body["message"]


def test_a_failing_rollout_is_a_500_in_openais_shape(server):
    class Broken:
        async def complete(self, request):
            raise RuntimeError("rollout server gone")

    async def call():
        with server.rollout(Broken()) as (base_url, key):
            client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
            with pytest.raises(openai.InternalServerError) as err:
                await client.chat.completions.create(model="p", messages=[{"role": "user", "content": "x"}])
            return err.value

    err = asyncio.run(call())
    assert "rollout server gone" in err.body["message"] and err.body["type"] == "server_error"


@pytest.mark.parametrize("body, param", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": "x"}], "stop": [""]}, "stop"),
    ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
    ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, "tools[0]"),
])
def test_bad_requests_name_the_field(body, param):
    with pytest.raises(RequestError) as err:
        read_request(body)
    assert err.value.param == param and err.value.status == 400


def test_request_normalises_what_the_sdks_send():
    req = read_request({"messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "2+2?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "4"}], "tool_choice": "required", "tools": TOOLS,
        "max_completion_tokens": 9})
    assert [m["role"] for m in req.messages] == ["system", "user", "assistant", "tool"]
    assert req.messages[1]["content"] == "What is 2+2?" and req.messages[2]["content"] == ""
    assert req.messages[2]["tool_calls"][0]["function"]["arguments"] == {"a": 2, "b": 2}
    assert req.tool_choice == "required" and req.max_tokens == 9


# ------------------------------------------------------------------ the token ledger, with a scripted builder


class Builder:
    """Renders each message as its own ids (role + content length), like a template that appends."""

    def render(self, message):
        return [{"system": 1, "user": 2, "assistant": 3, "tool": 4}[message["role"]], 100 + len(message.get("content") or "")]

    async def build(self, messages, tools):
        return [0] + [t for m in messages for t in self.render(m)] + [9]

    async def append(self, previous, messages, ids, mask, logprobs, tools):
        extra = [t for m in messages[len(previous):] for t in self.render(m)] + [9]
        return ids + extra, mask + [0] * len(extra), (logprobs or []) + [0.0] * len(extra) if logprobs else None


def _turn(content, calls=()):
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": f"x{i}", "type": "function", "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)]}


def test_ledger_keeps_one_sequence_while_the_history_is_sent_back_as_served():
    async def go():
        ledger = TokenLedger(Builder(), response_length=100)
        user = [{"role": "user", "content": "2+3?"}]
        p1 = await ledger.prompt(user, TOOLS)
        served = _turn("", [("add", '{"a": 2, "b": 3}')])
        ledger.sampled([50, 51, 52], [-0.1, -0.2, -0.3], served)
        # the SDK sends the call back with its arguments re-serialised and its own id: still the served turn
        back = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "other", "type": "function", "function": {"name": "add", "arguments": {"b": 3, "a": 2}}}]}
        p2 = await ledger.prompt(user + [back, {"role": "tool", "content": "5", "tool_call_id": "other"}], TOOLS)
        ledger.sampled([60, 61], [-0.5, -0.6], _turn("5"))
        return ledger, p1, p2

    ledger, p1, p2 = asyncio.run(go())
    assert len(ledger.sequences) == 1 and ledger.rewrites == 0
    seq = ledger.sequences[0]
    assert p2[: len(p1) + 3] == p1 + [50, 51, 52]  # the sampled ids, never a re-render of them
    assert seq.trained_ids() == [50, 51, 52, 60, 61] == [t for s in seq.sampled for t in s]
    assert seq.mask == [1, 1, 1, 0, 0, 0, 1, 1] and seq.logprobs[-2:] == [-0.5, -0.6]


@pytest.mark.parametrize("rewrite", ["edited", "dropped", "merged", "tools"])
def test_ledger_starts_a_new_sequence_when_the_framework_rewrites_history(rewrite):
    async def go():
        ledger = TokenLedger(Builder(), response_length=100)
        user = [{"role": "user", "content": "2+3?"}]
        await ledger.prompt(user, TOOLS)
        served = _turn("thinking... call", [("add", '{"a": 2, "b": 3}')])
        ledger.sampled([50, 51], None, served)
        tool = {"role": "tool", "content": "5", "tool_call_id": "x0"}
        nxt, tools = {
            "edited": (user + [_turn("call", [("add", '{"a": 2, "b": 3}')]), tool], TOOLS),
            "dropped": (user + [tool], TOOLS),
            "merged": ([{"role": "user", "content": "2+3? (add said 5)"}], TOOLS),
            "tools": (user + [served, tool], None),
        }[rewrite]
        await ledger.prompt(nxt, tools)
        ledger.sampled([70], None, _turn("5"))
        return ledger

    ledger = asyncio.run(go())
    assert len(ledger.sequences) == 2 and ledger.rewrites == 1
    assert [s.trained_ids() for s in ledger.sequences] == [[50, 51], [70]]
    assert ledger.sequences[1].prompt_ids[0] == 0  # a fresh render, not the old stream


def test_continues_needs_only_new_tool_or_user_messages_after_the_served_turn():
    history = [{"role": "user", "content": "q"}]
    served = _turn("a")
    assert continues(history, served, history + [_turn("a "), {"role": "user", "content": "more"}])
    assert not continues(history, served, history + [_turn("a")])  # nothing new to answer
    assert not continues(history, served, history + [_turn("a"), _turn("b")])  # an assistant turn it did not serve
    assert not continues(history, served, [{"role": "system", "content": "s"}] + history + [_turn("a")])
    assert Sequence(prompt_ids=[1]).trained_ids() == []
