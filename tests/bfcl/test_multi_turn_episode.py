"""A multi-turn BFCL row through the real episode: the ``bfcl`` environment server (a process per rollout, loaded
from the row's initial config), the row's scripted user turns, and ``bfcl_multi_turn``, all through the plugin's
entry point. The policy is scripted (no model here): it makes the ground truth's calls, or others."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from agentrl.config import AgentSettings
    from agentrl.dataset import loop_record
    from agentrl.episode import Call, Episode, Turn
    from agentrl.spec import RunSpec
    from agentrl.worker import WorkerState
    from agentrl_bfcl.rows import rows
    from bfcl.fidelity_multi_turn import _methods, parse_call  # run from tests/

    class Scripted:
        '''Per user turn: one step with the planned calls (none: a plain answer), then "Done."'''
        def __init__(self, plan):
            self.steps = [s for turn in plan for s in ([turn, "Done."] if turn else ["I cannot do that."])]
            self.versions, self.model_seconds, self.n, self.offered = {"global_steps": 0}, 0.0, 0, None
        async def start(self, messages, tools):
            self.offered = [t["function"]["name"] for t in tools or []]
        def room(self):
            return 10_000
        async def generate(self, params, room):
            step, self.n = self.steps[self.n], self.n + 1
            return Turn(step, []) if isinstance(step, str) else Turn("", [Call(n, a) for n, a in step])
        async def extend(self, previous, messages, tools):
            return True
        async def finish(self, prompt):
            return 7

    async def episode(run_dir, row_id, change):
        category = row_id.rsplit("_", 1)[0]
        row = next(r for r in rows(category) if r["id"] == row_id)
        methods = _methods(row["metadata"]["bfcl"]["involved_classes"])
        plan = [[parse_call(c, methods) for c in turn] for turn in row["metadata"]["bfcl"]["ground_truth"]]
        if change == "early_held_back_call":  # the held-back function, called one turn before it is offered
            held = next(n for n, t in enumerate(row["metadata"]["user_turns"], 1) if isinstance(t, dict))
            plan[held - 1] = plan[held][:1]
        if change == "bad_setup":
            row["metadata"]["tool_setup"][0]["arguments"]["involved_classes"] = ["NoSuchAPI"]
        if change == "wrong_argument":
            name, args = plan[0][-1]
            plan[0][-1] = (name, {k: (v + "_x" if isinstance(v, str) else v) for k, v in args.items()})
        spec = RunSpec(run_dir=run_dir, tools=["bfcl"], rewards=[{"name": "bfcl_multi_turn"}],
                       agent=AgentSettings(max_turns=40, max_tool_calls=60))
        state, policy = WorkerState(spec), Scripted(plan)
        try:
            record = await Episode(state, policy).run(loop_record(__import__("pathlib").Path("bfcl.jsonl"), 1, row),
                                                      {"temperature": 0})
        finally:
            await state.aclose()
        return {"record": record.to_dict(), "offered": policy.offered}

    async def main(run_dir, cases):  # one process for every case: agentrl, verl and bfcl-eval imported once
        got = {}
        for row_id, change in json.loads(cases):
            (__import__("pathlib").Path(run_dir) / f"{row_id}-{change}").mkdir()
            got[f"{row_id}:{change}"] = await episode(f"{run_dir}/{row_id}-{change}", row_id, change)
        print(json.dumps(got))

    asyncio.run(main(*sys.argv[1:]))
""")


CASES = [("multi_turn_base_13", "none"), ("multi_turn_base_13", "wrong_argument"), ("multi_turn_base_13", "bad_setup"),
         ("multi_turn_miss_func_0", "none"), ("multi_turn_miss_func_0", "early_held_back_call")]


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path_factory.mktemp("bfcl")), json.dumps(CASES)],
                         capture_output=True, text=True, timeout=600, cwd=str(Path(__file__).parents[1]))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def _bfcl_results(row, calls):
    """bfcl-eval's own execution of ``calls`` (one step each) on a fresh state of the row."""
    import uuid

    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call
    from bfcl_eval.model_handler.utils import convert_to_function_call

    meta, model = row["metadata"]["bfcl"], f"check-{uuid.uuid4().hex}"
    return [execute_multi_turn_func_call(convert_to_function_call([{c["name"]: c["arguments"]}]), meta["initial_config"],
                                         meta["involved_classes"], model, row["id"])[0][0] for c in calls]


def test_a_multi_turn_row_played_and_scored_through_the_episode(played):
    from agentrl_bfcl.rows import rows

    row = next(r for r in rows("multi_turn_base") if r["id"] == "multi_turn_base_13")
    got = played["multi_turn_base_13:none"]
    record = got["record"]
    # the row's classes' functions (in the server's order, not BFCL's), never the setup tool
    assert sorted(got["offered"]) == sorted(row["metadata"]["allowed_tools"])
    assert record["components"] == {"bfcl_multi_turn": 1.0} and record["stop_reason"] == "answered"
    assert record["user_turns"] == len(row["metadata"]["user_turns"]) == 1
    calls = [c for s in record["trajectories"] for c in s["tool_calls"]]
    results = [r["content"] for s in record["trajectories"] for r in s.get("tool_results", [])]
    assert [c["name"] for c in calls] == ["cd", "tail", "diff"]
    assert results == _bfcl_results(row, calls)  # the server's results are BFCL's own execution, state carried on
    assert played["multi_turn_base_13:wrong_argument"]["record"]["components"] == {"bfcl_multi_turn": 0.0}


def test_a_miss_func_row_offers_the_held_back_function_at_its_turn(played):
    from agentrl_bfcl.rows import rows

    row = next(r for r in rows("multi_turn_miss_func") if r["id"] == "multi_turn_miss_func_0")  # sort held back
    assert [t["tools"] for t in row["metadata"]["user_turns"] if isinstance(t, dict)] == [["sort"]]
    got = played["multi_turn_miss_func_0:none"]
    assert "sort" not in got["offered"] and got["record"]["components"] == {"bfcl_multi_turn": 1.0}
    early = played["multi_turn_miss_func_0:early_held_back_call"]["record"]
    (refused,) = [r for s in early["trajectories"] for r in s.get("tool_results", []) if r["name"] == "sort"][:1]
    assert refused["is_error"] and "unknown tool 'sort'" in refused["content"]
    # graded as bfcl-eval's checker grades it: it replays every recorded call (the refused one too: BFCL's own
    # inference would have run it), checks no turn whose ground truth is empty, and sort changes no state
    assert early["components"] == {"bfcl_multi_turn": 1.0}


def test_a_setup_the_server_refuses_leaves_the_rollout_unscorable_not_zero(played):
    record = played["multi_turn_base_13:bad_setup"]["record"]
    assert record["reward"] is None and record["stop_reason"] == "tool_infra_error"
    assert "tool_setup[0] ('bfcl_load_scenario') failed" in record["unscorable"] and "NoSuchAPI" in record["unscorable"]
    assert record["tool_calls"] == 0 and record["user_turns"] == 0  # the model never had a turn
