"""A calculator agent written with the OpenAI Agents SDK as its quickstart writes it: the SDK's default model class
(``OpenAIResponsesModel``, the Responses API) and the agent's default model name. Only the run's model provider
names agentrl's base_url and key; the agent itself is unchanged.

    agentrl eval configs/demo_agents_sdk.yaml --model base --limit 4 -o agents_sdk.jsonl
"""

from agents import Agent, OpenAIProvider, RunConfig, Runner, function_tool, set_tracing_disabled

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


agent = Agent(name="calculator", instructions="You are a helpful assistant.", tools=[add, subtract, multiply])


async def run(row, base_url, api_key):
    config = RunConfig(model_provider=OpenAIProvider(base_url=base_url, api_key=api_key))
    result = await Runner.run(agent, row["messages"][-1]["content"], max_turns=3, run_config=config)
    return str(result.final_output)
