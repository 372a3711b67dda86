"""An ``agentrl eval`` file scored again by bfcl-eval's own runner, beside agentrl's ``bfcl_ast`` reward.

    agentrl eval configs/smollm2.yaml --model base --data data/bfcl/live_simple.jsonl --limit 16 -o live_simple.jsonl
    agentrl bfcl export-results live_simple.jsonl -o bfcl_results    # or python -m agentrl_bfcl.runner ...
        # bfcl_results/agentrl-FC/live/BFCL_v4_live_simple_result.json: {"id", "result"} per row
    agentrl bfcl side-by-side live_simple.jsonl simple_python.jsonl
        # category       rows  agentrl  bfcl-eval runner  agree
        # live_simple      16    0.250             0.250  16/16

:func:`export_results` writes each single-turn row's answer as bfcl-eval's generation step would have written a
Hermes-format function-calling model's result: one ``BFCL_v4_<category>_result.json`` per category (JSON lines,
``{"id": BFCL's id, "result": text}``) under ``DIR/agentrl-FC/<non_live|live>/``, the layout bfcl-eval's
``eval_runner`` reads (its ``--result-dir``). The text is the calls agentrl recorded in the rollout's first turn
(what ``bfcl_ast`` grades), each a ``<tool_call>`` block holding ``{"name", "arguments"}``; no call, no text. So
both scorers see the same calls: the model's raw text is not what is compared (agentrl's parser reads formats,
such as SmolLM2's ``<tool_call>[...]`` list, that bfcl-eval's Hermes decoder does not).

:func:`run_bfcl` runs bfcl-eval's ``eval_runner.runner`` itself on such a folder (with ``allow_missing``, its
``--partial-eval``: an eval of N rows scores those N), which writes its score files
(``BFCL_v4_<category>_score.json``: accuracy, then one entry per failed row) and leaderboard CSVs. Its model
registry is reached as for the checker: :mod:`agentrl_bfcl.bfcl`'s stand-in lists the model ``agentrl-FC`` with
bfcl-eval's Hermes handler (``QwenFCHandler``), and nothing of bfcl-eval's runner is replaced.
:func:`side_by_side` does both and joins row by row: a row passes the runner when its score file does not list it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from agentrl.workflow.evalfile import EvalFileError, EvalRecord, read_eval

from agentrl_bfcl import bfcl

REWARD = "bfcl_ast"


class ExportError(ValueError):
    """An eval file that cannot be written in bfcl-eval's layout; the message says which record and why."""


def _text(record: EvalRecord) -> str:
    """The first turn's recorded calls as a Hermes-format model's result (``<tool_call>`` blocks)."""
    turns = record.rollout.trajectories
    calls = (turns[0].tool_calls or []) if turns else []
    blocks = [json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False) for c in calls]
    return "\n".join(f"<tool_call>\n{b}\n</tool_call>" for b in blocks)


def _category(record: EvalRecord, where: str) -> str:
    category = (record.metadata or {}).get("bfcl_category")
    if category is None:
        raise ExportError(f"{where}: row {record.id!r} is not a BFCL row (no metadata.bfcl_category); write the "
                          "eval's data with `agentrl data convert --from bfcl CATEGORY`")
    if category not in bfcl.SINGLE_TURN:
        raise ExportError(f"{where}: row {record.id!r} is {category}; bfcl-eval's runner is reached here for the "
                          f"single-turn categories only ({', '.join(bfcl.SINGLE_TURN)})")
    return category


def results(records: Iterable[EvalRecord], where: str = "eval file", sample: int = 0) -> dict[str, list[dict]]:
    """``{category: [{"id", "result"}, ...]}`` for the records of rollout ``sample`` (0: the first, the only
    one of a greedy eval); one result per row, as bfcl-eval's runner takes one answer per row."""
    out: dict[str, dict] = {}
    for record in records:
        if record.sample != sample:
            continue
        per = out.setdefault(_category(record, where), {})
        if record.id in per:
            raise ExportError(f"{where}: row {record.id!r} appears twice as sample {sample}; bfcl-eval's runner "
                              "takes one answer per row")
        per[record.id] = {"id": record.id, "result": _text(record)}
    if not out:
        raise ExportError(f"{where}: no records of sample {sample}")
    return {category: list(per.values()) for category, per in out.items()}


def export_results(eval_paths: Iterable[str | Path], out_dir: str | Path, sample: int = 0) -> list[Path]:
    """Write the eval files' answers in bfcl-eval's result layout under ``out_dir``; the files written."""
    bfcl.require()
    from bfcl_eval.constants.category_mapping import VERSION_PREFIX
    from bfcl_eval.utils import get_directory_structure_by_category

    merged: dict[str, list[dict]] = {}
    for path in eval_paths:
        _, records = read_eval(str(path))
        for category, entries in results(records, str(path), sample).items():
            if category in merged:
                raise ExportError(f"{path}: {category} is also in an earlier eval file; give each category once")
            merged[category] = entries
    written = []
    for category, entries in merged.items():
        folder = Path(out_dir) / bfcl.MODEL / get_directory_structure_by_category(category)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{VERSION_PREFIX}_{category}_result.json"
        target.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")
        written.append(target)
    return written


@dataclass
class RunnerScore:
    """One category as bfcl-eval's runner scored it (its score file's header and the rows it lists as failed)."""

    category: str
    accuracy: float
    correct: int
    total: int
    failed: set = field(default_factory=set)


def run_bfcl(result_dir: str | Path, score_dir: str | Path, categories: Iterable[str]) -> dict[str, RunnerScore]:
    """bfcl-eval's ``eval_runner.runner`` on ``result_dir`` (as ``bfcl evaluate --partial-eval`` runs it), its
    progress printed to stderr; each category's score file read back."""
    bfcl.require()
    from bfcl_eval.constants.category_mapping import VERSION_PREFIX
    from bfcl_eval.eval_checker import eval_runner

    categories = list(categories)
    score_dir = Path(score_dir)
    score_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.redirect_stdout(sys.stderr):
        eval_runner.runner([bfcl.MODEL], categories, Path(result_dir), score_dir, allow_missing=True)
    scores = {}
    for category in categories:
        found = list((score_dir / bfcl.MODEL).rglob(f"{VERSION_PREFIX}_{category}_score.json"))
        if len(found) != 1:
            raise RuntimeError(f"bfcl-eval's runner wrote {len(found)} score files for {category} under {score_dir}")
        header, *failed = [json.loads(line) for line in found[0].read_text(encoding="utf-8").splitlines() if line]
        scores[category] = RunnerScore(category, header["accuracy"], header["correct_count"], header["total_count"],
                                       {f["id"] for f in failed})
    return scores


@dataclass
class SideBySide:
    """One category of an eval file, scored by agentrl (the rollouts' ``bfcl_ast``) and by bfcl-eval's runner."""

    category: str
    rows: int
    agentrl: float  # mean bfcl_ast over the rows agentrl could score
    unscorable: int  # rows agentrl could not score (left out of its mean; the runner still scores them)
    bfcl: float  # the runner's accuracy, from its score file
    agree: int  # rows both scored alike
    disagree: list = field(default_factory=list)  # (id, agentrl, runner) for the others


def _agentrl_score(record: EvalRecord) -> float | None:
    components = record.rollout.components or {}
    return components.get(REWARD, record.rollout.reward) if not record.rollout.unscorable else None


def side_by_side(eval_paths: Iterable[str | Path], work_dir: str | Path | None = None, sample: int = 0) -> list[SideBySide]:
    """Each category of the eval files scored both ways, joined row by row. The runner's result and score files
    are left in ``work_dir`` (a temporary folder when None)."""
    eval_paths = list(eval_paths)
    with contextlib.ExitStack() as stack:
        work = Path(work_dir) if work_dir else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bfcl_")))
        export_results(eval_paths, work / "result", sample)
        records = {}
        for path in eval_paths:
            for record in read_eval(str(path))[1]:
                if record.sample == sample:
                    records[(_category(record, str(path)), record.id)] = record
        categories = sorted({c for c, _ in records}, key=bfcl.SINGLE_TURN.index)
        runner = run_bfcl(work / "result", work / "score", categories)
    table = []
    for category in categories:
        ours = {i: _agentrl_score(r) for (c, i), r in records.items() if c == category}
        theirs = {i: 0.0 if i in runner[category].failed else 1.0 for i in ours}
        scored = [s for s in ours.values() if s is not None]
        disagree = [(i, ours[i], theirs[i]) for i in ours if ours[i] != theirs[i]]
        table.append(SideBySide(category, len(ours), sum(scored) / len(scored) if scored else float("nan"),
                                len(ours) - len(scored), runner[category].accuracy, len(ours) - len(disagree), disagree))
    return table


def format_table(table: list[SideBySide]) -> str:
    lines = [f"{'category':24s} {'rows':>5s} {'agentrl bfcl_ast':>17s} {'bfcl-eval runner':>17s} {'agree':>9s}"]
    for t in table:
        note = f"  ({t.unscorable} unscorable)" if t.unscorable else ""
        lines.append(f"{t.category:24s} {t.rows:5d} {t.agentrl:17.3f} {t.bfcl:17.3f} {f'{t.agree}/{t.rows}':>9s}{note}")
        lines += [f"    disagree: {i} agentrl {a} runner {b}" for i, a, b in t.disagree]
    return "\n".join(lines)


def add_arguments(parser) -> None:
    """``export-results`` and ``side-by-side`` on ``parser`` (``agentrl bfcl``, or ``python -m agentrl_bfcl.runner``)."""
    sub = parser.add_subparsers(dest="bfcl_command", required=True)
    ex = sub.add_parser("export-results", help="write agentrl eval files in bfcl-eval's result layout")
    ex.add_argument("eval_files", nargs="+")
    ex.add_argument("-o", "--output", required=True, help="bfcl-eval's --result-dir")
    sbs = sub.add_parser("side-by-side", help="per category: agentrl's bfcl_ast mean and bfcl-eval runner's accuracy")
    sbs.add_argument("eval_files", nargs="+")
    sbs.add_argument("--work", help="keep the runner's result and score files here (default: a temporary folder)")
    for p in (ex, sbs):
        p.add_argument("--sample", type=int, default=0, help="which rollout of each row (default 0)")
    parser.set_defaults(func=run)


def run(args) -> int:
    """0 done (side-by-side: and the scorers agree on every row), 1 a row where they disagree, 2 bad input."""
    try:
        if args.bfcl_command == "export-results":
            for path in export_results(args.eval_files, args.output, args.sample):
                print(path)
            return 0
        table = side_by_side(args.eval_files, args.work, args.sample)
        print(format_table(table))
        return 0 if all(not t.disagree for t in table) else 1
    except (ExportError, EvalFileError, bfcl.BfclMissing) as exc:  # each message names the file and the fix
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m agentrl_bfcl.runner", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
