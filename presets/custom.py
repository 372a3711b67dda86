"""Your own reward. Edit ``grade`` and load it with ``agentrl.load_reward("reward.py")`` or in a config:

    rewards:
      - name: ./reward.py
        weight: 1.0

This file runs in the sandbox: no network unless NETWORK = True, only the environment variables listed
in ENV, a time and memory limit, and imports limited to the standard library basics, sympy, math_verify
and the agentrl.rewards helpers (agentrl.rewards.SANDBOX_IMPORTS lists them).

What grade() receives (attribute and key access both work):
    sample.final_answer         text of the last assistant turn
    sample.trajectories         steps: .response, .tool_calls [{id, name, arguments}], .tool_results [{id, name, content, is_error}]
    sample.messages             the whole conversation
    sample.rollout_id           unique per rollout
    item.prompt                 the last user message
    item.messages, item.metadata  the dataset row (expected_answer, rubric, expected_tools, tests, ...)

What it returns:
    a float (higher is better; kept within [-1e6, 1e6]), or
    None when this reward does not apply to the row (left out of the weighted mean; not a 0).
    Raising an exception marks the sample "unscorable" (kept out of training), not wrong.
"""

import re

ENV = []  # e.g. ["MY_SERVICE_TOKEN"]: the environment variables this reward may read
NETWORK = False  # True if grade() must reach the network


def grade(sample, item):
    expected = item["metadata"].get("expected_answer")
    if expected is None:
        return None  # this reward does not apply to rows without an expected answer

    answer = (sample["final_answer"] or "").strip()
    # Example: exact match on the last line, ignoring case and surrounding punctuation.
    last_line = answer.splitlines()[-1] if answer else ""
    normalise = lambda s: re.sub(r"\W+", " ", str(s)).strip().lower()  # noqa: E731
    return 1.0 if normalise(last_line) == normalise(expected) else 0.0
