"""Server push-back (429 / 503 with Retry-After) against real loopback servers: an HTTP function tool
(tests/tools/servers/traffic_server.py) and an MCP server over streamable HTTP (pushback_mcp.py): the wait
is honoured, stays inside the call's deadline, and a call that runs out of time makes the rollout unscorable."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from email.utils import formatdate, parsedate_to_datetime

import httpx
import pytest

from agentrl.tools import ToolHub, ToolInfraError
from agentrl.tools.pushback import pushback_wait, retry_after_seconds

from .conftest import HERE, _wait_for_port, free_port, run, stop

SERVERS = HERE / "servers"


def _serve(script: str, *args: str):
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVERS / script), "--port", str(port), *args], cwd=SERVERS,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_port(port, proc)
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def traffic():
    proc, base = _serve("traffic_server.py")
    yield base
    stop(proc)


def _hub(base: str, **options) -> ToolHub:
    return ToolHub.from_config([{"name": "tool", "url": f"{base}/tool", "parameters": {"type": "object"}, **options}])


async def _call(hub: ToolHub, arguments: dict, call_id: str):
    try:
        async with hub.rollout(f"r-{call_id}") as session:
            return await session.call({"id": call_id, "name": "tool", "arguments": arguments})
    finally:
        await hub.aclose()


def _times(base: str, call_id: str) -> list[float]:
    return httpx.get(f"{base}/stats").json()["times"].get(call_id, [])


def test_retry_after_is_read_as_seconds_or_an_http_date():
    assert retry_after_seconds("7") == 7.0 and retry_after_seconds(" 0.5 ") == 0.5
    now = time.time()
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now) == pytest.approx(30, abs=1)
    assert retry_after_seconds(formatdate(now - 30, usegmt=True), now) == 0.0  # a date past: no wait
    assert retry_after_seconds("-3") == 0.0
    for unreadable in (None, "", "soon", "nan", "Fri, 99 Foo 2026"):
        assert retry_after_seconds(unreadable) is None, unreadable
    waits = [pushback_wait(2.0, 1) for _ in range(200)]
    assert all(2.0 <= w <= 2.2 for w in waits) and len(set(waits)) > 100  # jittered, never below the ask
    assert all(0 <= pushback_wait(None, 1) <= 0.1 for _ in range(50))  # no Retry-After: the backoff schedule


@pytest.mark.parametrize("status", [429, 503])
def test_a_pushed_back_call_waits_what_retry_after_asks_and_then_succeeds_even_with_no_retries_left(traffic, status):
    """retries=0: push-back does not spend retries, the deadline bounds it."""
    result = run(_call(_hub(traffic, retries=0, timeout=5), {"fail": 2, "status": status, "retry_after": "1"},
                       f"wait-{status}"))
    assert not result.is_error and result.content == f"ok wait-{status}"
    times = _times(traffic, f"wait-{status}")
    assert len(times) == 3
    assert all(b - a >= 1.0 for a, b in zip(times, times[1:])), times  # never sooner than asked


def test_an_http_date_retry_after_is_honoured(traffic):
    when = formatdate(time.time() + 2, usegmt=True)  # whole seconds: between 1 and 2 s from now
    result = run(_call(_hub(traffic, timeout=5), {"fail": 1, "status": 503, "retry_after": when}, "date"))
    assert result.content == "ok date"
    first, second = _times(traffic, "date")
    # the date is the promise (whole seconds: not the 2 s asked from the moment the test wrote it, which a loaded
    # machine may have spent partly before the first answer): the retry never comes before it
    assert second >= parsedate_to_datetime(when).timestamp(), (first, second, when)


def test_a_wait_past_the_deadline_ends_the_call_at_once_as_infrastructure(traffic):
    hub = _hub(traffic, timeout=5, deadline=3)
    with pytest.raises(ToolInfraError) as err:
        run(_call(hub, {"fail": 5, "status": 429, "retry_after": "30"}, "too-long"))
    assert err.value.kind == "deadline"
    text = str(err.value)
    assert "HTTP 429" in text and "Retry-After: 30" in text and "it asked for 30s" in text and '"deadline"' in text
    assert len(_times(traffic, "too-long")) == 1


def test_repeated_push_back_stops_at_the_deadline(traffic):
    """Retry-After 1 forever, deadline 2.5 s: two or three tries, then infra; never more time than the deadline."""
    hub = _hub(traffic, timeout=5, deadline=2.5)
    with pytest.raises(ToolInfraError) as err:
        run(_call(hub, {"fail": 100, "status": 429, "retry_after": "1"}, "forever"))
    times = _times(traffic, "forever")
    assert times[-1] - times[0] < 2.5  # no try started past the deadline
    assert err.value.kind == "deadline" and 2 <= len(_times(traffic, "forever")) <= 3


def test_a_429_without_retry_after_spends_retries_like_any_failure(traffic):
    with pytest.raises(ToolInfraError) as err:
        run(_call(_hub(traffic, timeout=5, retries=1), {"fail": 5, "status": 429, "retry_after": ""}, "no-header"))
    assert err.value.kind == "rate_limited" and len(_times(traffic, "no-header")) == 2


def test_other_failures_still_spend_retries_and_the_breaker_counts_push_back_as_before(traffic):
    hub = _hub(traffic, timeout=5, retries=1, circuit_failures=2)

    async def go():
        try:
            async with hub.rollout("r") as session:
                await session.call({"id": "brk", "name": "tool", "arguments": {"fail": 2, "retry_after": "0"}})
        finally:
            metrics = hub.metrics()
            await hub.aclose()
        return metrics

    with pytest.raises(ToolInfraError) as err:
        run(go())
    # two 429s in a row open a circuit of 2 failures: the third try is refused by the breaker, as any failure would be
    assert err.value.kind == "circuit_open"


def test_a_call_out_of_time_makes_the_rollout_unscorable_not_zero(traffic, tmp_path):
    from agentrl.episode import Call, Episode, Turn
    from agentrl.spec import RunSpec
    from agentrl.worker import WorkerState

    class Scripted:
        versions, model_seconds = {"global_steps": 1}, 0.0

        async def start(self, messages, tools):
            pass

        def room(self):
            return 100

        async def generate(self, params, room):
            return Turn('<tool_call>{"name": "tool"}</tool_call>',
                        [Call("tool", json.dumps({"fail": 9, "retry_after": "60"}))])

        async def extend(self, previous, messages, tools):
            return True

        async def finish(self, prompt):
            return 4

    spec = RunSpec(run_dir=str(tmp_path), rewards=[{"name": "math"}],
                   tools=[{"name": "tool", "url": f"{traffic}/tool", "deadline": 2, "parameters": {"type": "object"}}])
    row = {"id": "q", "source": "d.jsonl:1", "split": "train", "metadata": {"expected_answer": "1"},
           "messages": [{"role": "user", "content": "?"}]}

    async def go():
        state = WorkerState(spec)
        try:
            return await Episode(state, Scripted()).run(row, {"temperature": 1.0}, trainer_step=1)
        finally:
            await state.aclose()

    record = run(go()).to_dict()
    assert record["reward"] is None and record["stop_reason"] == "tool_infra_error"
    assert "deadline" in record["unscorable"] and "Retry-After: 60" in record["unscorable"]


@pytest.mark.parametrize("status", [429, 503])
def test_an_mcp_server_over_http_that_pushes_back_is_waited_for(status):
    proc, base = _serve("pushback_mcp.py", "--fail", "2", "--status", str(status), "--retry-after", "1")
    try:
        hub = ToolHub.from_config({"probe": {"url": f"{base}/mcp", "retries": 0, "timeout": 10}})
        result = run(_call_mcp(hub))
        assert not result.is_error and result.content.strip() == "5"
        times = httpx.get(f"{base}/calls").json()
        assert len(times) == 3 and all(b - a >= 1.0 for a, b in zip(times, times[1:])), times
    finally:
        stop(proc)


async def _call_mcp(hub: ToolHub):
    try:
        async with hub.rollout("r-mcp") as session:
            return await session.call({"id": "c0", "name": "add", "arguments": {"a": 2, "b": 3}})
    finally:
        await hub.aclose()


def test_an_mcp_server_whose_retry_after_passes_the_deadline_fails_as_infrastructure():
    proc, base = _serve("pushback_mcp.py", "--fail", "1", "--status", "503", "--retry-after", "120")
    try:
        hub = ToolHub.from_config({"probe": {"url": f"{base}/mcp", "timeout": 10, "deadline": 5}})
        with pytest.raises(ToolInfraError) as err:
            run(_call_mcp(hub))
        assert err.value.kind == "deadline" and "Retry-After: 120" in str(err.value)
    finally:
        stop(proc)

