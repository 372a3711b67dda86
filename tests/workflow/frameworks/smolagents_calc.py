"""The calculator agent written with smolagents' ToolCallingAgent and OpenAIServerModel (synchronous: run in a
thread so the event loop that samples stays free)."""

import asyncio

from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def add(a: float, b: float) -> float:
    """Add two numbers: a + b.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


@tool
def subtract(a: float, b: float) -> float:
    """Subtract b from a: a - b.

    Args:
        a: the first number
        b: the number to subtract
    """
    return a - b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers: a * b.

    Args:
        a: the first number
        b: the second number
    """
    return a * b


async def run(row, base_url, api_key):
    model = OpenAIServerModel(model_id="policy", api_base=base_url, api_key=api_key)
    agent = ToolCallingAgent(tools=[add, subtract, multiply], model=model, max_steps=3, verbosity_level=0)
    answer = await asyncio.to_thread(agent.run, row["messages"][-1]["content"])
    return str(answer)
