"""Negative controls: answers a reward must not pay for, built from one dataset row.

    controls = negative_controls(item)            # item: a row as rewards see it (agentrl.trajectory.make_item)
    controls["the gold answer truncated"]         # a sample: {"final_answer": "20", "trajectories": [...], ...}
    rewards.score(controls["empty"], item).score  # should stay below the pass threshold, for every control

Each control is a whole sample, so the ones that hide the gold answer where a grader should not look (the
reasoning, an earlier turn) test the grader's reading as much as its comparing. ``agentrl reward review`` and
``agentrl train``'s pre-flight score them on the first rows of the data (agentrl.rewards.review); a control
that scores at or above the threshold is reported with its row and the reward that paid.
"""

from __future__ import annotations

import re
from typing import Any

from agentrl.trajectory import make_sample, make_step

JUNK = ("Let me think about many possibilities. It could be 1, or 2, or 7.5%, or 12, or 1,000, or 0.25, or 42. "
        "Some say {answer}. Others say 3.14, 99%, 100 million, 17, 0.5, 2024, or 8. Any of these may be right.")
CONSTANTS = ("42", "0", "1")  # the constant answer: the first of these that is not the row's own answer
UNSURE = "I am not sure."


def reference_of(item: Any) -> str | None:
    """The row's gold answer: ``reference_answer``, ``expected_answer`` or ``answer``, at the top or in metadata."""
    for where in (item, item.get("metadata") or {}):
        for key in ("reference_answer", "expected_answer", "answer"):
            value = where.get(key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
                return str(value)
    return None


def truncated(ref: str) -> str | None:
    """The gold cut short (its first half of words, or of characters for one word); None when too short to cut."""
    words = ref.split()
    if len(words) > 1:
        return " ".join(words[: len(words) // 2])
    core = ref.strip()
    return core[: len(core) // 2] if len(core) > 1 else None


def adversarial_answers(item: Any) -> dict[str, str]:
    """The controls that are a final answer alone."""
    prompt = item.get("prompt") or ""
    numbers = re.findall(r"-?\d[\d,]*(?:\.\d+)?%?", prompt)
    ref = reference_of(item) or "42"
    out = {
        "empty": "", "the question echoed": prompt, "a lone ':'": ":", '"correct"': "correct",
        "every number of the prompt": " ".join(numbers) or "0 1 2 3", "the answer buried among others": JUNK.format(answer=ref),
        '"PASSED"': "PASSED", "a huge output": "lorem ipsum " * 20_000,
        "a constant answer": next(c for c in CONSTANTS if c != ref.strip()),
        "format without content": "Final answer: \\boxed{} <answer></answer>",
    }
    cut = truncated(ref)
    if cut:
        out["the gold answer truncated"] = f"The answer is {cut}"
    return out


def negative_controls(item: Any) -> dict[str, Any]:
    """Every control for ``item`` as a sample; the placement controls only for rows that have a gold answer."""
    controls = {label: make_sample(f"control-{n}", [make_step(answer)])
                for n, (label, answer) in enumerate(adversarial_answers(item).items())}
    ref = reference_of(item)
    if ref is not None:
        thought = f"The question asks for something I can work out: it is {ref}. But I will not say so."
        step = make_step(UNSURE)
        step["reasoning"] = thought
        controls["the gold answer in the reasoning only"] = make_sample(
            "control-reasoning", [step], reasoning=thought, messages=[{"role": "assistant", "content": UNSURE}])
        first, last = make_step(f"The answer is {ref}."), make_step(f"No, scratch that. {UNSURE}")
        controls["the gold answer in an earlier turn only"] = make_sample(
            "control-earlier", [first, last], messages=[{"role": "assistant", "content": first["response"]},
                                                        {"role": "user", "content": "Are you sure?"},
                                                        {"role": "assistant", "content": last["response"]}])
    return controls
