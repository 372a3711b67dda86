"""Tool servers that hang, die at start, or die later, against real processes, as `agentrl tools` and the hub
see them: a bounded check with the reason, the server's own stderr, a non-zero exit, and every restart said."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agentrl.cli import main
from agentrl.tools import ToolCall, ToolHub, ToolInfraError

from .conftest import HERE, run

HUNG = str(HERE / "servers" / "hung_server.py")


def agentrl(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentrl.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_a_hung_stdio_server_fails_the_check_once_with_the_reason(tmp_path):
    starts = tmp_path / "starts"
    config = tmp_path / "tools.json"
    config.write_text(json.dumps({"mcpServers": {"index": {"command": sys.executable, "args": [HUNG, str(starts)],
                                                            "connect_timeout": 3}}}))
    result = agentrl("tools", "check", str(config))
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "FAIL index: connect_timeout: no MCP handshake within 3" in out, out
    assert "never answered MCP's initialize" in out and "hung_server: loading the index" in out, out
    assert starts.read_text().count("started") == 1  # tried once, not retried for minutes
    assert "Future exception was never retrieved" not in out and "Traceback" not in out, out


def test_a_server_that_dies_at_start_shows_its_stderr(filesystem_server, tmp_path, capsys):
    """The npm filesystem server, given a folder that does not exist, prints why on stderr and exits."""
    config = tmp_path / "tools.json"
    config.write_text(json.dumps({"mcpServers": {"files": {"command": filesystem_server,
                                                            "args": [str(tmp_path / "no-such-folder")]}}}))
    for action in ("check", "list"):
        rc = main(["tools", action, str(config)])
        captured = capsys.readouterr()
        out = captured.out + captured.err
        assert rc == 1, (action, out)
        assert "None of the specified directories are accessible" in out, (action, out)
        assert "exited or closed its stdout before MCP's handshake" in out, (action, out)
        assert "Traceback" not in out and "Future exception" not in out, (action, out)


def test_tools_list_json_and_a_working_third_party_server(filesystem_server, tmp_path, capsys):
    (tmp_path / "filings").mkdir()
    config = tmp_path / "tools.json"
    config.write_text(json.dumps({"mcpServers": {"files": {"command": filesystem_server,
                                                            "args": [str(tmp_path / "filings")]}}}))
    assert main(["tools", "list", str(config), "--json"]) == 0
    (server,) = json.loads(capsys.readouterr().out)
    names = {t["name"] for t in server["tools"]}
    assert server["server"] == "files" and {"read_text_file", "list_directory"} <= names, names
    assert main(["tools", "check", str(config), "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["ok"] and checked["servers"][0]["server"] == "files" and checked["servers"][0]["status"] == "ok"


def test_a_server_that_dies_later_is_restarted_and_says_why(probe_stdio, capsys):
    async def main():
        async with ToolHub.from_config({"probe": {**probe_stdio, "retries": 0}}) as hub:
            async with hub.rollout("r") as s:
                first = int((await s.call(ToolCall("p", "pid", {}))).content)
                with pytest.raises(ToolInfraError, match="connection_closed"):
                    await s.call(ToolCall("c", "crash", {"message": "probe: out of file handles"}))
                second = int((await s.call(ToolCall("p", "pid", {}))).content)
            return first, second, hub.metrics()["probe"]["restarts"]

    first, second, restarts = run(main())
    err = capsys.readouterr().err
    assert second != first and restarts >= 1
    assert "agentrl: tool server 'probe':" in err and "restart 1)" in err, err
    assert "probe: out of file handles" in err, err  # what the server said before it died
