"""Scripted user turns: a row's later user turns, sent one by one whenever the model ends its turn (no LLM).

    {"messages": [{"role": "user", "content": "Make a folder 'temp' in documents."}],
     "metadata": {"user_turns": ["Now move report.pdf into it.",
                                 [{"role": "user", "content": "Search it for 'budget'."}],
                                 {"messages": [{"role": "user", "content": "You can sort files now. Sort it."}],
                                  "tools": ["sort"]}]}}

The row's messages are the first user turn. Each time the model answers without calling a tool, the agent loop
appends the next scripted turn and the model goes on, within the rollout's turn and token budgets; after the
last one, a plain answer ends the episode. A turn is a string (one user message), a list of messages, or
``{"messages": [...], "tools": [names]}``: served tools that are held back until that turn (hidden from the
tool list and answered "unknown tool" before it, offered from it on; the turn's text is what tells the model,
since the prompt's tool list cannot change under a token stream). The step after which a turn was sent records
it as ``user_reply``, as for a simulated user, so rewards can split the rollout into user turns. A row with
scripted turns does not use the simulated user.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class ScriptedTurn(NamedTuple):
    messages: list[dict]  # appended to the conversation when the turn is sent
    tools: tuple[str, ...] = ()  # served tools offered from this turn on (held back before it)

    @property
    def text(self) -> str:
        """The turn's user text, as a step's ``user_reply`` records it."""
        return "\n".join(m["content"] for m in self.messages if m.get("role") == "user")


def scripted_turns(metadata: dict) -> list[ScriptedTurn]:
    """The row's ``metadata.user_turns``; ValueError names the malformed entry and the shapes accepted."""
    turns = metadata.get("user_turns")
    if turns is None:
        return []
    if not isinstance(turns, list):
        raise ValueError(f"metadata.user_turns must be a list of later user turns, got {type(turns).__name__}")
    found = []
    for n, turn in enumerate(turns):
        tools: Any = ()
        if isinstance(turn, str):
            turn = [{"role": "user", "content": turn}]
        elif isinstance(turn, dict):
            turn, tools = turn.get("messages"), turn.get("tools", ())
        if (not isinstance(turn, list) or not turn or not all(
                isinstance(m, dict) and m.get("role") in ("user", "system") and isinstance(m.get("content"), str)
                for m in turn) or not any(m["role"] == "user" for m in turn)
                or not isinstance(tools, (list, tuple)) or not all(isinstance(t, str) for t in tools)):
            raise ValueError(f"metadata.user_turns[{n}] must be a string, a list of user messages "
                             f"([{{\"role\": \"user\", \"content\": \"...\"}}]) or {{\"messages\": [...], "
                             f"\"tools\": [tool names offered from this turn on]}}; got {turns[n]!r:.120}")
        found.append(ScriptedTurn([dict(m) for m in turn], tuple(tools)))
    return found


def held_back(turns: list[ScriptedTurn]) -> set[str]:
    """The tool names the scripted turns offer later (hidden until their turn)."""
    return {name for turn in turns for name in turn.tools}
