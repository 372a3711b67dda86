"""The calculator agent written with LangGraph's prebuilt ReAct agent and langchain-openai's ChatOpenAI."""

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent


@tool
def add(a: float, b: float) -> float:
    """Add two numbers: a + b."""
    return a + b


@tool
def subtract(a: float, b: float) -> float:
    """Subtract b from a: a - b."""
    return a - b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers: a * b."""
    return a * b


async def run(row, base_url, api_key):
    llm = ChatOpenAI(model="policy", base_url=base_url, api_key=api_key, max_retries=0)
    agent = create_react_agent(llm, [add, subtract, multiply])
    state = await agent.ainvoke({"messages": row["messages"]}, {"recursion_limit": 8})
    return state["messages"][-1].content
