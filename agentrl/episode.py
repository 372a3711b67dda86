"""The agent's episode, verl-free: row → turns → tools → trajectory → rewards → one :class:`RolloutRecord`.

    episode = Episode(WorkerState(spec), policy)       # policy: the model side (see Policy)
    record = await episode.run(row, {"temperature": 1.0})
    record.reward, record.trajectories, record.stop_reason

One sample, start to end:
1. the row (``agentrl.dataset.loop_record``: messages, metadata, id, source, split, fields) becomes the
   ``item`` rewards see;
2. a per-rollout MCP session opens (the row's ``metadata.tool_setup`` calls, unseen by the model, initialise
   stateful servers from the row); its tool schemas go to the policy, which builds the prompt;
3. each assistant turn comes from the policy (text plus the tool calls its parser found);
4. tool calls run concurrently through the ToolHub, within the turn and rollout budgets; calls the parser
   could not decode get an error result the model can read; calls to the row's declared tools
   (``metadata.declared_tools``: offered, never run) are recorded for the rewards and end the episode;
5. a turn that calls no tool gets the row's next scripted user turn (``metadata.user_turns``,
   :mod:`agentrl.scripted`), or else optionally a simulated user's reply (an LLM through litellm);
6. the finished trajectory becomes the ``sample`` and the RewardSet scores it;
7. the record is appended to the run directory's ``rollouts.jsonl`` and returned.

A rollout that could not be scored (tool server down, generation aborted, reward crashed) has reward
``None`` and ``unscorable`` set; it is never scored 0.

The policy owns the tokens: in training it is verl's token stream (``agentrl.verl.agent_loop``), where
tool and user tokens are masked out and generated ids are never re-encoded; a test can script one.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Protocol

from agentrl import families
from agentrl.callcheck import json_arguments
from agentrl.record import RolloutRecord, StopReason
from agentrl.rundir import RunDir
from agentrl.trajectory import make_item, make_sample, make_step, unwrap

class GenerationAborted(Exception):
    """The model server aborted a generation, possibly with no tokens: ``GenerationAborted(why[, partial_text])``."""


class Call(NamedTuple):
    """A tool call the policy's parser decoded from one turn."""

    name: str
    arguments: Any  # a dict, or the JSON text of one


class Turn(NamedTuple):
    text: str  # the turn's text, special tokens skipped
    calls: list  # Call-like objects (name, arguments)
    raw: Optional[str] = None  # the turn with special tokens kept, for families whose markup is special tokens
    parse_errors: tuple = ()  # why the parser could not read the turn (it raised): reported as malformed calls


class Policy(Protocol):
    """The model side of one episode. It keeps the token stream and its budget."""

    versions: dict[str, Any]  # policy versions the model server reported for this rollout (global_steps, ...)
    model_seconds: float  # time spent waiting for the model server
    family: families.Family  # the model's tool-call format (optional: hermes when a policy has none)
    special_tokens: tuple[str, ...]  # removed from the visible answer (optional)

    async def start(self, messages: list[dict], tools: Optional[list]) -> None:
        """Build the prompt from the conversation so far and the tool schemas."""

    def room(self) -> int:
        """Response tokens left in this rollout's budget."""

    async def generate(self, sampling_params: dict[str, Any], room: int) -> Turn:
        """The next assistant turn, at most ``room`` tokens; raises GenerationAborted."""

    async def extend(self, previous: list[dict], messages: list[dict], tools: Optional[list]) -> bool:
        """Append tool or user messages (the conversation was ``previous``, is now ``messages``); False when
        they do not fit the response budget."""

    async def finish(self, prompt: list[dict]) -> int:
        """The rollout is over: close the token stream (``prompt``: the row's messages, for a rollout that
        failed before its prompt was built) and return its response length in tokens."""


class _NoTools:
    async def tool_schemas(self) -> list:
        return []

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


@dataclass
class _Progress:
    """The structured side of a rollout in progress (the policy keeps the tokens)."""

    messages: list[dict]
    steps: list[dict] = field(default_factory=list)
    tool_calls: int = 0
    ids_given: int = 0  # template-shaped tool-call ids handed out (calls run, refused, not parsed)
    user_turns: int = 0
    stop_reason: StopReason = StopReason.ANSWERED
    tool_seconds: float = 0.0


class Episode:
    """One rollout of the agent: ``state`` (rewards, tools, simulated user, agent settings) and a ``policy``."""

    def __init__(self, state: Any, policy: Policy) -> None:
        self.state = state
        self.agent = state.spec.agent
        self.policy = policy
        self.family: families.Family = getattr(policy, "family", None) or families.HERMES

    async def run(self, row: dict, sampling_params: dict[str, Any], *, trainer_step: Any = None,
                  group: Optional[str] = None, step_known: bool = True) -> RolloutRecord:
        """Play ``row`` to the end, score it, log it; ``trainer_step``: the step the prompt was drawn for."""
        started, wall_started = time.perf_counter(), time.time()
        item = make_item(row["messages"], row.get("metadata"), **row.get("fields", {}), id=row["id"], source=row.get("source"))
        rollout_id = f"r-{uuid.uuid4().hex[:16]}"
        hub = self.state.hub()
        st = _Progress(messages=[dict(m) for m in row["messages"]])
        unscorable: str | None = None
        session_cm = hub.rollout(rollout_id, allowed_tools=item.metadata.get("allowed_tools")) if hub else _NoTools()
        try:
            async with session_cm as session:
                await self._converse(st, session, hub is not None, item, sampling_params)
        except GenerationAborted as exc:  # the model server gave up on it: the answer is not the model's whole answer
            unscorable, st.stop_reason = f"model: {exc.args[0]}", StopReason.ABORTED
            if len(exc.args) > 1:
                st.steps.append(make_step(exc.args[1]))
        except Exception as exc:  # infrastructure failure: unscorable, never 0
            from agentrl.tools import ToolInfraError

            if not isinstance(exc, ToolInfraError):
                raise
            unscorable, st.stop_reason = f"tools: {exc}", StopReason.TOOL_INFRA_ERROR

        steps = st.steps or [make_step("")]
        messages = st.messages
        if messages[-1].get("role") != "assistant" and steps[-1]["response"]:
            messages.append({"role": "assistant", "content": steps[-1]["response"]})
        sample = make_sample(rollout_id, steps, messages=messages, reasoning=steps[-1].get("reasoning", ""))
        reward_started = time.perf_counter()
        score, components, passed = None, {}, {}
        turn_rewards: list = [None] * len(st.steps)
        turn_unscorable: dict[str, str] = {}
        if unscorable is None:
            result = await self.state.rewards.ascore(sample, item)
            score, components, unscorable, passed = result.score, result.components, result.unscorable, result.passed
            if result.turns is not None:
                turn_rewards = list(result.turns[: len(st.steps)])
                turn_unscorable = {str(k): why for k, why in result.turn_unscorable.items() if k < len(st.steps)}
        reward_seconds = time.perf_counter() - reward_started

        response_tokens = await self.policy.finish(row["messages"])
        version = self.policy.versions.get("global_steps", self.state.last_versions["global_steps"])
        record = RolloutRecord(
            rollout_id=rollout_id, prompt_id=item.id, source=item.get("source"),
            step=int(trainer_step) if trainer_step is not None else version,
            validation=row.get("split") == "val", policy_version=version, group=group,
            messages=messages, trajectories=steps, tool_calls=st.tool_calls, user_turns=st.user_turns,
            reward=score, components=components, passed=passed, unscorable=unscorable,
            reward_version=self.state.rewards.version, stop_reason=st.stop_reason,
            turn_rewards=turn_rewards, turn_unscorable=turn_unscorable,
            response_tokens=response_tokens, started_at=round(wall_started, 3), finished_at=round(time.time(), 3),
            seconds=round(time.perf_counter() - started, 4), model_seconds=round(self.policy.model_seconds, 4),
            tool_seconds=round(st.tool_seconds, 4), reward_seconds=round(reward_seconds, 4))
        run = RunDir(self.state.spec.run_dir)
        if step_known or record.validation:
            run.append_rollout(record)
        else:  # off-policy training: the step that trains it is known later (agentrl.metrics.Watcher)
            run.append_generated(record)
        return record

    async def _converse(self, st: _Progress, session: Any, has_tools: bool, item: Any,
                        sampling_params: dict[str, Any]) -> None:
        from agentrl.dataset import declared_tools, offered_tools
        from agentrl.scripted import held_back, scripted_turns

        declared = declared_tools(item.metadata)  # offered, never run: a served tool of the same name is hidden
        scripted = scripted_turns(item.metadata)  # the row's later user turns (agentrl.scripted)
        if held_back(scripted) and hasattr(session, "hold_back"):
            session.hold_back(held_back(scripted))
        setup = item.metadata.get("tool_setup")  # calls that initialise stateful servers from the row, unseen
        if setup:
            if not has_tools:
                from agentrl.tools import ToolInfraError

                raise ToolInfraError("(setup)", f"the row's metadata.tool_setup calls {setup[0]['name']!r}, but this "
                                     "run serves no tools; add the server that provides it to the config's tools", "setup")
            session.hold_back(c["name"] for c in setup)
            await session.setup(unwrap(setup))
        schemas = offered_tools(await session.tool_schemas(), declared)
        await self.policy.start(st.messages, schemas)
        user = None if scripted else self.state.simulated_user()
        for turn in range(self.agent.max_turns):
            room = self.policy.room()
            if room <= 0:
                st.stop_reason = StopReason.RESPONSE_BUDGET
                return
            said = read_turn(self.family, await self.policy.generate(sampling_params, room),
                             getattr(self.policy, "special_tokens", ()))
            calls = said.calls
            step = make_step(said.answer)
            if said.reasoning:
                step["reasoning"] = said.reasoning
            st.steps.append(step)
            assistant: dict[str, Any] = {"role": "assistant", "content": said.answer}
            # calls that could not be read or carry what JSON cannot: the model is told why, in its own format
            results = [self._error(st, f"malformed{n}", "(unparsed)", self.family.malformed_message(why))
                       for n, why in enumerate(said.malformed)]
            if not calls and not results:  # a plain answer: done, unless a scripted or simulated user replies
                st.messages.append({"role": "assistant", "content": said.answer})
                if scripted:
                    nxt = scripted.pop(0)
                    step["user_reply"] = nxt.text
                    st.user_turns += 1
                    if nxt.tools and hasattr(session, "offer"):
                        session.offer(nxt.tools)
                    if not await self._append(st, nxt.messages, schemas):
                        return
                    continue
                reply = await user.next_message(st.messages, dict(item.metadata)) if user else None
                if reply is None:
                    return
                step["user_reply"] = reply
                st.user_turns += 1
                if not await self._append(st, [{"role": "user", "content": reply}], schemas):
                    return
                continue
            results += await self._run_tools(st, step, assistant, calls, session, has_tools, unparsed=results,
                                             declared=declared)
            step["tool_results"] = results
            # the declared calls are the answer; with nothing served, so is any call of a row that declares tools
            if declared and step["tool_calls"] and (not has_tools or any(c["name"] in declared for c in step["tool_calls"])):
                st.stop_reason = StopReason.DECLARED_CALL
                return
            if turn == self.agent.max_turns - 1:
                st.stop_reason = StopReason.TURN_BUDGET
                return
            tool_messages = [{"role": "tool", "content": r["content"], "tool_call_id": r["id"], "name": r["name"]}
                             for r in results]
            if not await self._append(st, tool_messages, schemas):
                return
        st.stop_reason = StopReason.TURN_BUDGET

    async def _run_tools(self, st: _Progress, step: dict, assistant: dict, calls: list, session: Any,
                         has_tools: bool, unparsed: list[dict], declared: dict | None = None) -> list[dict]:
        """Run this turn's calls within the budgets; refused calls get an error result the model can read.
        Calls to ``declared`` tools are recorded, not run, and outside the budgets (nothing runs)."""
        from agentrl.tools import ToolCall

        declared = declared or {}
        answer = [ToolCall(id=self._next_id(st, f"d{n}"), name=c.name, arguments=_as_args(c.arguments))
                  for n, c in enumerate(c for c in calls if c.name in declared)]
        asked, calls = calls, [c for c in calls if c.name not in declared]
        budget = self.agent.max_tool_calls - st.tool_calls
        one_call = self.family.one_call_per_turn  # the template renders a single call per assistant turn
        now = max(0, min(budget, 1 if one_call else self.agent.max_parallel_calls))
        tool_calls = [ToolCall(id=self._next_id(st, f"c{st.tool_calls + i}"), name=c.name, arguments=c.arguments)
                      for i, c in enumerate(calls[:now])]
        refused = [self._error(st, f"refused{n}", c.name, "error: tool call not run: " + (
            "the tool-call budget of this rollout is used up; answer now" if budget <= 0 else
            "this model's chat template takes one tool call per turn; make the next call in your next turn"
            if one_call else "too many calls in one turn")) for n, c in enumerate(calls[now:])]
        st.tool_calls += len(tool_calls) + len(answer)
        recorded = _in_order(asked, declared, answer, tool_calls)
        step["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in recorded]
        assistant["tool_calls"] = [{"type": "function", "id": c.id, "function": {"name": c.name, "arguments": c.arguments}}
                                   for c in recorded]
        # a call that did not parse stays in the conversation as the attempt its error result answers
        # (templates such as gpt-oss's refuse a tool message that no call precedes)
        assistant["tool_calls"] += [{"type": "function", "id": r["id"], "function": {"name": r["name"], "arguments": {}}}
                                    for r in unparsed]
        st.messages.append(assistant)
        started = time.perf_counter()
        if tool_calls and has_tools:
            results = [r.to_dict() for r in await session.call_many(tool_calls)]
        else:
            results = [{"id": c.id, "name": c.name, "is_error": True, "content": f"error: unknown tool {c.name!r}: " + (
                f"this row declares {', '.join(declared)} and no tool server runs here" if declared else
                "no tool servers are configured for this run, so no tool can be called; answer in text")}
                for c in tool_calls]
        st.tool_seconds += time.perf_counter() - started
        return results + refused

    def _next_id(self, st: _Progress, plain: str) -> str:
        """``plain`` as a tool-call id, or one in the form the model's template demands (Mistral: 9 characters)."""
        if not self.family.call_id_length:
            return plain
        st.ids_given += 1
        return self.family.call_id(st.ids_given - 1, uuid.uuid4().hex)

    def _error(self, st: _Progress, plain_id: str, name: str, message: str) -> dict:
        """An error result the model reads in place of a call that did not run."""
        return {"id": self._next_id(st, plain_id), "name": name, "is_error": True, "content": message}

    async def _append(self, st: _Progress, new_messages: list[dict], schemas: list | None) -> bool:
        """Append tool or user messages; False when the response budget is spent."""
        previous = list(st.messages)
        st.messages.extend(new_messages)
        if not await self.policy.extend(previous, st.messages, schemas):
            st.stop_reason = StopReason.RESPONSE_BUDGET
            return False
        return True


def _in_order(asked: list, declared: dict, answer: list, run: list) -> list:
    """The declared calls and the served calls that run, in the order the model made them."""
    answer_left, run_left = iter(answer), iter(run)
    picked = (next(answer_left) if c.name in declared else next(run_left, None) for c in asked)
    return [c for c in picked if c is not None]


def _as_args(arguments: Any) -> Any:
    """The parsed arguments, or the text itself where it is not JSON (NaN and Infinity included: the
    session answers the model with the reason, and the record keeps the text)."""
    if isinstance(arguments, str):
        from agentrl.tools.session import strict_json

        try:
            return strict_json(arguments)
        except ValueError:  # json.JSONDecodeError is one
            return arguments
    return arguments


class ReadTurn(NamedTuple):
    """One turn as the episode acts on it: the graded answer, the reasoning, the calls it runs, the reports."""

    answer: str
    reasoning: str
    calls: list  # Call records whose arguments are JSON objects
    malformed: list  # why each call that is not run was not run (told to the model)


def read_turn(family: families.Family, turn: Any, special_tokens: tuple[str, ...] = ()) -> ReadTurn:
    """A policy's turn (text, parsed calls, raw text, parse errors) read as the episode reads it."""
    text, calls, raw = turn[:3]
    raw = text if raw is None else raw
    said = family.split(raw, special_tokens)  # rewards read the answer; the reasoning goes beside it
    calls, refused = _checked(calls)
    # one report per broken call: the parser's failure speaks only where the format's own check found nothing
    # (both read the same text), and calls the check finds broken never reach the parser (agentrl.verl.parsers)
    found = family.malformed(raw)
    return ReadTurn(said.answer, said.reasoning, calls,
                    [*(found or getattr(turn, "parse_errors", ())), *refused])


def _checked(calls: list) -> tuple[list, list[str]]:
    """The calls whose arguments are a JSON object (as Call records), and why each other one is not run."""
    good, bad = [], []
    for call in calls:
        try:
            name = call.name
            if not isinstance(name, str) or not name.strip():
                raise ValueError("the call has no tool name")
            good.append(Call(name, json_arguments(call.arguments)))
        except Exception as exc:  # noqa: BLE001 - whatever the parser handed on, the tool never sees it
            bad.append(f"the call to {getattr(call, 'name', '?')!s:.60} was not run: {exc}")
    return good, bad
