"""Tripwires on synthetic metric streams built from the real record type and the watcher's own step summary:
each signal fires on the stream it is for, names step, signal and example rollouts, and stays quiet on its control."""

from __future__ import annotations

import io
import json
from dataclasses import replace

from agentrl.metrics import Watcher, rollout_summary
from agentrl.record import RolloutRecord
from agentrl.rolloutfile import decode
from agentrl.runlog import append_jsonl
from agentrl.spec import RunSpec
from agentrl.tripwires import Tripwires, heldout_labels

PROMPTS = 8
SAMPLES = 4


def rollout(step: int, p: int, s: int, *, reward: float, tokens: int = 20, answer: str | None = None,
            components: dict | None = None, tools: tuple = ()) -> RolloutRecord:
    calls = [{"id": f"c{n}", "name": t, "arguments": {"a": 1, "b": 2}} for n, t in enumerate(tools)]
    record = RolloutRecord(
        rollout_id=f"r-{step}-{p}-{s}", prompt_id=f"p{step}-{p}", step=step, reward=reward, response_tokens=tokens,
        components=components if components is not None else {"math": reward},
        trajectories=[{"response": answer if answer is not None else f"The answer is {step * 100 + p}.",
                     "tool_calls": calls, "tool_results": []}], tool_calls=len(calls))
    return decode(json.dumps(record.to_dict()))  # the line as the watcher reads it back


def feed(wires: Tripwires, steps: list[list[RolloutRecord]]) -> list:
    fired = []
    for n, rollouts in enumerate(steps, 1):
        line = {"step": n, "validation": False, **rollout_summary(rollouts)}
        fired += wires.on_step(n, line, rollouts)
    return fired


def stream(n_steps: int, make) -> list[list[RolloutRecord]]:
    return [[make(step, p, s) for p in range(PROMPTS) for s in range(SAMPLES)] for step in range(1, n_steps + 1)]


def rising(step: int, p: int, s: int) -> float:
    """A reward mean that climbs from ~0.25 to ~0.75 over 8 steps, with spread in every group."""
    return 1.0 if (p * SAMPLES + s) % 8 < min(7, step) else 0.0


def test_length_drifting_while_reward_rises():
    def padded(st, p, s):
        return rollout(st, p, s, reward=rising(st, p, s), answer=f"The answer is {p}." + " Indeed," * (st * 2 + s))

    [alert] = feed(Tripwires(), stream(8, padded))
    assert (alert.step, alert.signal) == (8, "length_drift") and "characters on average" in alert.message
    assert alert.examples == ["r-8-0-3", "r-8-1-3", "r-8-2-3"]  # the longest answers of the step
    assert feed(Tripwires(), stream(8, lambda st, p, s: rollout(st, p, s, reward=rising(st, p, s)))) == []
    # responses that grow by tool calls (the demo learning the calculator) while the answer stays short: no alert
    tooled = stream(8, lambda st, p, s: rollout(st, p, s, reward=rising(st, p, s), tokens=20 + 10 * st,
                                                tools=("add",) * min(st, 3)))
    assert [a.signal for a in feed(Tripwires(), tooled)] == []
    # the clean demo's step 8: answers from "The answer is 1." to "The answer is 232." (15 -> 19 characters)
    digits = stream(8, lambda st, p, s: rollout(st, p, s, reward=rising(st, p, s), answer=f"The answer is {p}"
                                                + "0" * (st // 2) + "."))
    assert feed(Tripwires(), digits) == []


def test_one_component_carrying_the_total():
    def make(st, p, s):
        fmt = 1.0 if (p + s) % 8 < st else 0.0  # climbs
        right = 1.0 if (p + s) % 8 < 8 - st else 0.0  # falls
        return rollout(st, p, s, reward=(2 * fmt + right) / 3, components={"format": fmt, "math": right})

    alerts = feed(Tripwires(), stream(8, make))
    assert [(a.step, a.signal) for a in alerts] == [(8, "one_component")]
    assert alerts[0].message.startswith("format rose") and "math -" in alerts[0].message and len(alerts[0].examples) == 3

    def both(st, p, s):
        v = rising(st, p, s)
        return rollout(st, p, s, reward=v, components={"format": v, "math": v})

    assert feed(Tripwires(), stream(8, both)) == []


def test_reward_rising_while_the_held_out_check_does_not():
    hole = stream(8, lambda st, p, s: rollout(st, p, s, reward=rising(st, p, s),
                                              components={"hole": rising(st, p, s), "gold": 0.25 if s == 0 else 0.0}))
    [alert] = feed(Tripwires(heldout=["gold"]), hole)
    assert (alert.step, alert.signal) == (8, "heldout_flat") and "held-out check gold moved +0.00" in alert.message
    honest = stream(8, lambda st, p, s: rollout(st, p, s, reward=rising(st, p, s),
                                                components={"math": rising(st, p, s), "gold": rising(st, p, s)}))
    assert feed(Tripwires(heldout=["gold"]), honest) == []
    # the clean demo learning the calculator before the answers (proof seed 3, step 8): tool_use rises, the total
    # with it, gold stays put, yet nothing passes that gold fails (tool_use alone is 0.33 of the total)
    def tools_first(st, p, s):
        tool, gold = rising(st, p, s), 1.0 if (p * SAMPLES + s) % 8 == 0 else 0.0
        return rollout(st, p, s, reward=(gold + 0.5 * tool) / 1.5, components={"math": gold, "tool_use": tool, "gold": gold})

    assert feed(Tripwires(heldout=["gold"]), stream(8, tools_first)) == []


def test_the_held_out_check_on_validation_lines():
    wires = Tripwires(heldout=["gold"], window=2)
    steps = stream(6, lambda st, p, s: rollout(st, p, s, reward=rising(st, p, s), components={"hole": rising(st, p, s)}))
    fired = []
    for n, rollouts in enumerate(steps, 1):
        if n in (2, 6):  # validations: the held-out gold check stays at 0.30
            wires.on_validation(n, {"step": n, "validation": True, "val/reward/gold": 0.3, "val/reward/hole": 0.9})
        fired += wires.on_step(n, {"step": n, **rollout_summary(rollouts)}, rollouts)
    assert [(a.step, a.signal) for a in fired] == [(6, "heldout_flat")]
    assert "between the last two validations" in fired[0].message


def test_the_same_answer_across_prompts():
    def make(st, p, s):
        paid = st == 3 and p < 5
        return rollout(st, p, s, reward=1.0 if paid else 0.5, answer="The answer is 42." if paid else None)

    [alert] = feed(Tripwires(), stream(4, make))
    assert (alert.step, alert.signal) == (3, "same_answer") and "5 of 8 prompts" in alert.message
    assert alert.examples == ["r-3-0-0", "r-3-0-1", "r-3-0-2"] and "paid 1.00 on average" in alert.message
    # an answer everybody gives and nobody is paid for (the demo's first steps end on tool calls, empty) is no hole
    empty = stream(4, lambda st, p, s: rollout(st, p, s, reward=0.0 if p < 6 else 1.0, answer="" if p < 6 else None))
    # ... but an empty answer the reward pays for is a hole (a grader whose "nothing to compare" default is a pass)
    paid_empty = feed(Tripwires(), stream(4, lambda st, p, s: rollout(st, p, s, reward=1.0 if p < 6 else 0.0,
                                                                     answer="" if p < 6 else None)))
    assert [(a.step, a.signal) for a in paid_empty] == [(1, "same_answer")]
    assert "6 of 8 prompts got the same answer '' (an empty answer), paid 1.00" in paid_empty[0].message
    wrong = stream(4, lambda st, p, s: rollout(st, p, s, reward=0.0 if p < 6 else 1.0, answer="22" if p < 6 else None))
    assert feed(Tripwires(), empty) == [] and feed(Tripwires(), wrong) == []
    # the clean demo's step 7: "The answer is 1." to 5 of 8 prompts, paid 0.33 by tool_use alone (the step: 0.32)
    side = stream(4, lambda st, p, s: rollout(st, p, s, reward=1 / 3 if p < 5 else 0.3, answer="The answer is 1."
                                              if p < 5 else None))
    assert feed(Tripwires(), side) == []
    # prompts whose right answers coincide (the demo's "1" to 5 - 4 and 9 - 8): the held-out check passes them
    def coincide(st, p, s, gold=1.0):
        same = st == 3 and p < 5
        return rollout(st, p, s, reward=1.0 if same else 0.5, answer="The answer is 1." if same else None,
                       components={"math": 1.0, "gold": gold if same else 0.0})

    assert feed(Tripwires(heldout=["gold"]), stream(4, coincide)) == []
    unchecked = feed(Tripwires(heldout=["gold"]), stream(4, lambda st, p, s: coincide(st, p, s, gold=0.0)))
    assert [(a.step, a.signal) for a in unchecked] == [(3, "same_answer")]
    # one prompt's samples agreeing is a group that learnt its answer, not a hack
    assert feed(Tripwires(), stream(4, lambda st, p, s: rollout(st, p, s, reward=0.5, answer=f"It is {p}."))) == []


def test_tool_calls_collapsing_to_one_tool():
    mixed = ("add", "multiply", "subtract")

    def make(st, p, s):
        return rollout(st, p, s, reward=0.5, tools=(mixed[(p + s) % 3],) if st <= 4 else ("add",))

    alerts = feed(Tripwires(), stream(10, make))
    # the last 4 steps' calls, pooled: at step 7 a quarter of them still come from the mixed step 4
    assert [(a.step, a.signal) for a in alerts] == [(8, "tool_collapse")]  # fired once, quiet for the window after
    assert "100% of the last 4 steps' 128 tool calls went to add" in alerts[0].message
    assert feed(Tripwires(), stream(10, lambda st, p, s: rollout(st, p, s, reward=0.5, tools=("add",)))) == []
    # one step whose 8 prompts all happen to ask for a sum, in a run that keeps using every tool: no collapse
    lucky = feed(Tripwires(), stream(10, lambda st, p, s: rollout(st, p, s, reward=0.5, tools=(
        "add",) if st == 7 else (mixed[(p + s) % 3],))))
    assert lucky == []


def test_a_clean_run_raises_nothing():
    def make(st, p, s):
        v = rising(st % 9, p, s)
        return rollout(st, p, s, reward=v, components={"math": v, "gold": v}, tokens=30 + s,
                       tools=(("add", "multiply", "subtract")[(p + s) % 3],))

    assert feed(Tripwires(heldout=["gold"]), stream(24, make)) == []


def test_held_out_checks_are_the_weight_0_rewards():
    assert heldout_labels([{"name": "math"}, {"name": "math", "weight": 0, "label": "gold"}, "tool_use",
                           {"name": "./checks/judge2.py", "weight": 0}, {"grader": {"name": "g", "type": "x"}, "weight": 0}]) \
        == ["gold", "judge2", "g"]


def test_the_watcher_writes_alerts_into_metrics_and_prints_them(tmp_path):
    (tmp_path / "logs").mkdir()
    RunSpec(run_dir=str(tmp_path), rewards=[{"name": "hole.py"}, {"name": "math", "weight": 0, "label": "gold"}]).write(
        tmp_path / "agentrl_spec.json")
    steps = stream(8, lambda st, p, s: rollout(st, p, s, reward=rising(st, p, s),
                                               components={"hole": rising(st, p, s), "gold": 0.0}))
    for n, rollouts in enumerate(steps, 1):
        for r in rollouts:
            append_jsonl(tmp_path / "rollouts.jsonl", r.to_dict())
        append_jsonl(tmp_path / "logs" / "verl_metrics.1.jsonl", {"step": n, "data": {"actor/loss": 0.1}})
    out = io.StringIO()
    watcher = Watcher(tmp_path, 1, 8, out=out)
    watcher.rollout_offset = 0
    watcher.poll()
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    alerted = [(x["step"], a["signal"]) for x in lines for a in x.get("alerts", [])]
    assert alerted == [(8, "heldout_flat")]
    assert "tripwire at step 8: heldout_flat: the training reward rose" in out.getvalue()


def test_prompts_whose_rows_expect_the_same_answer_raise_no_same_answer_alert(tmp_path):
    """A clean run through the OpenAI-SDK agent (no held-out check) drew 4 - 3, 6 - 5 and 3 - 2 in one step and
    answered each "The answer is 1.", paid: right answers that coincide. The rows say so (metadata.expected_answer,
    read through the record's source); rows expecting different answers keep the alert."""
    rows = tmp_path / "train.jsonl"
    rows.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"q{n}"}],
                                        "metadata": {"expected_answer": "1" if n < 5 else str(n)}}) + "\n"
                            for n in range(PROMPTS)))
    differ = tmp_path / "differ.jsonl"
    differ.write_text("".join(json.dumps({"messages": [], "metadata": {"expected_answer": str(n)}}) + "\n"
                              for n in range(PROMPTS)))

    def make(path):
        def one(st, p, s):
            same = st == 3 and p < 5
            r = rollout(st, p, s, reward=1.0 if same else 0.5, answer="The answer is 1." if same else None)
            return replace(r, source=f"{path}:{p + 1}")
        return one

    assert feed(Tripwires(), stream(4, make(rows))) == []
    assert [(a.step, a.signal) for a in feed(Tripwires(), stream(4, make(differ)))] == [(3, "same_answer")]
    assert [(a.step, a.signal) for a in feed(Tripwires(), stream(4, make(tmp_path / "gone.jsonl")))] == \
        [(3, "same_answer")]  # rows that cannot be read decide nothing


def test_calls_to_declared_tools_are_the_answer_they_compare_by():
    """BFCL's rows end on a call to a declared tool, with no text: a first SmolLM2 run had "4 of 8 prompts got the
    same answer ''" at step 1, each prompt's own right call. The calls are the answer; the same call paid across
    prompts is still one."""
    def declared(st, p, s, same=False):
        r = rollout(st, p, s, reward=1.0 if p < 5 else 0.0, answer="", tools=("lookup" if same else f"f{p}",))
        return replace(r, stop_reason="declared_call")

    assert feed(Tripwires(), stream(4, declared)) == []
    alerts = feed(Tripwires(), stream(4, lambda st, p, s: declared(st, p, s, same=True)))
    assert [(a.step, a.signal) for a in alerts] == [(1, "same_answer")] and '"lookup"' in alerts[0].message
