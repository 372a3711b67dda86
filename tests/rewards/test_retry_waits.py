"""One backoff schedule (agentrl.backoff) behind every retry: exponential, capped, fully jittered; the judge
waits on its event loop and the endpoint grader in its worker thread, each against a real loopback server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentrl import backoff as backoff_module
from agentrl.backoff import backoff
from agentrl.rewards import load_reward, modelgraders
from agentrl.rewards import judge
from judge_server import JudgeServer


@pytest.mark.parametrize("attempt, base, cap, bound", [(1, 0.1, 5.0, 0.1), (3, 1.0, 30.0, 4.0), (9, 0.4, 5.0, 5.0)])
def test_the_schedule_is_exponential_capped_and_jittered(attempt, base, cap, bound):
    waits = [backoff(attempt, base=base, cap=cap) for _ in range(500)]
    assert all(0 <= w <= bound for w in waits)
    assert len(set(waits)) > 450  # jitter: callers turned away together come back apart
    assert max(waits) > 0.8 * bound and min(waits) < 0.2 * bound  # the whole range, not a band around the bound


def test_attempts_count_from_one():
    with pytest.raises(ValueError, match="attempt counts retries from 1, got 0"):
        backoff(0)


def spy(monkeypatch, module, name):
    seen = []

    def record(attempt, base=0.1, cap=5.0):
        wait = backoff_module.backoff(attempt, base=base, cap=cap)
        seen.append((attempt, base, cap, wait))
        return wait

    monkeypatch.setattr(module, name, record)
    return seen


def test_the_judge_waits_the_schedule_on_its_event_loop(monkeypatch):
    """Two 503s, then a score: two waits drawn from the schedule (base = the judge's backoff)."""
    seen = spy(monkeypatch, judge, "backoff_delay")
    with JudgeServer([503, 503, "Score: 6/10"]) as server:
        text = asyncio.run(judge.chat([{"role": "user", "content": "q"}], model="openai/judge",
                                      api_base=server.api_base, retries=3, backoff=0.05))
    assert text == "Score: 6/10" and len(server.requests) == 3
    assert [(a, b, c) for a, b, c, _ in seen] == [(1, 0.05, judge.JUDGE_BACKOFF_CAP), (2, 0.05, judge.JUDGE_BACKOFF_CAP)]
    assert all(0 <= w <= 0.05 * 2 ** (a - 1) for a, _, _, w in seen)


def test_the_judges_wait_leaves_its_event_loop_free(monkeypatch):
    """A long wait (10 s) after a 503: the loop's other coroutines run during it, and cancelling the judge
    ends the wait at once, with no second request (a blocking sleep would hold the loop for the 10 s)."""
    WAIT = 10.0
    drawn = {}

    def long_wait(attempt, base=0.1, cap=5.0):
        drawn["at"] = time.monotonic()
        drawn["event"].set()
        return WAIT

    monkeypatch.setattr(judge, "backoff_delay", long_wait)

    async def main(server):
        drawn["event"] = asyncio.Event()
        asked = asyncio.ensure_future(judge.chat([{"role": "user", "content": "q"}], model="openai/judge",
                                                 api_base=server.api_base, retries=3, backoff=1.0))
        await drawn["event"].wait()
        ran_at = time.monotonic()
        asked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asked
        return ran_at

    with JudgeServer([503, "Score: 6/10"]) as server:
        ran_at = asyncio.run(main(server))
        assert len(server.requests) == 1
    assert ran_at - drawn["at"] < WAIT  # this coroutine ran inside the judge's wait, not after it


class _Grader(BaseHTTPRequestHandler):
    statuses: list = []
    threads: list = []

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        status = type(self).statuses.pop(0) if type(self).statuses else 200
        data = json.dumps({"score": 1.0}).encode()
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_the_endpoint_grader_waits_the_schedule_in_its_worker_thread(monkeypatch):
    seen = spy(monkeypatch, modelgraders, "backoff")
    threads = []
    real_sleep = modelgraders.time.sleep
    monkeypatch.setattr(modelgraders.time, "sleep", lambda s: (threads.append(threading.current_thread()),
                                                               real_sleep(s)))
    handler = type("H", (_Grader,), {"statuses": [503, 502]})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        reward = load_reward({"type": "endpoint", "url": f"http://127.0.0.1:{server.server_address[1]}/grade"})
        assert reward({"final_answer": "x", "rollout_id": "r-1"}, {"messages": [], "metadata": {}}) == 1.0
    finally:
        server.shutdown()
        server.server_close()
    base, cap = modelgraders.ENDPOINT_BACKOFF_BASE, modelgraders.ENDPOINT_BACKOFF_CAP
    assert [(a, b, c) for a, b, c, _ in seen] == [(1, base, cap), (2, base, cap)]
    assert len({w for *_, w in seen}) == 2 and all(0 <= w <= base * 2 ** (a - 1) for a, _, _, w in seen)
    assert threads and all(t is not threading.main_thread() for t in threads)  # the reward's thread, not the caller's
