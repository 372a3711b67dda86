"""Terminal output for the workflow commands: rich tables and progress bars, or JSON with ``--json``.

    out = Output(json_mode=False)
    out.table("per slice", ["slice", "n", "Δ reward"], [["add", 21, "+0.86"]])
    with out.progress("evaluating", total=64) as tick:
        ...; tick()
    out.emit({"rows": 64})          # printed only with --json
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any, Iterator


def signed(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:+.{digits}f}"


def num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


class Output:
    def __init__(self, json_mode: bool = False, file: Any = None) -> None:
        from rich.console import Console

        self.json_mode = json_mode
        out = file or sys.stdout
        self.console = Console(file=out, soft_wrap=True, highlight=False,
                               width=None if out.isatty() else 120)
        self.err = Console(stderr=True)

    def line(self, text: str = "", style: str | None = None) -> None:
        if not self.json_mode:
            self.console.print(text, style=style, markup=False)

    def rule(self, title: str) -> None:
        if not self.json_mode:
            self.console.rule(title)

    def table(self, title: str | None, columns: list[str], rows: list[list[Any]], *, wrap: bool = False) -> None:
        if self.json_mode:
            return
        from rich.table import Table

        t = Table(title=title, title_justify="left", show_lines=wrap)
        for n, c in enumerate(columns):
            t.add_column(c, justify="left" if n == 0 or wrap else "right", overflow="fold")
        for r in rows:
            t.add_row(*[str(c) for c in r])
        self.console.print(t)

    def emit(self, payload: Any) -> None:
        if self.json_mode:
            sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")

    @contextlib.contextmanager
    def progress(self, label: str, total: int) -> Iterator[Any]:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=self.err, transient=True, disable=self.json_mode or not self.err.is_terminal) as bar:
            task = bar.add_task(label, total=total)
            yield lambda: bar.advance(task)
