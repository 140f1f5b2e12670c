"""A task talking to Redis ends when it is cancelled, whenever the cancel lands.

The `--processes` Ctrl-C hang: an engine cancelled its heartbeat once while the beat's
EVALSHA was being written; redis-py (with a socket timeout) writes through
`asyncio.wait_for`, which on Python 3.11 returns normally when the cancel lands just as
the write completes (CPython #86296). The heartbeat went on beating, the engine waited for
it forever. The engine's and the monitors' clients now have no redis-py socket timeout and
the Link bounds each round trip (core/cluster/link.py). These tests cancel at every event
loop tick of a stream of calls, against a real redis-server. (With `cluster.client(url)`,
which keeps redis-py's socket timeout, the first test loses the cancel at ticks 6-9, 20,
21, 26, 28, 30 and 34 on Python 3.11.7; on 3.12+ wait_for no longer does.)"""
from __future__ import annotations

import asyncio

import pytest

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.link import Link, cancel_and_wait

pytestmark = pytest.mark.timeout(120)

TICKS = 40  # a call is a few ticks: every offset of several calls is tried


async def _beating(link: Link, r) -> None:
    """The heartbeat's shape: round trips through the Link, back to back."""
    while True:
        await link.call(lambda: r.hget("crawltop:{cancel}:meta", "status"))


async def _cancel_at_every_tick(client_of) -> list[int]:
    """The ticks at which a cancel was lost: the task still running 2 s after it."""
    lost = []
    for tick in range(TICKS):
        r = client_of()
        link = Link(r)

        task = asyncio.ensure_future(_beating(link, r))
        for _ in range(tick):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait((task,), timeout=2.0)
        if not task.done():
            lost.append(tick)
        await cancel_and_wait(task)
        assert task.cancelled()
        await r.aclose()
    return lost


async def test_a_cancel_at_any_moment_of_a_redis_call_ends_the_task(redis_url):
    lost = await _cancel_at_every_tick(lambda: cluster.client(redis_url, linked=True))
    assert not lost, f"a cancel at these ticks was lost and the task went on: {lost}"


async def test_the_frontier_client_is_linked(redis_url):
    """The engine's client: redis-py's socket timeout off (the Link bounds each call)."""
    f = cluster.frontier(redis_url, "linked", CrawlConfig(roots=("http://127.0.0.1:9/",)))
    kwargs = f.redis.connection_pool.connection_kwargs
    assert kwargs.get("socket_timeout") is None and kwargs.get("socket_connect_timeout") == 10.0
    assert f.link.timeout == 10.0 and f.keys.prefix == Keys("linked").prefix
    await f.redis.aclose()


async def test_a_redis_that_does_not_answer_is_an_outage_within_the_link_timeout(redis_server, redis_url):
    """No socket timeout in redis-py: the Link's own bound makes a stopped Redis an outage
    (retried by call, raised by once), as redis-py's TimeoutError did."""
    import os
    import signal

    r = cluster.client(redis_url, linked=True)
    link = Link(r, timeout=0.5)
    assert await link.once(r.ping())
    pid = redis_server.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):
            await link.once(r.ping())
        assert loop.time() - started < 3 and link.down
    finally:
        os.kill(pid, signal.SIGCONT)
    assert await link.call(lambda: r.ping()) and not link.down
    await r.aclose()


async def test_cancel_and_wait_ends_a_task_that_loses_a_cancel():
    """Whatever loses one cancel (a library's wait_for on 3.11), the task we stop ends."""
    swallowed = 0

    async def loses_the_first_cancel() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.Event().wait()  # forever, unless cancelled
            except asyncio.CancelledError:
                if swallowed:
                    raise
                swallowed += 1  # as wait_for does when its inner future is done

    task = asyncio.ensure_future(loses_the_first_cancel())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task, again=0.05), 5)
    assert task.cancelled() and swallowed == 1
