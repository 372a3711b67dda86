"""`agentrl tools list|check|call` on a config that so far has only its tools, as a newcomer writes it first:
each command reads only what it uses, so no model, data or rewards are asked for (training still asks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agentrl.cli import main
from agentrl.config import ConfigError, load_tools


@pytest.fixture
def tools_only(tmp_path):
    config = tmp_path / "tools.yaml"
    config.write_text(yaml.safe_dump({"agentrl": {"tools": ["calculator"]}}))
    return config


def test_list_check_and_call_need_only_the_tools(tools_only, capsys):
    assert main(["tools", "list", str(tools_only)]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "calculator" in out and ".add(" in out, out
    assert main(["tools", "check", str(tools_only)]) == 0, capsys.readouterr()
    assert "ok   calculator:" in capsys.readouterr().out
    assert main(["tools", "call", str(tools_only), "calculator.add", '{"a": 2, "b": 3}']) == 0
    assert capsys.readouterr().out.strip() == "5"


def test_training_the_same_file_still_asks_for_the_rest(tools_only, capsys):
    assert main(["train", str(tools_only), "--dry-run"]) != 0
    err = capsys.readouterr().err
    assert "missing key 'agentrl.model'" in err and "missing key 'agentrl.train_data'" in err, err


def test_a_json_file_of_servers_is_found_beside_the_config(tmp_path, monkeypatch, capsys):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "servers.json").write_text(json.dumps({"mcpServers": {}}))
    (tmp_path / "conf" / "tools.yaml").write_text(yaml.safe_dump({"agentrl": {"tools": "servers.json"}}))
    monkeypatch.chdir(tmp_path)  # the path is relative to the config's folder, not the working directory
    assert load_tools("conf/tools.yaml") == str(tmp_path / "conf" / "servers.json")


@pytest.mark.parametrize("doc, says", [
    ({"tools": ["calculator"]}, "needs an 'agentrl:' mapping with the tool servers under it"),
    ({"agentrl": {"tools": 3}}, "agentrl.tools must be a list of plugin names"),
])
def test_a_misplaced_or_mistyped_tools_key_says_where_it_goes(tmp_path, doc, says):
    config = tmp_path / "tools.yaml"
    config.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=says) as info:
        load_tools(config)
    assert str(config) in str(info.value)


def test_no_tools_named_is_said_with_an_example(tmp_path, capsys):
    config = tmp_path / "tools.yaml"
    config.write_text(yaml.safe_dump({"agentrl": {"model": "demo"}}))
    with pytest.raises(SystemExit, match=r"agentrl.tools is empty; name tool servers there \(e.g. tools: \[calculator\]\)"):
        main(["tools", "list", str(config)])


SERVER = '''from mcp.server.mcpserver import MCPServer
import os
app = MCPServer("mine", log_level="WARNING")

@app.tool()
def where() -> str:
    """The server's working directory."""
    return os.getcwd()

app.run()
'''


def test_a_users_own_server_script_beside_the_config_starts_from_any_folder(tmp_path, monkeypatch, capsys):
    """`args: [my_server.py]` as a newcomer writes it: the server starts in the config's folder (a relative `cwd`
    is under it), wherever agentrl runs, as verl's workers do from the run directory."""
    import sys

    from agentrl.config import load_config

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "srv").mkdir(parents=True)
    elsewhere.mkdir()
    (project / "my_server.py").write_text(SERVER)
    (project / "srv" / "other.py").write_text(SERVER)
    (project / "d.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    tools = {"mine": {"command": sys.executable, "args": ["my_server.py"]},
             "sub": {"command": sys.executable, "args": ["other.py"], "cwd": "srv"}}
    (project / "my.yaml").write_text(yaml.safe_dump({"agentrl": {
        "model": "demo", "train_data": "d.jsonl", "tools": tools, "rewards": ["math"]}}))
    monkeypatch.chdir(elsewhere)
    assert main(["tools", "call", str(project / "my.yaml"), "mine.where"]) == 0, capsys.readouterr()
    assert capsys.readouterr().out.strip() == str(project)
    assert main(["tools", "call", str(project / "my.yaml"), "sub.where"]) == 0, capsys.readouterr()
    assert capsys.readouterr().out.strip() == str(project / "srv")
    settings, _, _ = load_config(project / "my.yaml")  # what training hands verl's workers
    assert settings.tools["mine"]["cwd"] == str(project) and settings.tools["sub"]["cwd"] == str(project / "srv")
    assert load_config(project / "my.yaml", ["agentrl.tools=[calculator]"])[0].tools == ["calculator"]  # plugins: as named
    (project / "servers.json").write_text(json.dumps({"mcpServers": {"mine": tools["mine"]}}))
    (project / "by_file.yaml").write_text(yaml.safe_dump({"agentrl": {"tools": "servers.json"}}))
    assert main(["tools", "call", str(project / "by_file.yaml"), "mine.where"]) == 0, capsys.readouterr()
    assert capsys.readouterr().out.strip() == str(project)  # a JSON file's servers start in its folder


def test_a_bare_python_without_the_servers_packages_is_named_with_agentrls_own(tmp_path, monkeypatch, capsys):
    """Run as `.venv/bin/agentrl` without the environment activated, `python` is another interpreter: the error
    says which, and the command to write."""
    import os
    import sys

    from agentrl.tools.client import _other_python
    from agentrl.tools.config import ServerSpec

    bindir = tmp_path / "bin"
    bindir.mkdir()
    other = bindir / "python"
    other.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'mcp'\" >&2\nexit 1\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({"agentrl": {"tools": {"mine": {"command": "python",
                                                                                    "args": ["my_server.py"]}}}}))
    assert main(["tools", "check", str(tmp_path / "t.yaml")]) != 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "No module named 'mcp'" in text and f"'python' on PATH is {other}" in text, text
    assert f"write `command: {sys.executable}`" in text
    spec = ServerSpec(name="x", command="python")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    assert _other_python(spec, "No module named 'mcp'") == ""  # agentrl's own python: nothing to add
    assert _other_python(spec, "SyntaxError") == ""  # not a missing module
