"""The demo's arithmetic agent written with the OpenAI Python SDK: its own calculator tools, its own loop.

Nothing here knows agentrl but the signature: agentrl calls ``run`` once per rollout with an OpenAI-compatible
``base_url`` and ``api_key`` that belong to that rollout (``configs/demo_openai_agent.yaml``).

    answer = await run({"messages": [{"role": "user", "content": "What is 3 + 4?"}]}, base_url, api_key)
"""

import json

from openai import AsyncOpenAI


def _number(x):
    return int(x) if isinstance(x, float) and x.is_integer() else x


CALCULATOR = {
    "add": lambda a, b: _number(a + b),
    "subtract": lambda a, b: _number(a - b),
    "multiply": lambda a, b: _number(a * b),
}
_DOC = {"add": "Add two numbers: a + b.", "subtract": "Subtract b from a: a - b.", "multiply": "Multiply two numbers: a * b."}
TOOLS = [{"type": "function", "function": {
    "name": name, "description": _DOC[name],
    "parameters": {"type": "object", "properties": {"a": {"title": "A", "type": "number"},
                                                    "b": {"title": "B", "type": "number"}},
                   "required": ["a", "b"], "title": f"{name}Arguments"}}} for name in CALCULATOR]


def call_tool(name, arguments):
    try:
        args = json.loads(arguments or "{}")
        return str(CALCULATOR[name](float(args["a"]), float(args["b"])))
    except Exception as exc:  # the model sees the error, as with any tool
        return f"error: {type(exc).__name__}: {exc}"


async def run(row, base_url, api_key, max_turns=3):
    client = AsyncOpenAI(base_url=base_url, api_key=api_key)
    messages = [dict(m) for m in row["messages"]]
    for _ in range(max_turns):
        response = await client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": call_tool(call.function.name, call.function.arguments)})
    return None
