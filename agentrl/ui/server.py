"""``agentrl ui`` and ``agentrl train --ui``: serve the job page, and tell ``agentrl train`` where it is.

    agentrl ui runs/ --port 8266              # http://127.0.0.1:8266/ lists every run under runs/
    agentrl train my.yaml --ui                # starts one for the run's parent folder (or reuses a running one)
                                              # and prints http://127.0.0.1:8266/runs/NAME

A running server records itself in ``$AGENTRL_HOME/ui/PORT.json`` (pid, address, folder); ``agentrl train``
reads those records to print the page of the run it starts, and drops the records of servers that died.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

from agentrl.errors import AgentrlError

DEFAULT_PORT = 8266  # beside, not on, 8265: Ray's dashboard, which GPU runs start


class UIError(AgentrlError):
    """The job page cannot start; the message says why and what to change."""


def registry() -> Path:
    home = Path(os.environ.get("AGENTRL_HOME", Path.home() / ".cache" / "agentrl"))
    return home / "ui"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_servers() -> list[dict]:
    """The job-page servers of this user that are alive (records of dead ones are removed)."""
    out = []
    folder = registry()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _alive(int(rec.get("pid", 0))):
            out.append(rec)
        else:
            path.unlink(missing_ok=True)
    return out


def page_for(run_dir: Path) -> str | None:
    """The address of ``run_dir``'s page on a running server, if one serves the folder it is in."""
    run_dir = Path(run_dir).resolve()
    for rec in running_servers():
        root = Path(rec["runs_dir"])
        if run_dir == root:
            return rec["url"]
        if root in run_dir.parents:
            return rec["url"] + "runs/" + run_dir.relative_to(root).as_posix()
    return None


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return f"http://{shown}:{port}/"


def serve(runs_dir: str, host: str = "127.0.0.1", port: int = DEFAULT_PORT, out: TextIO = sys.stdout) -> int:
    """Run the job page in the foreground until Ctrl-C."""
    import uvicorn

    from agentrl.ui.app import create_app

    root = Path(runs_dir).expanduser().resolve()
    if not root.is_dir():
        raise UIError(f"{runs_dir!r} is not a folder; give the folder that holds your run directories "
                      f"(agentrl.run_dir's parent, runs/ by default)")
    if not _port_free(host, port):
        raise UIError(f"port {port} on {host} is taken (another `agentrl ui`, or a Ray dashboard?); pick another with --port")
    url = _url(host, port)
    record = registry() / f"{port}.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"pid": os.getpid(), "url": url, "runs_dir": str(root), "host": host, "port": port}))
    print(f"agentrl: job page for {root} at {url} (Ctrl-C stops it)", file=out, flush=True)
    try:
        uvicorn.run(create_app(root), host=host, port=port, log_level="warning")
    finally:
        record.unlink(missing_ok=True)
    return 0


def announce(run_dir: Path, start: bool, port: int = DEFAULT_PORT, out: TextIO = sys.stdout) -> None:
    """Print the run's page when a server shows it; with ``start``, start one for the run's folder first."""
    url = page_for(run_dir)
    if url is None and start:
        root = Path(run_dir).resolve().parent
        root.mkdir(parents=True, exist_ok=True)
        while not _port_free("127.0.0.1", port) and port < DEFAULT_PORT + 50:
            port += 1
        log = open(registry().parent / "ui.log", "ab") if registry().parent.is_dir() else subprocess.DEVNULL
        proc = subprocess.Popen([sys.executable, "-m", "agentrl.cli", "ui", str(root), "--port", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            url = page_for(run_dir)
            if url and not _port_free("127.0.0.1", port):
                break
            time.sleep(0.2)
        if proc.poll() is not None or not url:
            print(f"agentrl: the job page did not start (see {registry().parent / 'ui.log'}); training goes on",
                  file=out, flush=True)
            return
        print(f"agentrl: job page at {url} (served by `agentrl ui`, pid {proc.pid}; it keeps serving after "
              f"training; stop it with kill {proc.pid})", file=out, flush=True)
        return
    if url:
        print(f"agentrl: job page at {url}", file=out, flush=True)


def run_dir_of(config_path: str, overrides: list[str]) -> Path:
    """The run directory ``agentrl train`` will use for this config (resolved as the runner resolves it)."""
    from agentrl.config import load_config

    settings, _, _ = load_config(config_path, overrides)
    run_dir = Path(settings.run_dir.replace("${name}", settings.name)).expanduser()
    return run_dir if run_dir.is_absolute() else Path.cwd() / run_dir
