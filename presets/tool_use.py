"""Tool-use reward: were ``item.metadata.expected_tools`` called, in order if asked, with the given arguments?

Start from this file with ``agentrl reward new --preset tool_use > reward.py`` and edit it.

    item.metadata = {
        "expected_tools": ["search", {"name": "add", "arguments": {"a": 2}}],  # arguments: subset match
        "ordered": True,          # optional: calls must come in this order
        "max_tool_calls": 3,      # optional budget; default = number of expected tools
        "rubric": "...",          # optional: also ask an LLM judge (set JUDGE_MODEL or pass judge_model)
    }

Score = fraction of expected tools matched by distinct successful calls, minus EXTRA_CALL_PENALTY per
call over budget (floored at 0). With a rubric and a judge model, the judge's score is mixed in with
weight JUDGE_WEIGHT; a judge failure makes the sample unscorable. Rows without expected_tools are not applicable.

Per turn (``{name: tool_use, per_turn: true}``): the result is ``{"episode": score, "turns": [...]}`` with
``-FAILED_CALL_PENALTY`` for each call of a turn that failed or did not parse and None for the other turns,
for per-turn credit (``agentrl.credit: turn``).
"""

from agentrl.rewards.judge import DEFAULT_TEMPLATE, judge_score_sync, pick_api_key, render
from agentrl.rewards.toolcheck import tool_calls, tool_score, turn_penalties

EXTRA_CALL_PENALTY = 0.1
FAILED_CALL_PENALTY = 0.2  # per turn, with per_turn=True
JUDGE_MODEL = None  # e.g. "openai/gpt-4o-mini"; None = tool check only
JUDGE_API_BASE = None
JUDGE_WEIGHT = 0.5
JUDGE_TEMPLATE = DEFAULT_TEMPLATE.replace(
    "Assistant's final answer:", "Tool calls and results, step by step:\n{sample.trajectories}\n\nAssistant's final answer:")
ENV = []  # e.g. ["OPENAI_API_KEY"] when a judge is used
TIMEOUT = 300.0  # seconds for one grade() call (a judge with retries can be slow)
NETWORK = False  # set True when JUDGE_MODEL is set and this file runs in the sandbox


def grade(sample, item, extra_call_penalty=EXTRA_CALL_PENALTY, judge_model=JUDGE_MODEL,
          judge_api_base=JUDGE_API_BASE, judge_weight=JUDGE_WEIGHT, env=None, api_key_env=None, backoff=1.0,
          per_turn=False, failed_call_penalty=FAILED_CALL_PENALTY):
    metadata = item["metadata"]
    expected = metadata.get("expected_tools")
    if expected is None:
        return None  # not a tool-use row
    score = tool_score(expected, tool_calls(sample), ordered=bool(metadata.get("ordered") or metadata.get("order")),
                       budget=metadata.get("max_tool_calls"), extra_call_penalty=extra_call_penalty)
    if judge_model and metadata.get("rubric"):
        if env is None:  # running as a file in the sandbox, where getenv() reads only the declared variables
            env = {name: getenv(name) for name in ENV if getenv(name) is not None}  # noqa: F821
        judged = judge_score_sync(render(JUDGE_TEMPLATE, sample, item), model=judge_model, api_base=judge_api_base,
                                   api_key=pick_api_key(env, api_key_env), backoff=backoff)
        score = (1 - judge_weight) * score + judge_weight * judged
    if per_turn:
        return {"episode": score, "turns": turn_penalties(sample, failed_call_penalty)}
    return score
