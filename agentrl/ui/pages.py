"""The page templates and the installed assets (our CSS/JS, Plotly's bundle from the plotly package).

    env = templates()
    html = env.get_template("index.html").render(root="/", runs_dir="runs", inline=None)
    plotly_js()        # Path of plotly.min.js inside the installed plotly wheel (served locally, never a CDN)
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

HERE = Path(__file__).parent
STATIC = HERE / "static"


@lru_cache(maxsize=1)
def templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")),
                              autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined)


def plotly_js() -> Path:
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.exists():
        from agentrl.errors import AgentrlError

        raise AgentrlError(f"{path} is missing: the plotly package is incomplete; reinstall it "
                           f"(.venv/bin/pip install --force-reinstall plotly)")
    return path
