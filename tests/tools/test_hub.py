"""ToolHub against real MCP servers: the calculator (stdio and HTTP), the probe server, a 503 server."""

import asyncio
import json
import os
import signal
import time

import pytest

from agentrl.tools import ToolCall, ToolHub, ToolInfraError

from .conftest import run


def names(schemas):
    return sorted(s["function"]["name"] for s in schemas)


def test_calculator_stdio_schemas_parallel_calls_and_tool_errors(calc_stdio):
    async def main():
        async with ToolHub.from_config({"calc": calc_stdio}) as hub:
            async with hub.rollout("r-1") as s:
                schemas = await s.tool_schemas()
                assert {"add", "subtract", "multiply", "divide"} <= set(names(schemas))
                add = next(x for x in schemas if x["function"]["name"] == "add")
                assert add["type"] == "function" and add["function"]["parameters"]["required"] == ["a", "b"]
                assert "Add" in add["function"]["description"]
                calls = [ToolCall(f"c{i}", "add", {"a": i, "b": 1}) for i in range(20)] + [
                    ToolCall("d0", "divide", {"a": 1, "b": 0}),          # isError result
                    ToolCall("u0", "sqaure", {"x": 2}),                   # unknown tool
                    ToolCall("m0", "multiply", '{"a": 2, "b": '),          # malformed JSON arguments
                    ToolCall("m1", "multiply", [2, 3]),                    # arguments not an object
                    ToolCall("m2", "multiply", {"a": "two", "b": 3}),      # bad argument type
                    ToolCall("j0", "multiply", '{"a": 6, "b": 7}'),        # JSON string arguments are fine
                    ToolCall("q0", "calc.subtract", {"a": 5, "b": 7}),     # server.tool always resolves
                    {"id": "o0", "function": {"name": "add", "arguments": '{"a": 1, "b": 1}'}},  # OpenAI shape
                ]
                results = await s.call_many(calls)
            assert [r.id for r in results] == [c.id if isinstance(c, ToolCall) else c["id"] for c in calls]
            assert [r.content for r in results[:20]] == [str(i + 1) for i in range(20)]
            assert not any(r.is_error for r in results[:20])
            by_id = {r.id: r for r in results}
            assert by_id["d0"].is_error and "division by zero" in by_id["d0"].content
            assert by_id["u0"].is_error and "unknown tool 'sqaure'" in by_id["u0"].content and "add" in by_id["u0"].content
            assert by_id["m0"].is_error and "not valid JSON" in by_id["m0"].content
            assert by_id["m1"].is_error and "JSON object" in by_id["m1"].content
            assert by_id["m2"].is_error and "a" in by_id["m2"].content
            assert (by_id["j0"].content, by_id["j0"].is_error) == ("42", False)
            assert (by_id["q0"].content, by_id["q0"].is_error) == ("-2", False)
            assert (by_id["o0"].content, by_id["o0"].is_error) == ("2", False)
            m = hub.metrics()["calc"]
            assert m["calls"] == 25 and m["ok"] == 23 and m["errors"] == {"tool_error": 2}
            assert m["latency_p50_ms"] is not None and m["circuit"] == "closed"
    run(main())


def test_calculator_over_http_and_rollout_id_header_and_meta(calc_http, probe_http):
    async def main():
        async with ToolHub.from_config({"calc": {"url": calc_http}, "probe": {"url": probe_http}}) as hub:
            async with hub.rollout("r-http-7") as s:
                got = names(await s.tool_schemas())
                assert "calc.add" in got and "probe.add" in got and "add" not in got  # clash: prefixed
                assert "multiply" in got and "echo_context" in got  # no clash: plain
                r = await s.call_many([ToolCall("a", "calc.add", {"a": 2, "b": 3}), ToolCall("b", "probe.add", {"a": 1, "b": 1}),
                                       ToolCall("c", "echo_context", {})])
                assert [x.content for x in r[:2]] == ["5", "2"]
                seen = json.loads(r[2].content)
                assert seen["rollout_header"] == "r-http-7" and seen["meta"]["agentrl/rollout_id"] == "r-http-7"
            # several rollouts share one HTTP session; each call still carries its own id
            async def one(i):
                async with hub.rollout(f"r-{i}") as s:
                    return json.loads((await s.call(ToolCall("c", "echo_context", {}))).content)
            seen = await asyncio.gather(*(one(i) for i in range(8)))
            assert [x["rollout_header"] for x in seen] == [f"r-{i}" for i in range(8)]
            assert [x["meta"]["agentrl/rollout_id"] for x in seen] == [f"r-{i}" for i in range(8)]
    run(main())


def test_rollout_id_in_meta_over_stdio_and_allowed_tools(probe_stdio):
    async def main():
        async with ToolHub.from_config({"probe": probe_stdio}) as hub:
            async with hub.rollout("r-stdio", allowed_tools=["echo_context", "probe.add"]) as s:
                assert names(await s.tool_schemas()) == ["add", "echo_context"]
                seen = json.loads((await s.call(ToolCall("c", "echo_context", {}))).content)
                assert seen["meta"]["agentrl/rollout_id"] == "r-stdio" and seen["rollout_header"] is None
                denied = await s.call(ToolCall("d", "big", {"n": 3}))
                assert denied.is_error and "unknown tool 'big'" in denied.content
    run(main())


def test_huge_output_is_truncated_with_marker(probe_http):
    async def main():
        async with ToolHub.from_config({"probe": {"url": probe_http}}, max_result_chars=1000) as hub:
            async with hub.rollout("r") as s:
                r = await s.call(ToolCall("c", "big", {"n": 200_000}))
        assert not r.is_error and r.content == "x" * 1000 + "\n[... truncated 199000 chars]"
    run(main())


def _wait_file(path, timeout=30.0):
    end = time.monotonic() + timeout
    while not os.path.exists(path) or not open(path).read():
        assert time.monotonic() < end, "the server never started the call"
        time.sleep(0.02)
    return int(open(path).read())


def test_server_killed_mid_call_is_restarted_and_call_retried(probe_stdio, tmp_path):
    async def main():
        async with ToolHub.from_config({"probe": {**probe_stdio, "retries": 2}}) as hub:
            async with hub.rollout("r") as s:
                first = int((await s.call(ToolCall("p", "pid", {}))).content)
                marker = tmp_path / "started"
                call = asyncio.create_task(s.call(ToolCall("s", "slow", {"marker": str(marker), "seconds": 0.5})))
                pid = await asyncio.to_thread(_wait_file, marker)
                assert pid == first
                os.kill(pid, signal.SIGKILL)  # the server dies while the call is in flight
                r = await call
                assert (r.content, r.is_error) == ("slept", False)  # retried on a fresh server
                second = int((await s.call(ToolCall("p", "pid", {}))).content)
                assert second != first
            m = hub.metrics()["probe"]
            assert m["restarts"] >= 1 and m["retries"] >= 1 and m["errors"].get("connection_closed", 0) >= 1
    run(main())


def test_hanging_server_times_out_then_circuit_opens(probe_http):
    async def main():
        spec = {"url": probe_http, "timeout": 0.5, "circuit_failures": 2, "circuit_reset": 600}
        async with ToolHub.from_config({"probe": spec}) as hub:
            async with hub.rollout("r") as s:
                await s.tool_schemas()
                kinds = []
                for _ in range(3):
                    with pytest.raises(ToolInfraError) as e:
                        await s.call(ToolCall("h", "hang", {}))
                    kinds.append(e.value.kind)
                    assert e.value.server == "probe"
                assert kinds == ["timeout", "timeout", "circuit_open"]
                # a dead server fails fast for every tool until the reset time
                with pytest.raises(ToolInfraError, match="circuit open"):
                    await s.call(ToolCall("a", "add", {"a": 1, "b": 1}))
            m = hub.metrics()["probe"]
            assert m["errors"]["timeout"] == 2 and m["errors"]["circuit_open"] == 2 and m["circuit"] == "open"
    run(main())


def test_5xx_is_retried_then_raises_infra_error(always_503):
    handler, url = always_503

    async def main():
        async with ToolHub.from_config({"down": {"url": url, "retries": 2, "circuit_failures": 10}}) as hub:
            async with hub.rollout("r") as s:
                with pytest.raises(ToolInfraError) as e:
                    await s.call_many([ToolCall("c", "anything", {})])
            assert e.value.server == "down" and e.value.kind == "http_5xx" and "503" in str(e.value)
            assert hub.metrics()["down"]["retries"] == 2
    run(main())
    assert handler.hits >= 3  # one try and two retries reached the server


def test_stateful_server_gets_a_session_per_rollout_torn_down_on_cancel(probe_stdio):
    async def main():
        async with ToolHub.from_config({"probe": {**probe_stdio, "stateful": True}}) as hub:
            started = asyncio.Event()
            pids = {}

            async def rollout(rid):
                async with hub.rollout(rid) as s:
                    pids[rid] = int((await s.call(ToolCall("p", "pid", {}))).content)
                    counts = [int((await s.call(ToolCall("c", "count", {}))).content) for _ in range(2)]
                    assert counts == [1, 2]  # state is this rollout's own
                    started.set()
                    await asyncio.sleep(3600)

            tasks = [asyncio.create_task(rollout(f"r{i}")) for i in range(2)]
            while len(pids) < 2:
                await asyncio.sleep(0.05)
            await started.wait()
            assert pids["r0"] != pids["r1"]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for pid in pids.values():  # every per-rollout server process is gone
                with pytest.raises(ProcessLookupError):
                    os.kill(pid, 0)
    run(main())


def test_exception_in_rollout_still_tears_down(probe_stdio):
    async def main():
        async with ToolHub.from_config({"probe": {**probe_stdio, "stateful": True}}) as hub:
            with pytest.raises(ZeroDivisionError):
                async with hub.rollout("r") as s:
                    pid = int((await s.call(ToolCall("p", "pid", {}))).content)
                    1 / 0
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
            with pytest.raises(RuntimeError, match="has ended"):
                await s.call(ToolCall("p", "pid", {}))
    run(main())


def test_hub_belongs_to_one_event_loop(calc_stdio):
    hub = ToolHub.from_config({"calc": calc_stdio})

    async def schemas():
        async with hub.rollout("r") as s:
            return await s.tool_schemas()

    assert run(schemas())
    with pytest.raises(RuntimeError, match="one ToolHub per event loop"):
        run(schemas())


def test_unreachable_http_server_is_an_infra_error():
    from .conftest import free_port

    async def main():
        url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens here
        async with ToolHub.from_config({"gone": {"url": url, "retries": 1}}) as hub:
            async with hub.rollout("r") as s:
                with pytest.raises(ToolInfraError) as e:
                    await s.tool_schemas()
            assert e.value.server == "gone" and e.value.kind in {"transport", "connect"}
            assert hub.metrics()["gone"]["retries"] == 1
    run(main())


def test_503_and_429_are_retried_and_the_call_then_succeeds(flaky_calc):
    proxy, url = flaky_calc

    async def main():
        async with ToolHub.from_config({"calc": {"url": url, "retries": 3}}) as hub:
            async with hub.rollout("r") as s:
                assert "add" in names(await s.tool_schemas())
                proxy.fail[:] = [503, 429]
                r = await s.call(ToolCall("c", "add", {"a": 20, "b": 22}))
                assert (r.content, r.is_error) == ("42", False)
                proxy.fail[:] = [400]  # other 4xx: the model sees it, nothing is retried
                r = await s.call(ToolCall("c", "add", {"a": 1, "b": 1}))
                assert r.is_error and "error" in r.content.lower()
            m = hub.metrics()["calc"]
            assert m["retries"] == 2 and m["errors"]["http_5xx"] == 1 and m["errors"]["rate_limited"] == 1
            assert proxy.failed == 3 and m["circuit"] == "closed"
    run(main())


def test_http_server_restart_is_survived(tmp_path):
    from .conftest import PROBE, _wait_for_port, free_port, stop

    import subprocess
    import sys

    port = free_port()

    def start():
        proc = subprocess.Popen([sys.executable, PROBE, "--http", "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_port(port, proc)
        return proc

    proc = start()
    try:
        async def main():
            async with ToolHub.from_config({"probe": {"url": f"http://127.0.0.1:{port}/mcp", "retries": 3}}) as hub:
                async with hub.rollout("r") as s:
                    first = int((await s.call(ToolCall("p", "pid", {}))).content)
                    nonlocal proc
                    proc.kill()  # a crash, not a clean shutdown
                    await asyncio.to_thread(proc.wait)
                    proc = await asyncio.to_thread(start)  # same port, new process
                    r = await s.call(ToolCall("p", "pid", {}))
                    assert not r.is_error and int(r.content) != first
                assert hub.metrics()["probe"]["circuit"] == "closed"
        run(main())
    finally:
        stop(proc)


def test_concurrency_cap_per_server(probe_http):
    async def main():
        async with ToolHub.from_config({"probe": {"url": probe_http, "max_concurrency": 2}}) as hub:
            async def rollout(i):
                async with hub.rollout(f"r{i}") as s:
                    return await s.call_many([ToolCall(f"c{j}", "overlap", {"tag": "capped", "seconds": 0.2}) for j in range(3)])
            results = [r for batch in await asyncio.gather(*(rollout(i) for i in range(3))) for r in batch]
        assert len(results) == 9 and not any(r.is_error for r in results)
        assert max(int(r.content) for r in results) <= 2  # never more than the cap in flight at the server
    run(main())


def test_stateful_http_server_gets_its_own_session_per_rollout(probe_http):
    async def main():
        async with ToolHub.from_config({"probe": {"url": probe_http, "stateful": True}}) as hub:
            async def rollout(rid):
                async with hub.rollout(rid) as s:
                    seen = json.loads((await s.call(ToolCall("c", "echo_context", {}))).content)
                    return seen, len(s._connections)
            out = await asyncio.gather(*(rollout(f"rs-{i}") for i in range(4)))
            assert [seen["rollout_header"] for seen, _ in out] == [f"rs-{i}" for i in range(4)]
            assert [seen["meta"]["agentrl/rollout_id"] for seen, _ in out] == [f"rs-{i}" for i in range(4)]
            assert all(n == 1 for _, n in out)  # one session of its own while it ran
            assert hub._sessions == set()  # and nothing left open after
    run(main())
