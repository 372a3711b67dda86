"""Run the training agent loop on dataset rows outside training: same tools, parsing, budgets and rewards.

    runner = LocalRunner(settings, model_path)           # settings: the config's agentrl block
    records = runner.run(rows, samples=4, temperature=1.0)    # EvalRecord (agentrl.workflow.evalfile)
    records[0].id, records[0].metadata, records[0].rollout.reward, records[0].rollout.messages

Each rollout is one :class:`agentrl.episode.Episode` on the training loop's token stream
(:func:`agentrl.verl.agent_loop.local_loop`, built by its constructor exactly as verl's agent-loop worker
builds it), with a local engine (:mod:`agentrl.verl.engine`) as its model server. The episode appends its
record to ``rollouts.jsonl`` in a work directory, as in a run; the records returned here are those, read as
every reader of the file reads them (typed turns), with the row they ran on and their latency.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from agentrl.errors import AgentrlError
from agentrl.rolloutfile import from_builtins
from agentrl.workflow.evalfile import EvalRecord


def row_record(path: Path, lineno: int, row: dict) -> dict:
    """The row as the agent loop reads it from ``extra_info.agentrl_row`` in training."""
    from agentrl.dataset import loop_record

    return loop_record(path, lineno, row, split="eval")


def load_rows(path: str | Path, limit: int | None = None) -> list[dict]:
    from agentrl.dataset import read_rows

    path = Path(path)
    rows = [row_record(path, lineno, row) for lineno, row in read_rows(path)]
    return rows[:limit] if limit else rows


class PreflightError(AgentrlError):
    """A tool server does not start; raised before any model is loaded."""


def preflight(settings: Any, where: str = "agentrl") -> None:
    """What training checks before Ray starts, checked before a model loads: reward names and options,
    the tool config, and that every tool server starts and lists its tools."""
    from agentrl.rewards import RewardSet

    RewardSet.from_config(settings.rewards, where=f"{where}: agentrl.rewards")
    if settings.agent.program:
        from agentrl.program import load_program

        load_program(settings.agent.program)
    if not settings.tools:
        return
    from agentrl.tools import parse_servers_config
    from agentrl.tools.offers import ServerDown, offered_per_row

    parse_servers_config(settings.tools, allow=settings.tool_allow)
    try:
        offered_per_row(settings.tools, settings.tool_allow, [{}], where)  # every server starts and lists its tools
    except ServerDown as exc:
        raise PreflightError(str(exc)) from None


class LocalRunner:
    """The agent loop over rows with a local engine; one work directory per runner."""

    def __init__(self, settings: Any, model_path: str, *, engine: str = "auto", work_dir: str | None = None,
                 concurrency: int = 64, max_batch: int = 64) -> None:
        from transformers import AutoConfig, AutoTokenizer

        from agentrl.rundir import RunDir
        from agentrl.spec import RunSpec
        from agentrl.verl.agent_loop import local_config
        from agentrl.verl.engine import open_engine

        self.settings = settings
        self.model_path = model_path
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="agentrl-local-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.spec_path = RunDir(self.work_dir).spec
        RunSpec.from_settings(settings, self.work_dir).write(self.spec_path)
        self.config = local_config(str(self.spec_path), prompt_length=settings.max_prompt_length,
                                   response_length=settings.max_response_length)
        self.engine = open_engine(model_path, prompt_length=settings.max_prompt_length,
                                  response_length=settings.max_response_length, kind=engine, seed=settings.seed,
                                  max_batch=max_batch)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model_type = getattr(AutoConfig.from_pretrained(model_path), "model_type", None)
        self.concurrency = concurrency

    def _loop(self):
        from agentrl.verl.agent_loop import local_loop

        return local_loop(self.config, self.engine, self.tokenizer, self.model_type)

    async def _one(self, row: dict, sample: int, params: dict, gate: asyncio.Semaphore) -> dict:
        async with gate:
            started = time.perf_counter()
            record, _ = await self._loop().episode(row, dict(params))
            return {"record": record, "id": row["id"], "sample": sample,
                    "latency": round(time.perf_counter() - started, 4)}

    async def _run(self, rows: list[dict], samples: int, params: dict, progress: Callable[[], None] | None):
        gate = asyncio.Semaphore(self.concurrency)
        tasks = [asyncio.ensure_future(self._one(row, s, params, gate)) for row in rows for s in range(samples)]
        done = []
        try:
            for fut in asyncio.as_completed(tasks):
                done.append(await fut)
                if progress:
                    progress()
        finally:
            for t in tasks:
                t.cancel()
            await _close_hubs(str(self.spec_path))
        return done

    def run(self, rows: list[dict], *, samples: int = 1, temperature: float = 0.0, top_p: float = 1.0,
            progress: Callable[[], None] | None = None) -> list[EvalRecord]:
        """Every row ``samples`` times; one record per rollout, ordered by row then sample."""
        params = {"temperature": temperature, "top_p": top_p}
        finished = asyncio.run(self._run(rows, samples, params, progress))
        by_id = {row["id"]: row for row in rows}
        order = {row["id"]: n for n, row in enumerate(rows)}
        records = []
        for f in sorted(finished, key=lambda f: (order[f["id"]], f["sample"])):
            row = by_id[f["id"]]
            rollout = from_builtins(f["record"].to_dict())  # as rollouts.jsonl holds it and every reader reads it
            records.append(EvalRecord(id=f["id"], sample=f["sample"], rollout=rollout, latency=f["latency"],
                                      metadata=row["metadata"], source=row["source"], prompt=row["messages"]))
        return records

    def close(self) -> None:
        if hasattr(self.engine, "close"):
            self.engine.close()


async def _close_hubs(spec_path: str) -> None:
    """Close the MCP sessions the loop opened for this runner's spec (stdio servers are child processes)."""
    from agentrl.worker import WorkerState

    await WorkerState.for_file(spec_path).aclose()
