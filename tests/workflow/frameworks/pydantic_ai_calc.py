"""The calculator agent written with pydantic-ai (its OpenAI chat model and provider)."""

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def add(a: float, b: float) -> float:
    """Add two numbers: a + b."""
    return a + b


def subtract(a: float, b: float) -> float:
    """Subtract b from a: a - b."""
    return a - b


def multiply(a: float, b: float) -> float:
    """Multiply two numbers: a * b."""
    return a * b


async def run(row, base_url, api_key):
    model = OpenAIChatModel("policy", provider=OpenAIProvider(base_url=base_url, api_key=api_key))
    # three output retries (pydantic-ai's default is one): a small model that ends a turn with nothing gets asked again
    agent = Agent(model, tools=[add, subtract, multiply], retries={"tools": 1, "output": 3})
    result = await agent.run(row["messages"][-1]["content"])
    return result.output
