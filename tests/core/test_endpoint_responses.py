"""``/v1/responses`` on the endpoint, driven by the real OpenAI Agents SDK with its default model class
(``OpenAIResponsesModel``) and by the real OpenAI client, with a scripted rollout behind each address (the model
side, with exact tokens, is tests/workflow/test_program.py's framework test on the demo model's tokenizer)."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest

from agentrl.endpoint.responses import read_responses
from agentrl.endpoint.server import EndpointServer
from agentrl.endpoint.shapes import Answer, RequestError

agents = pytest.importorskip("agents")  # the `agents` extra

TOOL = {"type": "function", "name": "add", "description": "a + b", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}


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


def _call_then_answer(call_id: str = "call_0") -> Scripted:
    return Scripted(Answer(text="", calls=[("add", '{"a": 2, "b": 3}')], call_ids=[call_id], finish="tool_calls",
                           prompt_tokens=30, completion_tokens=12),
                    Answer(text="The answer is 5.", prompt_tokens=50, completion_tokens=6))


RAN: list = []  # the calls the agent's own tool ran


@agents.function_tool
def add(a: float, b: float) -> float:
    """Add two numbers: a + b."""
    RAN.append((a, b))
    return a + b


agents.set_tracing_disabled(True)  # the SDK would upload traces to OpenAI
AGENT = agents.Agent(name="calculator", instructions="You are a helpful assistant.", tools=[add])  # one, as users write it


def test_agents_sdk_default_model_class_calls_its_tool_and_answers(server):
    """Runner.run and Runner.run_streamed, in one event loop: the SDK's OpenAIProvider shares one HTTP client per
    process, whose pooled connections belong to the loop that opened them (agentrl runs every rollout in one)."""
    handlers = {streamed: _call_then_answer(f"call_{streamed}") for streamed in (False, True)}
    ran = {}

    async def one(streamed):
        RAN.clear()
        with server.rollout(handlers[streamed]) as (base_url, key):
            provider = agents.OpenAIProvider(base_url=base_url, api_key=key)  # the only change a user makes
            assert type(provider.get_model(None)).__name__ == "OpenAIResponsesModel"
            config = agents.RunConfig(model_provider=provider)
            if not streamed:
                result = await agents.Runner.run(AGENT, "What is 2 + 3?", max_turns=3, run_config=config)
            else:
                result = agents.Runner.run_streamed(AGENT, "What is 2 + 3?", max_turns=3, run_config=config)
                async for _ in result.stream_events():
                    pass
        ran[streamed] = list(RAN)
        return result

    async def both():
        return [await one(False), await one(True)]

    for streamed, result in zip((False, True), asyncio.run(both())):
        handler = handlers[streamed]
        assert result.final_output == "The answer is 5." and ran[streamed] == [(2, 3)]
        assert result.context_wrapper.usage.output_tokens == 18  # the usage agentrl reported reached the SDK
        first, second = handler.requests  # no retry: each turn sampled once
        assert first.messages == [{"role": "system", "content": "You are a helpful assistant."},
                                  {"role": "user", "content": "What is 2 + 3?"}]
        assert first.tools[0]["function"]["name"] == "add" and first.stream is streamed
        # the SDK sent the served call back as a function_call item and the result as function_call_output:
        # the same chat history the chat route reads, so the token ledger continues one sequence
        assert second.messages[2] == {"role": "assistant", "content": "", "tool_calls": [{
            "type": "function", "id": f"call_{streamed}", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]}
        assert second.messages[3] == {"role": "tool", "content": "5.0", "tool_call_id": f"call_{streamed}",
                                      "name": "add"}
        assert second.messages[:2] == first.messages and len(second.messages) == 4


def test_openai_client_responses_text_calls_previous_response_id_and_incomplete(server):
    handler = Scripted(Answer(text="Let me add.", calls=[("add", '{"a": 1, "b": 1}')], call_ids=["call_7"],
                              finish="tool_calls", reasoning="1 and 1", prompt_tokens=3, completion_tokens=9),
                       Answer(text="It is 2", finish="length", prompt_tokens=20, completion_tokens=4))

    async def go():
        with server.rollout(handler) as (base_url, key):
            client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
            first = await client.responses.create(model="policy", input="1+1?", tools=[TOOL], instructions="Be brief.")
            second = await client.responses.create(
                model="policy", previous_response_id=first.id, tools=[TOOL], max_output_tokens=4,
                input=[{"type": "function_call_output", "call_id": "call_7", "output": "2"}])
            with pytest.raises(openai.NotFoundError) as missing:
                await client.responses.create(model="policy", previous_response_id="resp_other", input="x")
            return first, second, missing.value

    first, second, missing = asyncio.run(go())
    assert [item.type for item in first.output] == ["reasoning", "message", "function_call"]
    assert first.output_text == "Let me add." and first.status == "completed"
    call = first.output[2]
    assert (call.call_id, call.name, json.loads(call.arguments)) == ("call_7", "add", {"a": 1, "b": 1})
    assert first.usage.input_tokens == 3 and first.usage.output_tokens == 9
    # previous_response_id: the earlier conversation, the served turn, then the new input; instructions not carried
    assert handler.requests[1].messages == [
        {"role": "user", "content": "1+1?"},
        {"role": "assistant", "content": "Let me add.", "tool_calls": [
            {"type": "function", "id": "call_7", "function": {"name": "add", "arguments": {"a": 1, "b": 1}}}]},
        {"role": "tool", "content": "2", "tool_call_id": "call_7", "name": "add"}]
    assert handler.requests[1].max_tokens == 4
    assert second.status == "incomplete" and second.incomplete_details.reason == "max_output_tokens"
    assert missing.body["code"] == "previous_response_not_found" and "this rollout" in missing.body["message"]


def test_streamed_events_reassemble_in_the_openai_client(server):
    handler = Scripted(Answer(text="Adding.", calls=[("add", '{"a": 4, "b": 5}')], call_ids=["call_1"],
                              finish="tool_calls", prompt_tokens=7, completion_tokens=11))

    async def go():
        with server.rollout(handler) as (base_url, key):
            client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0)
            stream = await client.responses.create(model="policy", input="4+5?", tools=[TOOL], stream=True)
            return [event async for event in stream]

    events = asyncio.run(go())
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    args = [e.arguments for e in events if e.type == "response.function_call_arguments.done"]
    assert text == "Adding." and args == ['{"a": 4, "b": 5}']
    final = events[-1].response
    assert [i.type for i in final.output] == ["message", "function_call"] and final.usage.output_tokens == 11


@pytest.mark.parametrize("body, param", [
    ({"input": []}, "input"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0]"),
    ({"input": "x", "conversation": "conv_1"}, "conversation"),
    ({"input": "x", "background": True}, "background"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content"),
    ({"input": [{"type": "function_call", "call_id": "c"}]}, "input[0]"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "tool_choice": {"type": "allowed_tools", "tools": []}}, "tool_choice"),
])
def test_bad_responses_requests_name_the_field(body, param):
    with pytest.raises(RequestError) as err:
        read_responses(body)
    assert err.value.param == param and err.value.status == 400


def test_input_items_read_as_one_chat_history():
    request, conversation = read_responses({"instructions": "sys", "tool_choice": {"type": "function", "name": "add"},
                                            "tools": [TOOL], "input": [
        {"role": "developer", "content": "be exact"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "2+2?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Adding."}]},
        {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 2, "b": 2}'},
        {"type": "function_call", "call_id": "c2", "name": "add", "arguments": "not json"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "4"}]},
        {"type": "function_call_output", "call_id": "c2", "output": "error"}]})
    assert [m["role"] for m in request.messages] == ["system", "system", "user", "assistant", "tool", "tool"]
    turn = request.messages[3]
    assert turn["content"] == "Adding." and [c["id"] for c in turn["tool_calls"]] == ["c1", "c2"]
    assert turn["tool_calls"][1]["function"]["arguments"] == "not json"  # shown to the template as written
    assert request.messages[4]["content"] == "4" and request.messages[5]["name"] == "add"
    assert request.tools == [{"type": "function", "function": {"name": "add", "description": "a + b",
                                                               "parameters": TOOL["parameters"]}}]
    assert conversation == request.messages[1:]  # what previous_response_id continues from (no instructions)
