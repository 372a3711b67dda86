"""The job page's web app: run list, run page, rollout explorer, downloads, and the JSON the pages poll.

    app = create_app("runs")            # any folder of run directories (or one run directory)
    uvicorn.run(app, host="127.0.0.1", port=8266)

    GET /                                   every run: status, progress, latest reward, times
    GET /runs/NAME                          config, progress + ETA, eval snapshot, charts, checkpoints, files, log
    GET /runs/NAME/rollouts?step=N&page=K   the rollout explorer (filters: reward_min, reward_max, unscorable,
                                            tool, q; view=groups or group=PROMPT_ID for the side-by-side view)
    GET /runs/NAME/files/FILE               config.yaml, training.log, metrics.jsonl, rollouts.jsonl
    GET /api/runs                           the run list as JSON
    GET /api/runs/NAME/state?offset=B       status, metric lines after byte B, per-step rollout stats, log tail

Pages read only the run directories; rollouts come from each run's incremental index (agentrl/ui/index.py),
which a background thread keeps up to date while runs write.
"""

from __future__ import annotations

import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from agentrl.ui import rundir
from agentrl.ui.explorer import Filters, explorer_page
from agentrl.ui.index import RolloutIndex
from agentrl.ui.integrity import integrity_view
from agentrl.ui.pages import STATIC, plotly_js, templates

POLL_MS = 3000


class Runs:
    """The run directories under a root, with one rollout index each (opened on first use)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self._indexes: dict[Path, RolloutIndex] = {}
        self._lock = threading.Lock()

    def all(self) -> dict[str, Path]:
        return rundir.find_runs(self.root)

    def get(self, name: str) -> Path:
        runs = self.all()
        if name not in runs:
            raise HTTPException(404, f"no run named {name!r} under {self.root} (runs: {', '.join(runs) or 'none'})")
        return runs[name]

    def index(self, run_dir: Path) -> RolloutIndex:
        with self._lock:
            if run_dir not in self._indexes:
                self._indexes[run_dir] = RolloutIndex(run_dir)
            idx = self._indexes[run_dir]
        idx.update()
        return idx

    def refresh_forever(self, stop: threading.Event, every: float = 2.0) -> None:
        """Keep every run's index current, so a page never waits for a large backlog."""
        while not stop.is_set():
            for run_dir in self.all().values():
                try:
                    self.index(run_dir)
                except Exception:  # a run being deleted or rewritten: try again next round
                    pass
            stop.wait(every)


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        raise HTTPException(400, f"not a number: {value!r}") from None


def _int(value: str | None, default: int | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        raise HTTPException(400, f"not an integer: {value!r}") from None


def create_app(root: str | Path, background: bool = True) -> FastAPI:
    runs = Runs(root)
    env = templates()
    stop = threading.Event()

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        if background:
            threading.Thread(target=runs.refresh_forever, args=(stop,), daemon=True, name="agentrl-ui-index").start()
        yield
        stop.set()

    app = FastAPI(title="agentrl", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)

    def page(name: str, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(root=ctx.pop("root", "/"), inline=None, **ctx))

    @app.get("/static/plotly.min.js")
    def _plotly() -> FileResponse:
        return FileResponse(plotly_js(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    @app.get("/static/{name}")
    def _static(name: str) -> FileResponse:
        path = STATIC / name
        if name not in ("app.js", "style.css") or not path.exists():
            raise HTTPException(404, name)
        return FileResponse(path)

    @app.get("/", response_class=HTMLResponse)
    def _index() -> HTMLResponse:
        return page("index.html", runs_dir=str(runs.root))

    @app.get("/api/runs")
    def _api_runs() -> JSONResponse:
        return JSONResponse([rundir.run_info(path, name) for name, path in runs.all().items()])

    @app.get("/api/runs/{name:path}/state")
    def _state(name: str, offset: int = 0) -> JSONResponse:
        run_dir = runs.get(name)
        lines, end = rundir.metric_lines(run_dir, offset)
        return JSONResponse({"info": rundir.run_info(run_dir, name), "metrics": lines, "offset": end,
                             "steps": runs.index(run_dir).steps(), "checkpoints": rundir.checkpoints(run_dir),
                             "log": rundir.log_tail(run_dir, 200)})

    @app.get("/runs/{name:path}/files/{file}")
    def _file(name: str, file: str) -> FileResponse:
        run_dir = runs.get(name)
        if file not in rundir.DOWNLOADS or not (run_dir / file).is_file():
            raise HTTPException(404, f"{file!r} is not a downloadable file of {name} ({', '.join(rundir.DOWNLOADS)})")
        return FileResponse(run_dir / file, filename=f"{Path(name).name}-{file}")

    @app.get("/runs/{name:path}/rollouts", response_class=HTMLResponse)
    def _rollouts(request: Request, name: str) -> HTMLResponse:
        run_dir = runs.get(name)
        q = request.query_params
        idx = runs.index(run_dir)
        steps = idx.steps()
        validation = q.get("validation") in ("1", "true")
        step = _int(q.get("step"), None)
        if step is None:
            train = [s for s in steps if not s["validation"]] or steps
            step = train[-1]["step"] if train else 0
            validation = bool(train and train[-1]["validation"])
        f = Filters(reward_min=_float(q.get("reward_min")), reward_max=_float(q.get("reward_max")),
                    unscorable=q.get("unscorable") or "any", tool=q.get("tool") or None, text=q.get("q") or None)
        if f.unscorable not in ("any", "only", "none"):
            raise HTTPException(400, "unscorable must be any, only or none")
        group = q.get("group")
        view = "groups" if q.get("view") == "groups" else "list"
        pg = explorer_page(idx, step, page=_int(q.get("page"), 1) or 1, filters=f, validation=validation,
                           group=group, groups=view == "groups")
        at = next((i for i, s in enumerate(steps) if s["step"] == step and s["validation"] == validation), None)
        cur = steps[at] if at is not None else None
        pos = at if at is not None else sum(1 for s in steps if s["step"] < step)
        after = pos + 1 if at is not None else pos  # the first step after the one asked for
        near = {"prev": steps[pos - 1] if pos > 0 else None, "next": steps[after] if after < len(steps) else None,
                "window": steps[max(0, pos - 12): pos + 13]}
        prompts = len(idx.group_rewards(step, validation)) if cur else 0

        def link(n: int) -> str:
            params = {k: v for k, v in q.items() if k != "page"}
            params["page"] = str(n)
            return "?" + urlencode(params)

        return page("rollouts.html", root="../" * (name.count("/") + 2), info={"name": name}, steps=steps, page=pg,
                    cur=cur, near=near, prompts=prompts, f=f, view=view, group=group, link=link)

    @app.get("/runs/{name:path}", response_class=HTMLResponse)
    def _run(name: str) -> HTMLResponse:
        name = name.rstrip("/")
        if name not in runs.all():  # e.g. `agentrl train --ui` printed the address before the folder exists
            return HTMLResponse(env.get_template("waiting.html").render(
                root="../" * (name.count("/") + 1), inline=None, name=name, runs_dir=str(runs.root),
                runs=list(runs.all())), status_code=404)
        run_dir = runs.get(name)
        return page("run.html", root="../" * (name.count("/") + 1), info=rundir.run_info(run_dir, name),
                    config=rundir.config_view(run_dir), integrity=integrity_view(run_dir), files=rundir.downloads(run_dir), interval=POLL_MS)

    app.state.runs = runs
    app.state.started = time.time()
    return app
