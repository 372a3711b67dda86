"""The calculator agent written with the OpenAI Agents SDK; only the model's base_url and key come from agentrl.
Its chat-completions model class is used; configs/agents/agents_sdk_calculator.py is the same agent on the SDK's default
model class (the Responses API)."""

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)  # the SDK would upload traces to OpenAI


@function_tool
def add(a: float, b: float) -> float:
    """Add two numbers: a + b."""
    return a + b


@function_tool
def subtract(a: float, b: float) -> float:
    """Subtract b from a: a - b."""
    return a - b


@function_tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers: a * b."""
    return a * b


async def run(row, base_url, api_key):
    model = OpenAIChatCompletionsModel(model="policy", openai_client=AsyncOpenAI(base_url=base_url, api_key=api_key))
    agent = Agent(name="calculator", instructions="You are a helpful assistant.", model=model,
                  tools=[add, subtract, multiply])
    result = await Runner.run(agent, row["messages"][-1]["content"], max_turns=3)
    return str(result.final_output)
