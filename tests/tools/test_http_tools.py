"""HTTP function tools in the Agent RFT shape, against a real FastAPI server on loopback (tests/tools/servers/rft_server.py)."""

from __future__ import annotations

import json
import time

import pytest

from agentrl.tools import ToolCall, ToolConfigError, ToolHub, ToolInfraError, parse_servers_config
from agentrl.tools.cli import call_tool, check, list_tools

from .conftest import free_port, run, start_rft, stop


def rft_tools(base: str, token: str = "${RFT_TEST_TOKEN}") -> list[dict]:
    auth = {"Authorization": f"Bearer {token}"}
    return [
        {"name": "search", "url": f"{base}/search", "headers": auth, "openapi": f"{base}/openapi.json"},
        {"name": "lookup", "url": f"{base}/lookup", "headers": auth, "description": "one figure",
         "parameters": {"type": "object", "properties": {"metric": {"type": "string"}}, "required": ["metric"]}},
    ]


@pytest.fixture(autouse=True)
def token(monkeypatch):
    monkeypatch.setenv("RFT_TEST_TOKEN", "secret")


def test_the_agent_rft_list_shape_is_accepted_as_is_and_as_a_json_file(rft_server, tmp_path):
    base, _ = rft_server
    specs = parse_servers_config(rft_tools(base))
    assert set(specs) == {"search", "lookup"} and specs["search"].function and specs["search"].rate_limit == 50.0
    assert specs["lookup"].headers == {"Authorization": "Bearer secret"}  # ${ENV} expanded
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(rft_tools(base)))
    assert parse_servers_config(str(path)) == specs
    mixed = parse_servers_config({"mcpServers": {"s": {**rft_tools(base)[1], "type": "function"}}})
    assert mixed["s"].function and mixed["s"].parameters["required"] == ["metric"]


def test_the_readme_inline_endpoint_list_trains(rft_server, tiny_model, tmp_path, capsys):
    """The README's inline form (a list of endpoint dicts under agentrl.tools) goes through every check of
    `agentrl train --dry-run` and into the run spec the workers read, as the JSON-file form does."""
    import yaml

    from agentrl.cli import main
    from agentrl.spec import RunSpec

    base, _ = rft_server
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(
        {"messages": [{"role": "user", "content": f"What was Acme's revenue in {2020 + i}?"}],
         "metadata": {"expected_answer": "842 million dollars"}}) + "\n" for i in range(4)))
    config = tmp_path / "my.yaml"
    config.write_text(yaml.safe_dump({"agentrl": {
        "name": "inline", "model": str(tiny_model), "train_data": "train.jsonl", "tools": rft_tools(base),
        "rewards": [{"name": "math"}], "batch_size": 2, "samples_per_prompt": 2, "device": "cpu",
        "run_dir": str(tmp_path / "runs" / "inline")}}))
    assert main(["train", str(config), "--dry-run"]) == 0, capsys.readouterr().err
    spec = RunSpec.read(tmp_path / "runs" / "inline" / "agentrl_spec.json")
    assert [t["name"] for t in spec.tools] == ["search", "lookup"]
    assert spec.tools[0]["headers"] == {"Authorization": "Bearer ${RFT_TEST_TOKEN}"}  # the secret stays in the env


def test_bad_entries_say_what_to_fix(monkeypatch):
    with pytest.raises(ToolConfigError, match="needs a \"name\""):
        parse_servers_config([{"url": "http://x/search"}])
    with pytest.raises(ToolConfigError, match="needs a \"url\""):
        parse_servers_config([{"name": "search"}])
    with pytest.raises(ToolConfigError, match="RFT_MISSING"):
        parse_servers_config([{"name": "s", "url": "http://x/s", "headers": {"Authorization": "Bearer ${RFT_MISSING}"}}])
    with pytest.raises(ToolConfigError, match="unknown key"):
        parse_servers_config([{"name": "s", "url": "http://x/s", "header": {}}])


def test_schemas_come_from_the_config_or_the_openapi_document(rft_server):
    base, _ = rft_server

    async def main():
        async with ToolHub.from_config(rft_tools(base)) as hub:
            async with hub.rollout("r-schema") as session:
                return {s["function"]["name"]: s["function"] for s in await session.tool_schemas()}

    schemas = run(main())
    assert schemas["search"]["parameters"]["properties"]["query"]["type"] == "string"  # from FastAPI's OpenAPI
    assert "filings" in schemas["search"]["description"]
    assert schemas["lookup"]["parameters"]["required"] == ["metric"] and schemas["lookup"]["description"] == "one figure"


def test_calls_carry_rollout_id_and_call_id_and_errors_reach_the_model(rft_server):
    base, log = rft_server

    async def main():
        async with ToolHub.from_config(rft_tools(base) + [
                {"name": "bad", "url": f"{base}/bad_request", "headers": {"Authorization": "Bearer secret"}}]) as hub:
            async with hub.rollout("r-42") as session:
                return await session.call_many([ToolCall("c1", "lookup", {"metric": "gross margin"}),
                                                ToolCall("c2", "search", {"query": ""}),
                                                ToolCall("c3", "bad", {"year": 1900})])

    ok, empty, bad = run(main())
    assert (ok.content, ok.is_error) == ("13.4%", False)
    assert empty.is_error and "must not be empty" in empty.content  # structured error output (HTTP 200)
    assert bad.is_error and "HTTP 422" in bad.content and "between 2000 and 2030" in bad.content  # a 4xx
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert {"route": "lookup", "call_id": "c1", "rollout_id": "r-42"} in calls


def test_5xx_is_retried_then_the_rollout_is_unscorable(rft_server):
    base, log = rft_server
    auth = {"Authorization": "Bearer secret"}

    async def main():
        tools = [{"name": "crash", "url": f"{base}/crash", "headers": auth},
                 {"name": "flaky", "url": f"{base}/flaky", "headers": auth}]
        async with ToolHub.from_config(tools) as hub:
            async with hub.rollout("r-5xx") as session:
                flaky = await session.call(ToolCall("f", "flaky", {}))  # 503 twice, then fine
                with pytest.raises(ToolInfraError, match="HTTP 500") as info:
                    await session.call(ToolCall("c", "crash", {}))
                return flaky, info.value, hub.metrics()

    flaky, err, metrics = run(main())
    assert flaky.content == "ok" and metrics["flaky"]["retries"] == 2
    assert err.kind == "http_5xx" and metrics["crash"]["retries"] == 3
    assert sum(1 for line in log.read_text().splitlines() if '"crash"' in line) == 4  # 1 + 3 retries


def test_a_wrong_token_is_reported_as_401_and_not_retried(rft_server):
    base, _ = rft_server
    text, is_error = call_tool(rft_tools(base, token="wrong"), "lookup", '{"metric": "revenue"}')
    assert is_error and "401 Unauthorized" in text and "Authorization header" in text and f"{base}/lookup" in text
    report, ok = check(rft_tools(base, token="wrong"))
    assert not ok and report.count("unauthorized") == 2


def test_cli_list_check_call(rft_server):
    base, _ = rft_server
    listing = list_tools(rft_tools(base))
    assert "search.search(query)" in listing and "lookup.lookup(metric)" in listing
    report, ok = check(rft_tools(base))
    assert ok and "2/2 servers ok" in report
    assert call_tool(rft_tools(base), "lookup", '{"metric": "headcount"}') == ("1,204", False)


def test_rate_cap_per_endpoint(rft_server):
    base, _ = rft_server
    tools = [{**rft_tools(base)[1], "rate_limit": 10}]

    async def main():
        async with ToolHub.from_config(tools) as hub:
            async with hub.rollout("r-rate") as session:
                start = time.perf_counter()
                await session.call_many([ToolCall(f"c{i}", "lookup", {"metric": "revenue"}) for i in range(20)])
                return time.perf_counter() - start

    # 10 calls/s: the bucket holds 10, the other 10 wait for it to drain (about a second)
    assert run(main()) >= 0.85


def test_breaker_half_opens_and_recovers_when_the_server_comes_back():
    port = free_port()
    tools = [{"name": "lookup", "url": f"http://127.0.0.1:{port}/lookup", "headers": {"Authorization": "Bearer secret"},
              "retries": 0, "circuit_failures": 2, "circuit_reset": 30}]

    async def main():
        import asyncio

        async with ToolHub.from_config(tools) as hub:
            async with hub.rollout("r-breaker") as session:
                errors = []
                for _ in range(3):
                    try:
                        await session.call(ToolCall("c", "lookup", {"metric": "revenue"}))
                    except ToolInfraError as exc:
                        errors.append(exc)
                assert [e.kind for e in errors] == ["transport", "transport", "circuit_open"], errors
                assert "connection refused" in str(errors[0]).lower()
                proc, _ = start_rft(port)  # the server comes back
                try:
                    deadline = time.monotonic() + 5
                    while True:
                        try:
                            result = await session.call(ToolCall("c", "lookup", {"metric": "revenue"}))
                            break
                        except ToolInfraError as exc:
                            assert exc.kind == "circuit_open" and time.monotonic() < deadline, exc
                            await asyncio.sleep(0.2)
                    return result, hub.metrics()["lookup"]["circuit"]
                finally:
                    stop(proc)

    result, circuit = run(main())
    assert result.content == "842 million dollars" and circuit == "closed"


def test_an_mcp_url_that_is_not_mcp_or_refuses_the_token_says_so_in_one_line(rft_server):
    base, _ = rft_server
    report, ok = check({"m": {"url": f"{base}/mcp", "headers": {"Authorization": "Bearer secret"}}})
    assert not ok and "did not answer as an MCP server" in report and "HTTP 404" in report
    assert len(report.splitlines()) == 2
    report, ok = check({"m": {"url": f"{base}/mcp", "headers": {"Authorization": "Bearer wrong"}}})
    assert not ok and "HTTP 401 Unauthorized" in report and "headers.Authorization" in report
    report, ok = check({"m": {"url": f"http://127.0.0.1:{free_port()}/mcp", "retries": 0}})
    assert not ok and "cannot reach" in report and "ConnectError" in report


def test_check_verifies_the_token_without_running_the_tool(tmp_path, monkeypatch):
    """`tools check` on an endpoint that checks the token first, and on one that validates the body first:
    it never says ok to a wrong token, and it never runs a tool (the server logs every call it runs)."""
    for auth in ("first", "after-body"):
        log = tmp_path / f"{auth}.jsonl"
        proc, base = start_rft(RFT_LOG=str(log), RFT_AUTH=auth)
        try:
            good, ok_good = check(rft_tools(base))
            monkeypatch.setenv("RFT_TEST_TOKEN", "wrong")
            bad, ok_bad = check(rft_tools(base))
            monkeypatch.setenv("RFT_TEST_TOKEN", "secret")
        finally:
            stop(proc)
        assert not log.exists() or log.read_text() == "", log.read_text()  # no tool ran
        assert not any(line.startswith("ok") for line in bad.splitlines()), bad
        if auth == "first":
            assert ok_good and good.count("ok   ") == 2 and "422 with the token, 401 without it" in good, good
            assert not ok_bad and "FAIL search: unauthorized: HTTP 401 Unauthorized" in bad, bad
        else:  # the same answer whatever the token: the check says it could not tell
            for text in (good, bad):
                assert text.count("??   ") == 2 and "token NOT verified" in text, text
                assert "2 reachable but their token not verified" in text and "`agentrl tools call" in text, text


@pytest.mark.parametrize("kind", ["endpoint", "mcp"])
def test_a_server_back_after_a_long_outage_is_used_again_at_once(kind, tmp_path):
    """The breaker's wait doubles while a server stays down (here to 8 s or more); once the server is back, a probe
    closes the circuit well before that wait is over, for an Agent RFT endpoint and an MCP server over HTTP
    (whose old session the restart made stale)."""
    import asyncio
    import re
    import subprocess
    import sys

    from .conftest import PROBE, _wait_for_port

    port = free_port()
    if kind == "endpoint":
        tools = [{"name": "lookup", "url": f"http://127.0.0.1:{port}/lookup", "headers": {"Authorization": "Bearer secret"},
                  "retries": 0, "circuit_failures": 2, "circuit_reset": 60}]
        call = ToolCall("c", "lookup", {"metric": "revenue"})

        def start():
            return start_rft(port)[0]
    else:
        tools = {"probe": {"url": f"http://127.0.0.1:{port}/mcp", "retries": 0, "circuit_failures": 2, "circuit_reset": 60}}
        call = ToolCall("c", "add", {"a": 2, "b": 3})

        def start():
            proc = subprocess.Popen([sys.executable, PROBE, "--http", "--port", str(port)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _wait_for_port(port, proc)
            return proc

    async def main():
        began = time.monotonic()
        proc = start()
        # the outage lasts until the breaker's wait is well over what a restart takes on this machine now
        needed = 2 * (time.monotonic() - began) + 5.0
        try:
            async with ToolHub.from_config(tools) as hub:
                async with hub.rollout("r-outage") as session:
                    assert not (await session.call(call)).is_error
                    stop(proc)  # the outage: calls keep coming, trials fail, the breaker's wait doubles
                    wait, breaker_until = 0.0, None
                    while wait < needed:
                        try:
                            await session.call(call)
                        except ToolInfraError as exc:
                            found = re.search(r"failing fast for ([0-9.]+)s more", str(exc))
                            if found:  # the breaker alone would let the next trial through at this time
                                wait = float(found.group(1))
                                breaker_until = time.monotonic() + wait
                        await asyncio.sleep(0.1)
                    proc = await asyncio.to_thread(start)  # back, on the same port
                    back = time.monotonic()
                    # the background probe may already have closed the circuit while the server came up (then the
                    # first call goes through); else calls fail fast as "circuit_open" until the probe does
                    while True:
                        try:
                            result = await session.call(call)
                            break
                        except ToolInfraError as exc:
                            assert exc.kind == "circuit_open", exc
                            await asyncio.sleep(0.1)
                    return result, back, time.monotonic(), breaker_until, hub.metrics()
        finally:
            stop(proc)

    result, back, used_again, breaker_until, metrics = run(main())
    assert not result.is_error and result.content in ("842 million dollars", "5")
    assert breaker_until - back > 2.0, (back, breaker_until)  # the restart came well within the breaker's wait ...
    assert used_again < breaker_until, (used_again, breaker_until)  # ... and the probe, not that wait, closed it
    assert all(m["circuit"] == "closed" for m in metrics.values()), metrics
