"""`agentrl tools list|check|call` on a config that so far has only its tools, as a newcomer writes it first:
each command reads only what it uses, so no model, data or rewards are asked for (training still asks)."""

from __future__ import annotations

import json

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
