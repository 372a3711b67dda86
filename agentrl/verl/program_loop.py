"""The agent loop's side of ``agent.program``: each endpoint request sampled on verl's token stream.

    rollout = ProgramRollout(loop, sampling_params)            # loop: the AgentrlAgentLoop of this rollout
    record = await program.play(loop.state, rollout, run, row)  # the user's run() against its own endpoint
    rollout.outputs(record)     # AgentLoopOutput, or a list of them when the agent rewrote its history

``tool_choice`` is honoured without constrained decoding, which would train tokens the policy did not choose
freely: "none" reads no call (a call the model wrote anyway is served as its text); "required" and a named
function sample the turn again, up to ``TOOL_CHOICE_TRIES`` times, until it makes such a call (the policy's own
distribution given the call, as rejection sampling gives it); the missed samples are never trained, and a turn
that never calls is refused with a 422 naming the samples (a greedy sampler stops at the first repeat), or with
``agent.tool_choice_missed: serve`` its last sample is served as written and trained like any turn.

Each request is rendered with the model's chat template by the loop's Continuous Token builder, sampled through
``server_manager.generate`` (the rollout server in training, a local engine in ``agentrl eval``), and parsed with
the model family's tool-call parser into OpenAI's shape. :class:`agentrl.endpoint.tokens.TokenLedger` keeps the
exact ids. The trainer's sampling parameters apply (temperature and top_p stay the trainer's, so the rollout is
on-policy); a request's ``max_tokens`` can only lower the turn's budget.

Several sequences reach verl as a list of ``AgentLoopOutput``: verl 0.9.1's V1 agent-loop worker
(``AgentLoopWorkerTQ._agent_loop_postprocess``) stores each under ``{uid}_{session}_{i}``, gives every one the
final output's reward, and trains them all.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any, Optional

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

from agentrl.endpoint.shapes import Answer, ChatRequest, RequestError
from agentrl.endpoint.tokens import TokenLedger
from agentrl.episode import GenerationAborted
from agentrl.record import RolloutRecord
from agentrl.verl import parsers
from agentrl.verl.sampling import sample, sampling_for


TOOL_CHOICE_TRIES = 4  # samples of one turn for tool_choice "required" or a named function before it is refused


def _meets(choice: object, calls: list[tuple[str, str]]) -> bool:
    """The turn's calls do what ``tool_choice`` asks ("auto" and "none" ask nothing)."""
    if choice == "required":
        return bool(calls)
    if isinstance(choice, dict):
        return bool(calls) and all(name == choice["function"]["name"] for name, _ in calls)
    return True


class _LoopBuilder:
    """The loop's Continuous Token builder as :class:`agentrl.endpoint.tokens.Builder`."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop

    async def build(self, messages: list[dict], tools: Optional[list]) -> list[int]:
        return await self.loop.ct_build_initial_tokens(messages, tools=tools)

    async def append(self, previous, messages, ids, mask, logprobs, tools):
        merged, mask, logprobs = await self.loop.ct_merge_context_msg(previous, messages, ids, mask, logprobs,
                                                                      tools=tools)
        return merged.token_ids, mask, logprobs


class ProgramRollout:
    """One rollout's endpoint handler: renders, samples, parses, and keeps the served turns and the tokens."""

    def __init__(self, loop: Any, sampling_params: dict[str, Any]) -> None:
        self.loop = loop
        self.sampling_params = dict(sampling_params)
        self.request_id = uuid.uuid4().hex
        self.ledger = TokenLedger(_LoopBuilder(loop), loop.response_length)
        self.turns: list[dict] = []  # served assistant turns: response, reasoning, tool_calls, next_messages
        self.last_messages: list[dict] = []
        self.versions: dict[str, Any] = {}
        self.model_seconds = 0.0
        self.aborted: Optional[str] = None
        self.out_of_room = False
        self.calls_served = 0
        self.generated: list[list[int]] = []  # every generate() call's ids, as the server returned them
        self.rejected: list[list[int]] = []  # samples that missed a forced tool_choice: never trained
        self.missed = 0  # turns served without the forced call (agent.tool_choice_missed: serve)

    async def complete(self, request: ChatRequest) -> Answer:
        if self.turns:
            self.turns[-1]["next_messages"] = request.messages
        self.last_messages = request.messages
        ids = await self.ledger.prompt(request.messages, request.tools)
        room = self.ledger.room()
        if request.max_tokens:
            room = min(room, request.max_tokens)
        if room <= 0:
            self.out_of_room = True
            return Answer(text="", finish="length", prompt_tokens=len(ids))
        tries = TOOL_CHOICE_TRIES if request.tool_choice not in ("auto", "none") else 1
        for attempt in range(tries):
            token_ids, logprobs, stopped, text, reasoning, pairs = await self._sample(ids, room, request)
            if _meets(request.tool_choice, pairs):
                break
            if attempt + 1 == tries or (attempt and token_ids == self.rejected[-1]):  # greedy: it would not change
                if getattr(self.loop.agent, "tool_choice_missed", "refuse") == "serve":
                    self.missed += 1  # served as the model wrote it: the framework sees a turn without the call
                    break
                self.rejected.append(token_ids)
                raise RequestError(
                    f"tool_choice {json.dumps(request.tool_choice)}: the policy made no such call in "
                    f"{attempt + 1} samples of this turn (agentrl samples the policy unconstrained and keeps "
                    f"the first that calls, so every trained token is the policy's own); send tool_choice \"auto\" "
                    f"and reward the call, or set agent.tool_choice_missed: serve to serve such a turn as written",
                    status=422, param="tool_choice", code="tool_choice_not_met")
            self.rejected.append(token_ids)
        self.generated.append(list(token_ids))
        call_ids = [f"call_{self.calls_served + i}_{uuid.uuid4().hex[:8]}" for i in range(len(pairs))]
        self.calls_served += len(pairs)
        finish = "tool_calls" if pairs else ("length" if len(token_ids) >= room and not stopped else "stop")
        served = {"role": "assistant", "content": text,
                  "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, (n, a) in zip(call_ids, pairs)]}
        self.ledger.sampled(token_ids, logprobs, served)
        self.turns.append({"response": text, "reasoning": reasoning, "next_messages": None,
                           "tool_calls": [{"id": i, "name": n, "arguments": _args(a)} for i, (n, a) in zip(call_ids, pairs)]})
        return Answer(text=text, calls=pairs, call_ids=call_ids, finish=finish, reasoning=reasoning,
                      prompt_tokens=len(ids), completion_tokens=len(token_ids))

    async def _sample(self, ids: list[int], room: int, request: ChatRequest) -> tuple:
        """One sample of this turn: (ids, logprobs, stopped, text, reasoning, calls as (name, JSON arguments))."""
        loop = self.loop
        out, seconds = await sample(loop, self.request_id, ids, self.sampling_params, room, self.versions)
        self.model_seconds += seconds
        token_ids = list(out.token_ids)
        if out.stop_reason in ("aborted", "abort"):
            self.aborted = f"generation aborted by the rollout server after {len(token_ids)} tokens"
            raise GenerationAborted(self.aborted)
        logprobs = out.log_probs
        cut = stop_cut(loop.tokenizer, token_ids, request.stop)
        if cut is not None:  # sampling is left to right: the ids before the cut are what a stop would have kept
            token_ids, logprobs = token_ids[:cut[0]], (logprobs[:cut[0]] if logprobs else logprobs)
        raw = loop.tokenizer.decode(token_ids, skip_special_tokens=False)
        if cut is not None:
            raw = raw[:cut[1]] if cut[1] <= len(raw) else raw
        said = loop.family.split(raw, loop.special_tokens)
        text = said.answer
        _, calls = await loop.parser.extract_tool_calls(token_ids, parsers.tool_schemas(request.tools))
        if request.tool_choice == "none" and calls or loop.family.malformed(raw) and not calls:
            # a call not read (tool_choice "none") or not readable: its message is what the model wrote, as an
            # OpenAI model's unparsed output would be
            text, calls = loop.tokenizer.decode(token_ids, skip_special_tokens=True).strip(), []
        pairs = [(c.name, c.arguments if isinstance(c.arguments, str) else _json(c.arguments)) for c in calls]
        stopped = cut is not None or bool(token_ids) and (token_ids[-1] == loop.tokenizer.eos_token_id
                                       or token_ids[-1] in set(sampling_for(loop, self.sampling_params, room)
                                                               .get("stop_token_ids") or []))
        return token_ids, logprobs, stopped, text, said.reasoning, pairs

    def response_tokens(self) -> int:
        return sum(len(seq.mask) for seq in self.ledger.sequences)

    async def outputs(self, record: RolloutRecord, prompt: list[dict]) -> AgentLoopOutput | list[AgentLoopOutput]:
        """What verl trains on: one output per sequence, each with the rollout's score (NaN: could not score)."""
        loop = self.loop
        sequences = [s for s in self.ledger.sequences if s.sampled] or self.ledger.sequences[-1:]
        score = float(record.reward) if record.reward is not None else float("nan")
        last = loop.state.last_versions
        extra = {**last, **self.versions, "agentrl_unscorable": 1 if record.unscorable else 0,
                 "agentrl_tool_calls": record.tool_calls, "agentrl_rollout_id": record.rollout_id,
                 "agentrl_sequences": max(1, len(sequences))}
        if not sequences:  # the agent never asked the model: the row's prompt and one filler token, as the agent
            # loop does for a rollout that failed before the model spoke (its NaN score gives it advantage 0)
            ids = await self.ledger.builder.build(prompt, None)
            filler = loop.tokenizer.eos_token_id if loop.tokenizer.eos_token_id is not None else 0
            logprobs = [0.0] if loop.rollout_config.calculate_log_probs else None
            out = self._output(ids[-loop.rollout_config.prompt_length:], [filler], [1], logprobs, score, extra, 1)
            audit(record, self.generated, [out], self.rejected)
            return out
        outs = []
        for seq in sequences:
            response = seq.response_ids[: loop.response_length]
            logprobs = seq.logprobs[: len(response)] if seq.logprobs and len(seq.logprobs) >= len(response) else None
            outs.append(self._output(seq.prompt_ids[-loop.rollout_config.prompt_length:], response,
                                     seq.mask[: loop.response_length], logprobs, score, dict(extra), seq.requests))
        audit(record, self.generated, outs, self.rejected)
        if len(outs) == 1:
            return outs[0]
        for out in outs:  # verl's V1 worker copies this from the final output to the others
            out.extra_fields["reward_extra_info"] = {}
        return outs

    def _output(self, prompt, response, mask, logprobs, score, extra, turns) -> AgentLoopOutput:
        return AgentLoopOutput(prompt_ids=list(prompt), response_ids=list(response), response_mask=list(mask),
                               response_logprobs=logprobs, reward_score=score, num_turns=turns,
                               metrics={"tool_calls": 0.0, "compute_score": 0.0}, extra_fields=extra)


def stop_cut(tokenizer: Any, token_ids: list[int], stops: list[str]) -> Optional[tuple[int, int]]:
    """Where a request's ``stop`` strings end the turn: (ids kept: the shortest prefix whose text holds a stop
    string, characters of text kept: up to that string), or None when no stop string occurs."""
    if not stops or not token_ids:
        return None
    text = tokenizer.decode(token_ids, skip_special_tokens=False)
    found = [(text.find(s), s) for s in stops if s in text]
    if not found:
        return None
    at, stop = min(found)
    lo, hi = 1, len(token_ids)  # the shortest prefix whose decoded text reaches past the stop string
    while lo < hi:
        mid = (lo + hi) // 2
        if len(tokenizer.decode(token_ids[:mid], skip_special_tokens=False)) >= at + len(stop):
            hi = mid
        else:
            lo = mid + 1
    return lo, at


AUDIT_ENV = "AGENTRL_TOKEN_AUDIT"


def audit(record: RolloutRecord, generated: list[list[int]], outs: list[AgentLoopOutput],
          rejected: Optional[list[list[int]]] = None) -> None:
    """With ``AGENTRL_TOKEN_AUDIT=FILE``: one JSON line per rollout with the ids each ``generate`` returned and
    each sequence handed to verl (prompt, response, mask, score), to check that what is trained was sampled, and
    the samples a forced ``tool_choice`` rejected (never trained)."""
    path = os.environ.get(AUDIT_ENV)
    if not path:
        return
    line = {"rollout_id": record.rollout_id, "reward": record.reward, "generated": generated, "rejected": rejected or [],
            "sequences": [{"prompt_ids": o.prompt_ids, "response_ids": o.response_ids, "mask": o.response_mask,
                           "reward_score": o.reward_score} for o in outs]}
    with open(path, "a") as fh:
        fh.write(json.dumps(line) + "\n")


def _json(value: Any) -> str:
    return json.dumps(value)


def _args(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except (TypeError, json.JSONDecodeError):
        return arguments
