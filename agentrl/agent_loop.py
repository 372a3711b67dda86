"""The multi-turn agent loop verl runs for every rollout: model ↔ MCP tools, then the rewards.

One sample, start to end (``AgentrlAgentLoop.run``):
1. the dataset row comes back from ``extra_info.agentrl_row`` as the ``item`` (messages, metadata);
2. a per-rollout MCP session opens (tool schemas go into the chat template);
3. each assistant turn is generated token-in/token-out by the rollout server; verl's Continuous Token
   builder appends the tokens, so generated ids are never re-encoded from text and every template
   or tool token gets ``response_mask`` 0;
4. tool calls are parsed with verl's parser registry and run concurrently through the ToolHub;
5. the finished trajectory becomes the ``sample`` and the RewardSet scores it;
6. the rollout is appended to ``rollouts.jsonl`` and handed back to verl with its score.

A rollout that could not be scored (tool server down, reward crashed) has every response token
masked out and ``agentrl_unscorable`` set, and agentrl's GRPO estimator keeps it out of its group.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
import uuid
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
from verl.experimental.agent_loop.tool_parser import ToolParser

from agentrl import runlog
from agentrl.trajectory import make_item, make_sample, make_step, unwrap

logger = logging.getLogger(__name__)
_TOOL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

_spec_cache: dict[str, dict] = {}
_rewards_cache: dict[str, Any] = {}
_hubs: dict[tuple[int, str], Any] = {}


def load_spec(path: str) -> dict:
    if path not in _spec_cache:
        with open(path) as fh:
            _spec_cache[path] = json.load(fh)
    return _spec_cache[path]


def _rewards(spec_path: str, spec: dict):
    if spec_path not in _rewards_cache:
        from agentrl.rewards import RewardSet

        _rewards_cache[spec_path] = RewardSet.from_config(spec["rewards"], where="agentrl.rewards")
    return _rewards_cache[spec_path]


def _hub(spec_path: str, spec: dict):
    """One ToolHub per event loop (MCP sessions belong to the loop that opened them)."""
    if not spec.get("tools"):
        return None
    key = (id(asyncio.get_running_loop()), spec_path)
    if key not in _hubs:
        from agentrl.tools import ToolHub

        _hubs[key] = ToolHub.from_config(spec["tools"], allow=spec.get("tool_allow"),
                                         max_result_chars=spec["agent"]["max_tool_result_chars"])
    return _hubs[key]


class _NoTools:
    async def tool_schemas(self) -> list:
        return []


class _NoToolsContext:
    async def __aenter__(self):
        return _NoTools()

    async def __aexit__(self, *exc):
        return False


@register("agentrl")
class AgentrlAgentLoop(AgentLoopBase):
    """agentrl's agent loop: MCP tools, budgets, structured trajectories, agentrl rewards."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec_path = str(self.config.agentrl.spec)
        self.spec = load_spec(self.spec_path)
        self.agent = self.spec["agent"]
        self.response_length = int(self.rollout_config.response_length)
        self.parser = ToolParser.get_tool_parser(self.agent["tool_parser"], self.tokenizer)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        started = time.perf_counter()
        row = json.loads(kwargs["extra_info"]["agentrl_row"])
        item = make_item(row["messages"], row.get("metadata"), id=row["id"], source=row.get("source"))
        rollout_id = f"r-{uuid.uuid4().hex[:16]}"
        request_id = uuid.uuid4().hex
        allowed = item.metadata.get("allowed_tools") if isinstance(item.metadata, dict) else None
        hub = _hub(self.spec_path, self.spec)
        messages = [dict(m) for m in row["messages"]]
        steps: list[dict] = []
        unscorable: str | None = None
        prompt_ids: list[int] = []
        runtime_ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        weights_step = None
        tool_calls_made = 0
        version_tags: dict[str, Any] = {}
        tool_seconds = 0.0
        model_seconds = 0.0
        stop_reason = "no_tool_call"

        session_cm = hub.rollout(rollout_id, allowed_tools=allowed) if hub else _NoToolsContext()
        try:
            async with session_cm as session:
                schemas = await session.tool_schemas()
                runtime_ids = await self.ct_build_initial_tokens(messages, tools=schemas or None)
                prompt_ids = list(runtime_ids)
                for turn in range(self.agent["max_turns"]):
                    room = self.response_length - len(mask)
                    if room <= 0:
                        stop_reason = "response_budget"
                        break
                    params = dict(sampling_params)
                    params["max_tokens"] = room
                    if self.parser.stop_token_ids:
                        params["stop_token_ids"] = sorted(set(params.get("stop_token_ids") or []) | set(self.parser.stop_token_ids))
                    t_model = time.perf_counter()
                    out = await self.server_manager.generate(request_id, prompt_ids=runtime_ids, sampling_params=params)
                    model_seconds += time.perf_counter() - t_model
                    weights_step = out.extra_fields.get("global_steps", weights_step)
                    for key in ("global_steps", "min_global_steps", "max_global_steps"):
                        if key in out.extra_fields:  # verl's trainer reads these (policy staleness)
                            version = out.extra_fields[key]
                            if key == "min_global_steps" and key in version_tags:
                                version = min(version_tags[key], version)
                            version_tags[key] = version
                    merged, mask, new_logprobs = await self.ct_merge_assistant_token(
                        runtime_ids, out.token_ids, mask, logprobs if (logprobs or out.log_probs) else None,
                        assistant_logprobs=out.log_probs or None)
                    runtime_ids = merged.token_ids
                    logprobs = new_logprobs or []
                    text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
                    content, calls = await self.parser.extract_tool_calls(out.token_ids, None)
                    step = make_step(text)
                    steps.append(step)
                    assistant: dict[str, Any] = {"role": "assistant", "content": content or ""}
                    results = self._malformed_calls(text)
                    if not calls and not results:
                        break
                    budget = self.agent["max_tool_calls"] - tool_calls_made
                    allowed_now = max(0, min(budget, self.agent["max_parallel_calls"]))
                    results += [{"id": f"over{n}", "name": c.name, "is_error": True,
                                 "content": "error: tool call not run: "
                                            + ("the tool-call budget of this rollout is used up; answer now"
                                               if budget <= 0 else "too many calls in one turn")}
                                for n, c in enumerate(calls[allowed_now:])]
                    calls = calls[:allowed_now]
                    from agentrl.tools import ToolCall

                    tool_calls = [ToolCall(id=f"c{tool_calls_made + i}", name=c.name, arguments=c.arguments)
                                  for i, c in enumerate(calls)]
                    tool_calls_made += len(tool_calls)
                    step["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": _as_args(c.arguments)} for c in tool_calls]
                    assistant["tool_calls"] = [{"type": "function", "id": c.id,
                                                "function": {"name": c.name, "arguments": _as_args(c.arguments)}}
                                               for c in tool_calls]
                    messages.append(assistant)
                    t0 = time.perf_counter()
                    if tool_calls and hub is not None:
                        done = await session.call_many(tool_calls)
                        results = [r.to_dict() for r in done] + results
                    elif tool_calls:
                        results = [{"id": c.id, "name": c.name, "content": "error: no tools are configured for this run",
                                    "is_error": True} for c in tool_calls] + results
                    tool_seconds += time.perf_counter() - t0
                    step["tool_results"] = results
                    if turn == self.agent["max_turns"] - 1:
                        stop_reason = "turn_budget"
                        break
                    previous = list(messages)
                    for r in results:
                        messages.append({"role": "tool", "content": r["content"], "tool_call_id": r["id"]})
                    merged, new_mask, logprobs_aligned = await self.ct_merge_context_msg(
                        previous, messages, runtime_ids, mask, logprobs or None, tools=schemas or None)
                    if len(new_mask) >= self.response_length:
                        stop_reason = "response_budget"
                        break
                    runtime_ids, mask = merged.token_ids, new_mask
                    logprobs = logprobs_aligned or []
        except Exception as exc:  # noqa: BLE001 - infrastructure failure: unscorable, never 0
            from agentrl.tools import ToolInfraError

            if not isinstance(exc, ToolInfraError):
                raise
            unscorable = f"tools: {exc}"
            stop_reason = "tool_infra_error"

        if not steps:
            steps.append(make_step(""))
        if messages and messages[-1].get("role") != "assistant" and steps[-1]["response"]:
            messages.append({"role": "assistant", "content": steps[-1]["response"]})
        sample = make_sample(rollout_id, steps, messages=messages)
        reward_started = time.perf_counter()
        score = None
        components: dict[str, Any] = {}
        if unscorable is None:
            result = await _rewards(self.spec_path, self.spec).ascore(sample, item)
            score, components, unscorable = result.score, result.components, result.unscorable
        reward_seconds = time.perf_counter() - reward_started

        response_ids = runtime_ids[len(prompt_ids):][: self.response_length]
        mask = mask[: self.response_length]
        if unscorable is not None:
            mask = [0] * len(mask)
        record = {
            "rollout_id": rollout_id, "prompt_id": item.id, "source": item.get("source"), "step": weights_step,
            "messages": messages, "trajectory": unwrap(steps), "tool_calls": tool_calls_made,
            "reward": score, "components": components, "unscorable": unscorable, "stop_reason": stop_reason,
            "response_tokens": len(response_ids), "seconds": round(time.perf_counter() - started, 4),
            "model_seconds": round(model_seconds, 4), "tool_seconds": round(tool_seconds, 4),
            "reward_seconds": round(reward_seconds, 4),
            "validation": bool(kwargs.get("validate", False)),
        }
        runlog.append_rollout(self.spec["run_dir"], record)
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=logprobs[: len(response_ids)] if logprobs else None,
            reward_score=float(score) if score is not None else 0.0,
            num_turns=len(messages) - len(row["messages"]) + 1,
            metrics={"tool_calls": tool_seconds, "compute_score": reward_seconds},
            extra_fields={**version_tags, "agentrl_unscorable": 1 if unscorable else 0, "agentrl_tool_calls": tool_calls_made,
                          "agentrl_rollout_id": rollout_id},
        )

    @staticmethod
    def _malformed_calls(text: str) -> list[dict]:
        """verl's parsers drop tool calls they cannot decode; tell the model instead."""
        blocks = _TOOL_BLOCK.findall(text)
        bad = []
        for n, block in enumerate(blocks):
            try:
                call = json.loads(block)
                if isinstance(call, dict) and isinstance(call.get("name"), str) and "arguments" in call:
                    continue
            except json.JSONDecodeError:
                pass
            bad.append({"id": f"malformed{n}", "name": "(unparsed)", "is_error": True,
                        "content": 'error: malformed tool call; write <tool_call>{"name": "TOOL", '
                                   '"arguments": {...}}</tool_call> with valid JSON'})
        return bad


def _as_args(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments
