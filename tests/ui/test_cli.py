"""`agentrl ui`, `agentrl report`, and how `agentrl train` finds the page of its run (real processes)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import urllib.request

from agentrl.cli import main
from agentrl.ui import server

from .conftest import free_port, wait_until


def test_report_command(runs_root, tmp_path, capsys):
    out = tmp_path / "sub" / "r.html"
    assert main(["report", str(runs_root / "alpha"), "-o", str(out), "--steps", "3", "--per-step", "1"]) == 0
    assert "report written to" in capsys.readouterr().out
    html = out.read_text()
    assert html.count('class="step-block"') == 3 and "Plotly" in html


def test_report_of_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "is not a run directory" in err and "agentrl.run_dir" in err


def test_ui_refuses_a_missing_folder_and_a_taken_port(tmp_path, capsys):
    assert main(["ui", str(tmp_path / "nope")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert main(["ui", str(tmp_path), "--port", str(s.getsockname()[1])]) == 2
    assert "is taken" in capsys.readouterr().err


def test_train_finds_a_running_page_and_starts_one_with_ui(runs_root, tmp_path):
    env = {**os.environ, "AGENTRL_HOME": os.environ["AGENTRL_HOME"]}
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "agentrl.cli", "ui", str(runs_root), "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: server.page_for(runs_root / "alpha"), what="the server's record")
        assert server.page_for(runs_root / "alpha") == f"http://127.0.0.1:{port}/runs/alpha"
        out = io.StringIO()
        server.announce(runs_root / "alpha", start=False, out=out)
        assert out.getvalue().strip() == f"agentrl: job page at http://127.0.0.1:{port}/runs/alpha"
        page = wait_until(lambda: _get(f"http://127.0.0.1:{port}/runs/alpha"), what="the page")
        assert "alpha" in page
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(15)
    assert server.page_for(runs_root / "alpha") is None  # its record went with it

    # --ui with no page running: one is started for the run's folder and keeps serving
    out = io.StringIO()
    server.announce(tmp_path / "fresh" / "newrun", start=True, out=out)
    text = out.getvalue()
    assert "job page at http://127.0.0.1:" in text and "/runs/newrun" in text, text
    pid = int(text.split("pid ")[1].split(";")[0])
    try:
        url = text.split("job page at ")[1].split(" ")[0]
        assert "agentrl" in wait_until(lambda: _get(url.rsplit("runs/", 1)[0]), what="the started page")
    finally:
        os.kill(pid, signal.SIGTERM)


def test_train_without_a_page_prints_nothing(runs_root):
    out = io.StringIO()
    server.announce(runs_root / "alpha", start=False, out=out)
    assert out.getvalue() == ""


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.read().decode()
    except OSError:
        return None


def test_train_ui_flag_keeps_the_overrides(monkeypatch):
    import agentrl.cli as cli

    seen = {}
    monkeypatch.setattr(cli, "_cmd_train", lambda args: seen.update(ui=args.ui, overrides=args.overrides) or 0)
    for argv in (["train", "my.yaml", "agentrl.batch_size=4", "--ui", "trainer.save_freq=2"],
                 ["train", "--ui", "my.yaml", "agentrl.batch_size=4", "trainer.save_freq=2"]):
        assert cli.main(argv) == 0
        assert seen == {"ui": True, "overrides": ["agentrl.batch_size=4", "trainer.save_freq=2"]}, argv
    try:
        cli.main(["train", "my.yaml", "--nope"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("an unknown option must be refused")
