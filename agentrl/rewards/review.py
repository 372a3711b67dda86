"""``agentrl reward review CONFIG [--cases FILE]``: is this reward fit to train on? Also the pre-flight of ``agentrl train``.

    $ agentrl reward review configs/research.yaml --cases human_scores.jsonl
    static       ok   2 rewards load; templates name fields every row has; declared env present
    gold         ok   5/5 reference answers score >= 0.5
    adversarial  FAIL "correct" scored 1.00 on train.jsonl:1 (...)
    agreement    ok   18/20 agree with the human scores, Cohen's kappa 0.78
    determinism  ok   the same input scored twice gives 1.00 and 1.00

Checks, each on the first ``rows`` rows of the training data:
static (the rewards load, sandboxed code compiles under the sandbox's policy, declared env present, every
``{{item.<field>}}`` exists in every row); gold (the row's reference answer scores at or above the pass
threshold); adversarial (the negative controls of agentrl.rewards.controls: empty, the question echoed, a lone ":",
"correct", every number of the prompt, the answer buried among other candidates, "PASSED", a huge output, a
constant answer, format without content, the gold answer truncated, the gold answer in the reasoning only or
in an earlier turn only: each must score below it, in the weighted total and in every weighted reward alone,
since GRPO learns a hack any one reward pays for); agreement with
human scores (``--cases``: JSONL of ``{"sample", "item", "human_score"}``; agreement and Cohen's kappa after
cutting both at the threshold); determinism (one input scored twice; model graders not at temperature 0
are flagged). The threshold is the reward's ``pass_threshold`` when it has one, else 0.5.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.errors import AgentrlError
from agentrl.rewards.controls import adversarial_answers, negative_controls, reference_of  # noqa: F401 (re-exported)
from agentrl.rewards.errors import RewardConfigError
from agentrl.trajectory import as_item, make_sample, make_step

DEFAULT_THRESHOLD = 0.5

class ReviewError(AgentrlError):
    """The reward failed its review; the message lists what fooled it and how to skip the pre-flight."""


@dataclass
class Check:
    name: str
    ok: bool
    lines: list[str] = field(default_factory=list)


def cohen_kappa(a: list[bool], b: list[bool]) -> float | None:
    """Cohen's kappa of two binary raters; None when it is undefined (both always say the same one thing)."""
    n = len(a)
    if not n:
        return None
    po = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return None if pe == 1 else (po - pe) / (1 - pe)


def threshold_of(rewards: Any) -> float:
    weighted = [c for c in rewards.components if c.weight > 0]
    found = [getattr(c.reward, "pass_threshold", None) for c in weighted]
    found = [t for t in found if t is not None]
    return max(found) if found and len(found) == len(weighted) else DEFAULT_THRESHOLD


def _score(rewards: Any, sample: Any, item: Any) -> tuple[float | None, str | None]:
    result = rewards.score(sample, item)
    return result.score, result.unscorable


def _sample(answer: str, tag: str) -> Any:
    return make_sample(f"review-{tag}", [make_step(answer)])


def load_rows(path: str, limit: int) -> list[tuple[str, Any]]:
    from agentrl.dataset import read_rows

    rows = []
    for lineno, row in read_rows(path):
        rows.append((f"{Path(path).name}:{lineno}", as_item(row)))
        if len(rows) >= limit:
            break
    return rows


def static_check(rewards_config: list, rows: list[tuple[str, Any]], where: str) -> tuple[Check, Any]:
    from agentrl.rewards import RewardSet
    from agentrl.rewards.gradertemplate import check_rows

    try:
        rewards = RewardSet.from_config(rewards_config, where=where)
        for comp in rewards.components:
            grader = getattr(comp.reward, "grader", None)
            template = comp.reward.options.get("template")
            if grader is not None:
                check_rows(grader.item_fields, rows, f"{where}: {comp.label}")
            elif isinstance(template, str):  # an llm_judge-style template option
                check_judge_template(template, rows, f"{where}: {comp.label}.template")
            # reward files were compiled and their imports checked under the sandbox's policy by the load itself
    except RewardConfigError as exc:
        return Check("static", False, [str(exc)]), None
    labels = ", ".join(c.label for c in rewards.components)
    return Check("static", True, [f"{len(rewards.components)} reward(s) load ({labels}); templates name fields every "
                                  f"row has; declared env present"]), rewards


def check_judge_template(template: str, rows: list[tuple[str, Any]], where: str) -> None:
    from agentrl.rewards.gradertemplate import check_rows
    from agentrl.rewards.judge import template_fields

    sample_keys = ("final_answer", "trajectories", "messages", "rollout_id")
    required = set()
    for path, optional in template_fields(template):
        root, _, rest = path.partition(".")
        if root == "sample" and rest.split(".")[0] not in sample_keys:
            raise RewardConfigError(f"{where}: {{{path}}} does not exist; a sample has {', '.join(sample_keys)}")
        if root == "item" and not optional and rest not in ("prompt", "messages", "id", "source"):
            required.add(rest[len("metadata."):] if rest.startswith("metadata.") else rest)
    check_rows(required, rows, where)


def review(rewards_config: list, rows: list[tuple[str, Any]], *, cases: str | None = None,
           where: str = "agentrl.rewards") -> list[Check]:
    """Run every check; the first (static) failing stops the rest."""
    static, rewards = static_check(rewards_config, rows, where)
    if rewards is None:
        return [static]
    threshold = threshold_of(rewards)
    checks = [static]
    gold = Check("gold", True)
    with_ref = [(at, item, reference_of(item)) for at, item in rows if reference_of(item) is not None]
    for at, item, ref in with_ref:
        score, why = _score(rewards, _sample(ref, "gold"), item)
        if score is None or score < threshold:
            gold.ok = False
            gold.lines.append(f"{at}: the reference answer {ref[:60]!r} scored " +
                              (f"{score:.2f} < {threshold:g}" if score is not None else f"nothing (unscorable: {why})"))
    gold.lines.insert(0, f"{len(with_ref) - len(gold.lines)}/{len(with_ref)} reference answers score >= {threshold:g}"
                      if with_ref else "no row has a reference answer (reference_answer / expected_answer): skipped")
    checks.append(gold)
    checks.append(adversarial(rewards, rows, threshold))
    if cases:
        checks.append(agreement(rewards, cases, threshold))
    checks.append(determinism(rewards, with_ref or [(at, item, "an answer") for at, item in rows[:1]]))
    return checks


def adversarial(rewards: Any, rows: list[tuple[str, Any]], threshold: float) -> Check:
    """Each hack against the weighted total and against every weighted reward alone: GRPO compares samples
    of one prompt, so a hack that one reward pays for is learnt even when the others outweigh it in the total."""
    adv = Check("adversarial", True)
    weighted = [c for c in rewards.components if c.weight > 0]
    own = {c.label: getattr(c.reward, "pass_threshold", None) or DEFAULT_THRESHOLD for c in weighted}
    tried, total_paid, alone_paid = 0, [], {c.label: [] for c in weighted}
    for at, item in rows:
        for label, sample in negative_controls(item).items():
            result = rewards.score(sample, item)
            tried += 1
            if result.score is not None and result.score >= threshold:
                total_paid.append(f"{label} scored {result.score:.2f} on {at} (pass threshold {threshold:g}): "
                                  f"the reward pays for it")
            for name, value in result.components.items():
                if name in alone_paid and value is not None and value >= own[name]:
                    alone_paid[name].append((label, value, at, result.score))
    adv.ok = not total_paid and not any(alone_paid.values())
    by_reward = ", ".join(f"{name} {len(paid)}/{tried}" for name, paid in alone_paid.items())
    adv.lines.append(f"{tried - len(total_paid)}/{tried} hacking attempts scored below {threshold:g} in total; "
                     f"paid for by each reward alone: {by_reward}")
    adv.lines += total_paid
    for name, paid in alone_paid.items():
        for label, value, at, total in paid[:5]:
            in_total = "unscorable" if total is None else f"{total:.2f}"
            adv.lines.append(f"{name} alone pays for {label} on {at} ({value:.2f} >= {own[name]:g}; {in_total} in the "
                             f"total): GRPO learns what any weighted reward pays for, whatever the others give")
        if len(paid) > 5:
            adv.lines.append(f"{name}: {len(paid) - 5} more")
    return adv


def agreement(rewards: Any, cases: str, threshold: float) -> Check:
    try:
        lines = [json.loads(line) for line in Path(cases).read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise ReviewError(f"--cases {cases}: cannot read it as JSONL of {{sample, item, human_score}}: {exc}") from None
    ours, theirs, skipped = [], [], 0
    for n, case in enumerate(lines, 1):
        if not isinstance(case, dict) or not {"sample", "item", "human_score"} <= set(case):
            raise ReviewError(f"--cases {cases}:{n}: each line needs \"sample\", \"item\" and \"human_score\"")
        score, _ = _score(rewards, case["sample"], as_item(case["item"]))
        if score is None:
            skipped += 1
            continue
        ours.append(score >= threshold)
        theirs.append(float(case["human_score"]) >= threshold)
    kappa = cohen_kappa(ours, theirs)
    agree = sum(a == b for a, b in zip(ours, theirs))
    ok = kappa is not None and kappa >= 0.6
    text = (f"{agree}/{len(ours)} agree with the human scores (cut at {threshold:g}), Cohen's kappa "
            f"{'undefined' if kappa is None else f'{kappa:.2f}'}" + (f"; {skipped} unscorable" if skipped else ""))
    return Check("agreement", ok, [text] + ([] if ok else ["kappa below 0.6: the reward and the humans disagree too often"]))


def determinism(rewards: Any, rows: list) -> Check:
    check = Check("determinism", True)
    for comp in rewards.components:
        grader = getattr(comp.reward, "grader", None)
        if grader is not None and grader.is_model and grader.temperature != 0:
            check.ok = False
            check.lines.append(f"{comp.label}: the judge samples at temperature {grader.temperature:g}; set 0")
    if rows:
        at, item, answer = rows[0]
        first, second = (_score(rewards, _sample(answer, "determinism"), item)[0] for _ in range(2))
        same = first == second
        check.ok &= same
        fmt = lambda v: "unscorable" if v is None else f"{v:.2f}"  # noqa: E731
        check.lines.insert(0, f"{at}: the same input scored twice gives {fmt(first)} and {fmt(second)}")
    return check


def render(checks: list[Check]) -> str:
    out = []
    for c in checks:
        first, *rest = c.lines or [""]
        out.append(f"{c.name:<12} {'ok  ' if c.ok else 'FAIL'} {first}")
        out += [f"{'':<17} {line}" for line in rest]
    return "\n".join(out)


def _settings_and_data(config_path: str, overrides: list[str] = ()):
    """The config's agentrl settings and its training data file (the demo's built file for ``demo``)."""
    from agentrl.config import load_config

    settings, _, _ = load_config(config_path, list(overrides))
    data = settings.train_data
    if data == "demo":
        from agentrl.runner import resolve_model

        data = resolve_model("demo")[1]["train_path"]
    return settings, data


def review_config(config_path: str, *, cases: str | None = None, rows: int = 5) -> tuple[str, bool]:
    """The review of a training config's rewards on its first ``rows`` training rows."""
    settings, data = _settings_and_data(config_path)
    checks = review(settings.rewards, load_rows(data, rows), cases=cases, where=f"{config_path}: agentrl.rewards")
    return render(checks), all(c.ok for c in checks)


def preflight(config_path: str, out, overrides: list[str] = ()) -> None:
    """Before ``agentrl train`` starts Ray: a short review (3 rows). A reward that does not load, or that fails
    its own reference answers, stops the run; hacking attempts it pays for and non-determinism are warnings."""
    from agentrl.rewards.rewardset import RewardSet

    settings, data = _settings_and_data(config_path, [o for o in overrides if not o.startswith("-")])
    # A reward that does not load is the run's own error (file, line, fix), which --no-review would not skip
    RewardSet.from_config(settings.rewards, where=f"{config_path}: agentrl.rewards")
    checks = review(settings.rewards, load_rows(data, 3), where=f"{config_path}: agentrl.rewards")
    print("reward review (skip with --no-review):\n" + render(checks), file=out, flush=True)
    blocking = [c.name for c in checks if not c.ok and c.name in ("static", "gold")]
    if blocking:
        raise ReviewError(f"{config_path}: the reward failed its {' and '.join(blocking)} check (above); fix it, or "
                          f"train anyway with `agentrl train {config_path} --no-review`")
    if not all(c.ok for c in checks):
        print("agentrl: warning: the reward review found problems (above); training goes on. "
              f"Run `agentrl reward review {config_path}` for the full review.", file=out, flush=True)
