"""The simulated user: role swap, stop conditions, and a real litellm call answered by its mock_response."""

import asyncio
from types import SimpleNamespace

import pytest

from agentrl.tools import ToolInfraError
from agentrl.tools.simuser import STOP_TOKEN, SimulatedUser

CONVERSATION = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "I need to split a bill."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c0"}]},
    {"role": "tool", "content": "42"},
    {"role": "assistant", "content": "How many people, and what is the total?"},
]
META = {"user_goal": "split 120 dollars among 4 people", "persona": "terse"}


def scripted(*replies):
    seen = []

    async def completion(**kwargs):
        seen.append(kwargs)
        reply = replies[len(seen) - 1]
        if isinstance(reply, Exception):
            raise reply
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=reply))])

    return completion, seen


def test_next_message_sees_the_conversation_from_the_users_side():
    completion, seen = scripted("4 people, 120 total.")
    user = SimulatedUser("fake/model", completion=completion)
    assert asyncio.run(user.next_message(CONVERSATION, META)) == "4 people, 120 total."
    messages = seen[0]["messages"]
    assert messages[0]["role"] == "system" and "split 120 dollars" in messages[0]["content"] and "terse" in messages[0]["content"]
    assert messages[1:] == [{"role": "assistant", "content": "I need to split a bill."},
                            {"role": "user", "content": "How many people, and what is the total?"}]


def test_stop_token_turn_budget_and_missing_goal():
    completion, _ = scripted(f"Thanks! {STOP_TOKEN}")
    assert asyncio.run(SimulatedUser("m", completion=completion).next_message(CONVERSATION, META)) is None
    spent = CONVERSATION + [{"role": "user", "content": "4"}, {"role": "assistant", "content": "30 each"}]
    assert asyncio.run(SimulatedUser("m", max_turns=1, completion=completion).next_message(spent, META)) is None
    with pytest.raises(ValueError, match="user_goal"):
        asyncio.run(SimulatedUser("m", completion=completion).next_message(CONVERSATION, {}))


def test_llm_failure_is_an_infra_error_not_a_score():
    completion, _ = scripted(TimeoutError("judge down"))
    with pytest.raises(ToolInfraError) as e:
        asyncio.run(SimulatedUser("m", completion=completion).next_message(CONVERSATION, META))
    assert e.value.server == "simulated_user" and "judge down" in str(e.value)


def test_through_litellm_with_its_mock_response(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "true")  # no fetch of the price list at import
    user = SimulatedUser("openai/gpt-4o-mini", mock_response="There are 4 of us.")
    assert asyncio.run(user.next_message(CONVERSATION, META)) == "There are 4 of us."
