"""``agentrl report RUN_DIR -o report.html``: the run page in one file that opens offline.

    write_report("runs/demo", "report.html")      # charts, config, checkpoints, log tail, sampled rollouts
    write_report("runs/demo", "r.html", steps=6, per_step=2)

The file inlines our CSS and JS, Plotly's bundle from the installed plotly package (about 4.6 MiB, the bulk
of the file), the run's metric lines and a sample of rollouts: ``steps`` steps spread evenly over the run
(first and last included, validation steps too) and, in each, the first ``per_step`` prompt groups with
all their samples and advantages. The explorer's filters work in the page, without a server.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from agentrl.ui import rundir
from agentrl.ui.explorer import explorer_page
from agentrl.ui.index import RolloutIndex
from agentrl.ui.pages import STATIC, plotly_js, templates
from agentrl.ui.server import UIError


def _spread(items: list, k: int) -> list:
    if len(items) <= k:
        return items
    picks = sorted({round(i * (len(items) - 1) / (k - 1)) for i in range(k)}) if k > 1 else [len(items) - 1]
    return [items[i] for i in picks]


def _script_json(value: Any) -> str:
    """JSON safe inside <script>: no '</' can close the element early."""
    return json.dumps(value, separators=(",", ":"), default=str).replace("</", "<\\/").replace("<!--", "<\\!--")


def build_report(run_dir: str | Path, steps: int = 12, per_step: int = 4) -> str:
    run_dir = Path(run_dir).expanduser().resolve()
    if not rundir.is_run(run_dir):
        raise UIError(f"{run_dir} is not a run directory (none of {', '.join(rundir.RUN_MARKERS)} in it); "
                      f"give the folder `agentrl train` wrote (agentrl.run_dir)")
    idx = RolloutIndex(run_dir)
    try:
        idx.update()
        all_steps = idx.steps()
        blocks = []
        for s in _spread(all_steps, steps):
            page = explorer_page(idx, s["step"], validation=s["validation"], groups=True)
            groups = page["groups"][:per_step]
            blocks.append({"key": f"{s['step']}{'v' if s['validation'] else ''}", "stat": s, "groups": groups,
                           "tools": page["tools"], "prompts": page["total"]})
    finally:
        idx.close()
    metrics, _ = rundir.metric_lines(run_dir)
    info = rundir.run_info(run_dir)
    generated = time.strftime("%Y-%m-%d %H:%M:%S")
    data = {"info": info, "metrics": metrics, "steps": all_steps, "checkpoints": rundir.checkpoints(run_dir),
            "generated": generated}
    inline = {"css": (STATIC / "style.css").read_text(), "plotly": plotly_js().read_text(),
              "app": (STATIC / "app.js").read_text()}
    return templates().get_template("report.html").render(
        root="", inline=inline, info=info, config=rundir.config_view(run_dir), blocks=blocks,
        log="\n".join(rundir.log_tail(run_dir, 200)), data_json=_script_json(data),
        generated=generated, tools=sorted({t for b in blocks for t in b["tools"]}))


def write_report(run_dir: str | Path, output: str | Path, steps: int = 12, per_step: int = 4) -> Path:
    html = build_report(run_dir, steps=steps, per_step=per_step)
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
