"""A newcomer's own task, checked the way they would check it before training: a filings agent over the npm
``@modelcontextprotocol/server-filesystem`` (stdio, declared the Claude Desktop way) and an Agent RFT bearer
endpoint (FastAPI), rows naming those tools. Everything a new user runs before `agentrl train` must pass,
and a rollout must reach both servers. (Training itself is the e2e tests' job: tests/e2e.)"""

from __future__ import annotations

import json

import pytest
import yaml

from agentrl.cli import main
from agentrl.tools import ToolCall, ToolHub

from .conftest import run, start_rft, stop

FILINGS = {"acme-10k-2024.txt": "ACME CORP FORM 10-K 2024\nRevenue for Q3 2024 was $842 million.\nGross margin: 13.4%.\n",
           "globex-10k-2024.txt": "GLOBEX FORM 10-K 2024\nRevenue for Q3 2024 was $1.2 billion.\n"}


@pytest.fixture
def project(tmp_path, filesystem_server, tiny_model, monkeypatch):
    monkeypatch.setenv("FILINGS_TOKEN", "secret")
    filings = tmp_path / "filings"
    filings.mkdir()
    for name, text in FILINGS.items():
        (filings / name).write_text(text)
    proc, base = start_rft()
    rows = [{"messages": [{"role": "user", "content": f"What was {company}'s Q3 2024 revenue? The filings are in {filings}."}],
             "metadata": {"expected_answer": answer, "expected_tools": [{"name": "read_text_file"}],
                          "allowed_tools": ["read_text_file", "list_directory", "lookup"]}}
            for company, answer in (("Acme", "842 million dollars"), ("Globex", "1.2 billion dollars"))]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tmp_path / "filings.yaml"
    config.write_text(yaml.safe_dump({"agentrl": {
        "name": "filings", "model": str(tiny_model), "train_data": "train.jsonl", "device": "cpu",
        "tools": {"mcpServers": {
            "files": {"command": filesystem_server, "args": [str(filings)]},
            "lookup": {"type": "function", "url": f"{base}/lookup", "headers": {"Authorization": "Bearer ${FILINGS_TOKEN}"},
                       "parameters": {"type": "object", "properties": {"metric": {"type": "string"}}}}}},
        "rewards": [{"name": "math", "weight": 1.0}, {"name": "tool_use", "weight": 0.2}],
        "batch_size": 2, "samples_per_prompt": 2, "max_prompt_length": 256, "max_response_length": 128,
        "run_dir": str(tmp_path / "runs" / "filings")}}))
    yield config, filings
    stop(proc)


def test_the_filings_task_passes_every_check_a_new_user_runs(project, capsys):
    config, filings = project
    assert main(["tools", "check", str(config)]) == 0
    out = capsys.readouterr().out
    assert "ok   files:" in out and "read_text_file" in out, out
    assert "ok   lookup:" in out and "401 without it" in out, out  # the token was checked, no tool ran
    assert main(["data", "check", "--config", str(config)]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert main(["train", str(config), "--dry-run"]) == 0, capsys.readouterr().err

    tools = yaml.safe_load(config.read_text())["agentrl"]["tools"]

    async def rollout():  # one rollout's tool traffic, as the agent loop drives it
        async with ToolHub.from_config(tools) as hub:
            async with hub.rollout("r-filings", allowed_tools=["read_text_file", "lookup"]) as session:
                names = {s["function"]["name"] for s in await session.tool_schemas()}
                return names, await session.call_many([
                    ToolCall("c0", "read_text_file", {"path": str(filings / "acme-10k-2024.txt")}),
                    ToolCall("c1", "lookup", {"metric": "revenue"})])

    names, (text, figure) = run(rollout())
    assert names == {"read_text_file", "lookup"}
    assert not text.is_error and "$842 million" in text.content
    assert not figure.is_error and figure.content == "842 million dollars"
