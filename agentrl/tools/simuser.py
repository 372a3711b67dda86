"""A simulated user for multi-turn rollouts: an LLM (through litellm) plays the user.

The row's metadata gives the user a goal and optionally a persona:

    {"user_goal": "Find out how much 3 pizzas at 12.50 each cost with a 15% tip",
     "persona": "terse, a bit impatient", "user_instructions": "never reveal the tip rate unless asked"}

After each assistant turn the agent loop asks :meth:`SimulatedUser.next_message` for the user's reply. It
returns ``None`` when the user is done: the goal is met (the model wrote the stop token), the turn budget
is spent, or it had nothing to say. A failing LLM call raises :class:`SimulatedUserError`, a
:class:`~agentrl.tools.ToolInfraError`, so the rollout is unscorable rather than scored 0.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from agentrl.tools.types import ToolInfraError

STOP_TOKEN = "###DONE###"

Completion = Callable[..., Awaitable[Any]]


class SimulatedUserError(ToolInfraError):
    """The simulated user's LLM could not answer."""

    def __init__(self, cause: BaseException | str) -> None:
        super().__init__("simulated_user", cause, "simulated_user")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


class SimulatedUser:
    """``model`` is any litellm model string; ``completion`` replaces ``litellm.acompletion`` (tests, proxies)."""

    def __init__(self, model: str, *, max_turns: int = 3, temperature: float = 0.7, max_tokens: int = 400,
                 stop_token: str = STOP_TOKEN, completion: Completion | None = None, **litellm_kwargs: Any) -> None:
        if max_turns < 0:
            raise ValueError(f"max_turns must be >= 0, got {max_turns}")
        self.model = model
        self.max_turns = max_turns
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stop_token = stop_token
        self.completion = completion
        self.kwargs = litellm_kwargs

    def system_prompt(self, metadata: dict) -> str:
        goal = metadata.get("user_goal") or metadata.get("goal")
        if not goal:
            raise ValueError("the simulated user needs metadata['user_goal'] (or 'goal'): what the user wants done")
        lines = [
            "You are role-playing a human user talking to an AI assistant. Stay in character; never say you are an AI.",
            f"Your goal: {goal}",
        ]
        if metadata.get("persona"):
            lines.append(f"Your persona: {metadata['persona']}")
        if metadata.get("user_instructions"):
            lines.append(f"Rules for you: {metadata['user_instructions']}")
        lines.append(
            "Write only your next message to the assistant, briefly. Share information only as a real user would. "
            f"When your goal is met, or the assistant clearly cannot help, reply with exactly {self.stop_token}."
        )
        return "\n".join(lines)

    def as_user_view(self, conversation: list[dict]) -> list[dict]:
        """The conversation from the user's side: roles swapped, tool traffic and system prompts hidden."""
        view = []
        for message in conversation:
            role, text = message.get("role"), _text(message.get("content")).strip()
            if role not in ("user", "assistant") or not text:
                continue  # system prompts, tool results, and assistant turns that were only tool calls
            view.append({"role": "assistant" if role == "user" else "user", "content": text})
        return view

    def user_turns(self, conversation: list[dict]) -> int:
        """User messages after the first one (the dataset's prompt is not a simulated turn)."""
        return max(0, sum(1 for m in conversation if m.get("role") == "user") - 1)

    async def next_message(self, conversation: list[dict], metadata: dict) -> str | None:
        """The user's next message, or None when the conversation should end."""
        if self.user_turns(conversation) >= self.max_turns:
            return None
        messages = [{"role": "system", "content": self.system_prompt(metadata)}, *self.as_user_view(conversation)]
        if len(messages) == 1 or messages[-1]["role"] != "user":
            return None  # the assistant has not said anything new to answer
        completion = self.completion
        if completion is None:
            import litellm  # imported late: it is slow to import and only this feature needs it

            completion = litellm.acompletion
        try:
            response = await completion(model=self.model, messages=messages, temperature=self.temperature,
                                        max_tokens=self.max_tokens, **self.kwargs)
            reply = _text(response.choices[0].message.content).strip()
        except Exception as exc:  # the rollout cannot go on without its user
            raise SimulatedUserError(f"{type(exc).__name__}: {exc}") from exc
        if not reply or self.stop_token in reply:
            return None
        return reply
