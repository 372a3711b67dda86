"""bfcl-eval's own runner (``eval_runner.runner``: result files in, score files out) on agentrl eval files: the
export's layout, and the runner's verdict equal to ``bfcl_ast``'s row by row on the ground truth and the fidelity
test's perturbed outputs (tests/bfcl/fidelity.py), for the first rows of every supported single-turn category.

The eval files are written as ``agentrl eval`` writes them (an ``EvalRecord`` line per rollout: the row's id and
metadata, the first turn's calls as verl's Hermes parser found them in the output text, ``bfcl_ast``'s score);
no model runs, the outputs stand in for one.
"""

from __future__ import annotations

import itertools
import json

import pytest

from agentrl import cli
from agentrl.trajectory import make_item, make_sample, make_step

from agentrl_bfcl import ast_reward, bfcl, runner
from agentrl_bfcl.rows import rows

from . import fidelity

ROWS = 12  # per category: the first rows of bfcl-eval's file
KINDS = ("ground_truth", "wrong_value", "wrong_type", "missing_required", "extra_call", "wrong_function",
         "swapped_order", "no_call", "broken_block_beside_calls", "args_not_object",  # single-turn AST rows
         "a_call", "broken_block_only")  # relevance / irrelevance rows (no_call, args_not_object too)


def _line(row: dict, text: str, calls: list[dict]) -> dict:
    item = make_item(row["messages"], row["metadata"], id=row["id"])
    score = ast_reward.grade(make_sample("r", [make_step(text, tool_calls=calls)]), item)
    return {"id": row["id"], "sample": 0, "reward": score, "components": {"bfcl_ast": score}, "unscorable": None,
            "metadata": row["metadata"], "prompt": row["messages"],
            "trajectories": [{"response": text, "tool_calls": calls}]}


def _eval_files(tmp_path) -> dict[str, list]:
    """One eval file per output kind, each holding every category's rows that have that kind of output."""
    by_kind: dict[str, list] = {}
    for category in bfcl.SINGLE_TURN:
        for row in itertools.islice(rows(category), ROWS):
            for kind, text in fidelity.outputs(row):
                by_kind.setdefault(kind, []).append((row, text))
    files = {}
    for kind, texts in by_kind.items():
        path = tmp_path / f"{kind}.jsonl"
        lines = [{"agentrl_eval": {"model": "stand-in outputs", "data": kind}}]
        lines += [_line(row, text, calls) for (row, text), calls in zip(texts, fidelity.parsed_calls(texts))]
        path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        files[kind] = (path, texts)
    return files


@pytest.fixture(scope="module")
def eval_files(tmp_path_factory):
    return _eval_files(tmp_path_factory.mktemp("evals"))


def test_export_writes_bfcl_eval_result_layout(eval_files, tmp_path):
    path, texts = eval_files["ground_truth"]
    written = runner.export_results([path], tmp_path)
    want = {("non_live" if not c.startswith("live") else "live", c) for c in bfcl.AST_CATEGORIES}
    got = {(p.parent.name, p.name.removeprefix("BFCL_v4_").removesuffix("_result.json")) for p in written}
    assert got == want and all(p.parent.parent == tmp_path / bfcl.MODEL for p in written)
    simple = tmp_path / bfcl.MODEL / "non_live" / "BFCL_v4_simple_python_result.json"
    first = json.loads(simple.read_text().splitlines()[0])
    # simple_python_0: calculate_triangle_area(base=10, height=5, unit="units"), a Hermes block for bfcl-eval's handler
    assert first["id"] == "simple_python_0"
    block = first["result"].removeprefix("<tool_call>\n").removesuffix("\n</tool_call>")
    assert json.loads(block) == {"name": "calculate_triangle_area",
                                  "arguments": {"base": 10, "height": 5, "unit": "units"}}


@pytest.mark.parametrize("kind", KINDS)
def test_bfcl_eval_runner_agrees_with_bfcl_ast_row_by_row(eval_files, kind, tmp_path):
    path, texts = eval_files[kind]
    table = runner.side_by_side([path], tmp_path)
    assert {t.category for t in table} == {r["metadata"]["bfcl_category"] for r, _ in texts}
    for t in table:
        assert t.disagree == [] and t.agree == t.rows > 0, (t.category, t.disagree[:5])
        assert t.unscorable == 0 and t.agentrl == t.bfcl
    # the runner's own files: its score file per category and its leaderboard CSV
    assert (tmp_path / "score" / bfcl.MODEL / "non_live" / "BFCL_v4_irrelevance_score.json").is_file() == any(
        t.category == "irrelevance" for t in table)
    assert (tmp_path / "score" / "data_overall.csv").is_file()
    if kind == "ground_truth":  # every first-12 row passes both (none of the unpassable rows is among them)
        assert all(t.agentrl == 1.0 for t in table)
    if kind in ("extra_call", "wrong_function", "args_not_object"):
        assert all(t.bfcl == 0.0 for t in table if t.category not in bfcl.RELEVANCE_CATEGORIES)


def test_the_runner_fails_a_row_that_agentrl_scored_otherwise(eval_files, tmp_path):
    """The join reads the runner's verdict, not agentrl's: a record whose reward was tampered with disagrees."""
    path, _ = eval_files["ground_truth"]
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    record["reward"] = 0.0
    record["components"] = {"bfcl_ast": 0.0}
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join([lines[0], json.dumps(record)] + lines[2:]) + "\n")
    table = {t.category: t for t in runner.side_by_side([tampered], tmp_path / "work")}
    assert table["simple_python"].disagree == [(record["id"], 0.0, 1.0)]
    # the plugin's command, as a user runs it (`agentrl bfcl`, registered through register_commands)
    assert cli.main(["bfcl", "side-by-side", str(tampered)]) == 1
    assert runner.main(["side-by-side", str(path)]) == 0


def test_rows_the_runner_cannot_take_fail_clearly(tmp_path, capsys):
    multi = next(rows("multi_turn_base"))
    plain = {"id": "q1", "sample": 0, "reward": 1.0, "metadata": {"expected_answer": "3"}}
    for name, line, said in (("multi.jsonl", {**plain, "id": multi["id"], "metadata": multi["metadata"]},
                              "single-turn categories only"),
                             ("plain.jsonl", plain, "not a BFCL row")):
        path = tmp_path / name
        path.write_text(json.dumps(line) + "\n")
        with pytest.raises(runner.ExportError, match=said):
            runner.export_results([path], tmp_path / "out")
        assert cli.main(["bfcl", "export-results", str(path), "-o", str(tmp_path / "out")]) == 2
        assert said in capsys.readouterr().err
    assert runner.main(["export-results", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
