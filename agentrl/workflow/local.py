"""Run the training agent loop on dataset rows outside training: same tools, parsing, budgets and rewards.

    runner = LocalRunner(settings, model_path)           # settings: the config's agentrl block
    records = runner.run(rows, samples=4, temperature=1.0)
    records[0]["reward"], records[0]["components"], records[0]["tool_calls"], records[0]["messages"]

Each rollout is one :class:`agentrl.verl.agent_loop.AgentrlAgentLoop`, built by its constructor exactly as
verl's agent-loop worker builds it, with a local engine (:mod:`agentrl.workflow.engine`) as its
``server_manager``. The loop appends its record to ``rollouts.jsonl`` in a work directory, as in a run;
the records returned here are those, joined to the row's metadata.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from agentrl.errors import AgentrlError
from agentrl.runlog import read_jsonl


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
    if not settings.tools:
        return
    from agentrl.tools import ToolHub, ToolInfraError, parse_servers_config

    parse_servers_config(settings.tools, allow=settings.tool_allow)

    async def listing() -> None:
        hub = ToolHub.from_config(settings.tools, allow=settings.tool_allow)
        try:
            async with hub.rollout("agentrl-preflight") as session:
                await session.tool_schemas()
        finally:
            await hub.aclose()

    try:
        asyncio.run(listing())
    except ToolInfraError as exc:
        raise PreflightError(f"{where}: agentrl.tools: {exc}. Run `agentrl tools check {where}` to see each "
                             f"server's output") from None


class LocalRunner:
    """The agent loop over rows with a local engine; one work directory per runner."""

    def __init__(self, settings: Any, model_path: str, *, engine: str = "auto", work_dir: str | None = None,
                 concurrency: int = 64, max_batch: int = 64) -> None:
        from omegaconf import OmegaConf
        from transformers import AutoConfig, AutoTokenizer

        from agentrl.workflow.engine import open_engine

        self.settings = settings
        self.model_path = model_path
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="agentrl-local-"))
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.spec_path = self.work_dir / "agentrl_spec.json"
        spec = {"run_dir": str(self.work_dir), "tools": settings.tools, "tool_allow": settings.tool_allow,
                "rewards": settings.rewards, "agent": settings.agent.model_dump()}
        self.spec_path.write_text(json.dumps(spec, indent=2))
        self.config = OmegaConf.create({
            "agentrl": {"spec": str(self.spec_path)},
            "actor_rollout_ref": {"rollout": {"response_length": settings.max_response_length,
                                              "prompt_length": settings.max_prompt_length,
                                              "calculate_log_probs": True}},
            "data": {"apply_chat_template_kwargs": {}},
        })
        self.engine = open_engine(model_path, prompt_length=settings.max_prompt_length,
                                  response_length=settings.max_response_length, kind=engine, seed=settings.seed,
                                  max_batch=max_batch)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model_type = getattr(AutoConfig.from_pretrained(model_path), "model_type", None)
        self.concurrency = concurrency

    def _loop(self):
        from verl.experimental.agent_loop.agent_loop import DictConfigWrap

        from agentrl.verl.agent_loop import AgentrlAgentLoop

        return AgentrlAgentLoop(trainer_config=DictConfigWrap(self.config), server_manager=self.engine,
                                tokenizer=self.tokenizer, processor=None, dataset_cls=None,
                                data_config=DictConfigWrap(self.config.data), hf_model_type=self.model_type)

    async def _one(self, row: dict, sample: int, params: dict, gate: asyncio.Semaphore) -> dict:
        async with gate:
            started = time.perf_counter()
            out = await self._loop().run(dict(params), extra_info={"agentrl_row": json.dumps(row)}, validate=True)
            return {"rollout_id": out.extra_fields["agentrl_rollout_id"], "id": row["id"], "sample": sample,
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
            progress: Callable[[], None] | None = None) -> list[dict]:
        """Every row ``samples`` times; one record per rollout, ordered by row then sample."""
        params = {"temperature": temperature, "top_p": top_p}
        log = self.work_dir / "rollouts.jsonl"
        start = log.stat().st_size if log.exists() else 0
        finished = asyncio.run(self._run(rows, samples, params, progress))
        logged = {r["rollout_id"]: r for r in read_jsonl(log, start)[0]}
        by_id = {row["id"]: row for row in rows}
        order = {row["id"]: n for n, row in enumerate(rows)}
        records = []
        for f in sorted(finished, key=lambda f: (order[f["id"]], f["sample"])):
            r = logged[f["rollout_id"]]
            row = by_id[f["id"]]
            records.append({
                "id": f["id"], "sample": f["sample"], "reward": r["reward"], "components": r["components"],
                "unscorable": r["unscorable"], "tool_calls": r["tool_calls"], "tokens": r["response_tokens"],
                "latency": f["latency"], "model_seconds": r["model_seconds"], "tool_seconds": r["tool_seconds"],
                "stop_reason": r["stop_reason"], "metadata": row["metadata"], "source": row["source"],
                "prompt": row["messages"], "messages": r["messages"], "trajectory": r["trajectory"],
                "rollout_id": r["rollout_id"]})
        return records

    def close(self) -> None:
        if hasattr(self.engine, "close"):
            self.engine.close()


async def _close_hubs(spec_path: str) -> None:
    """Close the MCP sessions the loop opened for this runner's spec (stdio servers are child processes):
    through the per-worker state object where the loop has one, else its module-level cache."""
    try:
        from agentrl.worker import WorkerState
    except ImportError:
        WorkerState = None
    if WorkerState is not None:
        await WorkerState.for_file(spec_path).aclose()
        return
    from agentrl.verl import agent_loop

    hubs = getattr(agent_loop, "_hubs", {})
    for key in [k for k in hubs if isinstance(k, tuple) and k[-1] == spec_path]:
        try:
            await hubs.pop(key).aclose()
        except Exception:  # a server that already died has nothing left to close
            pass
