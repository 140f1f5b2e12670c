"""Live state that means what it says: worker phases, the rate from the first
second, a paused crawl's hosts read paused, the queues header true for one host."""
from __future__ import annotations

import asyncio
import contextlib
import select
import socket

from aiohttp import web
from support.sites import page
from support.wait import wait_until

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.monitor.stats import Stats
from crawltop.tui.panels.status import hosts_parts


def test_rate_now_is_true_from_the_first_second() -> None:
    now = [0.0]
    stats = Stats(clock=lambda: now[0])
    now[0] = 0.5
    for _ in range(64):
        stats.page("h", 200, 10, 1.0)
    snap = stats.snapshot()
    assert 100 <= snap.rate_now <= 140, snap.rate_now  # 64 pages in half a second
    now[0] = 3.5  # 3 s later, 30 pages a second since
    for sec in range(1, 4):
        now[0] = sec + 0.01
        for _ in range(30):
            stats.page("h", 200, 10, 1.0)
    now[0] = 3.5
    snap = stats.snapshot()
    assert 30 <= snap.rate_now <= 45, snap.rate_now


async def test_keep_alive_fetch_waits_for_headers_not_connecting(serve) -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="<p>late</p>", content_type="text/html")

    site = await serve({"/": page("/slow"), "/slow": slow})
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), concurrency=1, robots=False, sitemaps=False,
                                  timeout=10.0))
    task = asyncio.create_task(crawler.crawl())
    try:
        await wait_until(lambda: site.hits.get("/slow", 0) == 1, 10)
        # the request is out (the server has it): the worker waits for the reply, and says so
        await wait_until(lambda: {w.phase for w in crawler.stats.snapshot().workers} == {"headers"}, 10)
    finally:
        release.set()
        await asyncio.wait_for(task, 10)


async def test_a_fetch_whose_connection_is_not_made_yet_shows_connecting() -> None:
    """A listening socket whose accept queue is full drops new SYNs: the crawler's connect
    hangs, and its worker must say `connecting` (core/fetching/steps.py), not `sending`."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    host, port = srv.getsockname()
    fillers = []
    for _ in range(3):  # fill the accept queue without blocking this test
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((host, port))
        fillers.append(s)
    # the first is in the queue (its handshake done: writable), so the others' SYNs are dropped
    await wait_until(lambda: select.select([], fillers[:1], [], 0)[1], 5)
    crawler = Crawler(CrawlConfig(roots=(f"http://{host}:{port}/",), concurrency=1, robots=False, sitemaps=False,
                                  timeout=5.0))
    task = asyncio.create_task(crawler.crawl())
    try:
        await wait_until(lambda: {w.phase for w in crawler.stats.snapshot().workers} == {"connecting"}, 3)
    finally:
        crawler.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)
        for s in (*fillers, srv):
            s.close()


async def test_a_paused_crawl_shows_its_hosts_paused(serve) -> None:
    site = await serve({"/": page(*[f"/p{i}" for i in range(50)])}
                       | {f"/p{i}": page() for i in range(50)})
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), concurrency=1, robots=False, sitemaps=False,
                                  delay=0.2))
    task = asyncio.create_task(crawler.crawl())
    try:
        await wait_until(lambda: crawler.stats.pages >= 3, 10)
        crawler.pause()
        await wait_until(lambda: crawler.stats.snapshot().busy == 0, 10)
        # the host counts are read at most once a second: they say so within one
        await wait_until(lambda: crawler.stats.snapshot().host_counts == {"paused": 1}, 5)
        snap = crawler.stats.snapshot()
        assert [h.state for h in snap.hosts] == ["paused"], snap.hosts
        assert snap.host_counts == {"paused": 1}
        assert [h.state for h in crawler.steering.host_table()] == ["paused"]
        # the queues view's header is true for one host (never "no host states")
        assert "1 paused" in "".join(p if isinstance(p, str) else p[0] for p in hosts_parts(snap, always=True))
        crawler.resume()
        await wait_until(lambda: crawler.stats.snapshot().host_counts.get("paused", 0) == 0, 5)
    finally:
        crawler.stop()
        await asyncio.wait_for(task, 10)
