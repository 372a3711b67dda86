"""LLM-judge reward: a model grades the final answer against ``item.metadata.rubric``; score in [0, 1].

Start from this file with ``agentrl reward new --preset llm_judge > reward.py`` and edit it.

Any litellm provider: MODEL = "openai/gpt-4o-mini" with ENV = ["OPENAI_API_KEY"], "anthropic/...",
or a local OpenAI-compatible server: MODEL = "openai/<served name>", API_BASE = "http://127.0.0.1:8000/v1".
Only the variables in ENV reach this reward; the key is passed to litellm explicitly.
Temperature 0; 5xx/429 retried with backoff; replies cached per (model, prompt). A judge that stays down,
refuses, or replies without a score ("Score: 7/10", {"score": 0.7}) makes the sample unscorable, not 0.
Rows without a rubric are not applicable.
"""

from agentrl.rewards.judge import DEFAULT_TEMPLATE, judge_score_sync, pick_api_key, render

MODEL = "openai/gpt-4o-mini"
API_BASE = None  # e.g. "http://127.0.0.1:8000/v1" for a local server
ENV = []  # e.g. ["OPENAI_API_KEY"]; the variables this reward may read
TIMEOUT = 300.0  # seconds for one grade() call, retries included
NETWORK = True  # the judge is reached over the network (needed when run in the sandbox)
# Fields: {item.prompt}, {item.metadata.rubric}, {item.metadata.<any key>}, {sample.final_answer}, ...
TEMPLATE = DEFAULT_TEMPLATE


def grade(sample, item, model=MODEL, api_base=API_BASE, template=TEMPLATE, env=None, api_key_env=None,
          retries=3, backoff=1.0, max_concurrency=8, scale=10.0):
    if not item["metadata"].get("rubric"):
        return None  # nothing to judge against
    if env is None:  # running as a file in the sandbox, where getenv() reads only the declared variables
        env = {name: getenv(name) for name in ENV if getenv(name) is not None}  # noqa: F821
    prompt = render(template, sample, item)
    return judge_score_sync(prompt, model=model, api_base=api_base, api_key=pick_api_key(env, api_key_env),
                             retries=retries, backoff=backoff, max_concurrency=max_concurrency, scale=scale)
