"""The run-wide limiter's lease table, without Ray: slots, first come first served, expiry of silent holders,
the token bucket, and limits that disagree."""

from __future__ import annotations

import asyncio

import pytest

from agentrl.tools.leases import LeaseTable, LimitMismatch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_no_more_than_the_cap_is_lent_and_waiters_are_served_in_order():
    async def go():
        table = LeaseTable(lease_s=10)
        order: list[str] = []
        for i in range(2):
            await table.acquire("s", 2, None, "h1", f"l{i}")

        async def wait(lease):
            await table.acquire("s", 2, None, "h2", lease)
            order.append(lease)

        waiting = [asyncio.create_task(wait(f"w{i}")) for i in range(3)]
        await asyncio.sleep(0)
        assert table.pools["s"].in_use == 2 and len(table.pools["s"].waiters) == 3 and order == []
        table.release("l0")
        await asyncio.sleep(0)
        assert order == ["w0"] and table.pools["s"].in_use == 2
        table.release("l1")
        table.release("w0")
        await asyncio.sleep(0)
        assert order == ["w0", "w1", "w2"] and table.pools["s"].peak == 2
        assert not table.release("l0")  # twice: nothing more is given back
        assert table.pools["s"].in_use == 2
        await asyncio.gather(*waiting)

    asyncio.run(go())


def test_a_silent_holder_loses_its_slots_after_the_lease_and_its_queue_places():
    async def go():
        clock = Clock()
        table = LeaseTable(lease_s=15, clock=clock)
        await table.acquire("s", 2, None, "dead", "d0")
        await table.acquire("s", 2, None, "dead", "d1")
        dead_waiter = asyncio.create_task(table.acquire("s", 2, None, "dead", "d2"))
        live_waiter = asyncio.create_task(table.acquire("s", 2, None, "live", "v0"))
        await asyncio.sleep(0)
        clock.now += 14.9
        table.heartbeat("live")
        assert table.expire() == 0 and table.pools["s"].in_use == 2  # within the lease: kept
        clock.now += 0.2
        assert table.expire() == 2
        await asyncio.sleep(0)
        assert dead_waiter.cancelled() and live_waiter.done()  # the dead one's place went, the live one got a slot
        assert set(table.leases) == {"v0"} and table.pools["s"].expired == 2
        assert table.heartbeat("dead") == 2  # if it was only slow, it hears how many it lost

    asyncio.run(go())


def test_a_cancelled_request_leaves_the_queue():
    async def go():
        table = LeaseTable()
        await table.acquire("s", 1, None, "h", "a")
        waiter = asyncio.create_task(table.acquire("s", 1, None, "h", "b"))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.sleep(0)
        assert not table.pools["s"].waiters
        table.release("a")
        assert table.pools["s"].in_use == 0

    asyncio.run(go())


def test_the_token_bucket_allows_one_second_of_burst_then_the_rate():
    async def go():
        clock = Clock()
        table = LeaseTable(clock=clock)
        waits = []
        for i in range(25):
            waits.append(await table.acquire("s", 100, 10.0, "h", f"l{i}"))
        assert waits[:10] == pytest.approx([0.0] * 10, abs=1e-9)  # a burst of one second's calls
        assert waits[10:] == pytest.approx([0.1 * k for k in range(1, 16)])  # then 10 a second

    asyncio.run(go())


def test_processes_that_disagree_on_a_limit_are_told_so():
    async def go():
        table = LeaseTable()
        await table.acquire("search", 4, None, "h1", "a")
        with pytest.raises(LimitMismatch, match="max_concurrency=8.*holds max_concurrency=4"):
            await table.acquire("search", 8, None, "h2", "b")

    asyncio.run(go())
