"""Two lanes on Redis: a site's own pages (hosts in scope) and checks (hosts out of scope)
are popped by workers of their own, so the site's pages never wait behind link rot, in
every process of a shared crawl. A real redis-server, real aiohttp servers and raw TCP
servers that accept and never answer, on loopback addresses."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from urllib.parse import urlsplit

import pytest
import redis.asyncio as aioredis
from support.cluster import engines
from support.sites import page

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.keys import Keys
from crawltop.core.queueing.hosts import CHECKS, PAGES
from crawltop.core.queueing.item import Item
from crawltop.core.queueing.politeness import Politeness

pytestmark = pytest.mark.timeout(120)


class Silent:
    """A TCP server on ADDRESS that accepts every connection and never says a word."""

    def __init__(self) -> None:
        self.connections = 0
        self.url = ""
        self._held: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self, address: str) -> Silent:
        self._server = await asyncio.start_server(self._accept, address, 0)
        self.url = f"http://{address}:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def _accept(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._held.append(writer)  # open, and silent, until the test ends

    def stop(self) -> None:
        for w in self._held:
            w.close()
        if self._server is not None:
            self._server.close()


async def records(url: str, name: str) -> list[tuple[int, dict]]:
    """(ms, record) for each entry of the crawl's record stream: the ms of its id is when
    Redis accepted it, one clock for every process."""
    r = aioredis.Redis.from_url(url)
    entries = await r.xrange(Keys(name).rec)
    await r.aclose()
    return [(int(i.split(b"-")[0]), json.loads(f[b"data"])) for i, f in entries]


async def crawl(url: str, name: str, config: CrawlConfig) -> list[tuple[int, dict]]:
    members = await engines(url, name, config, 2)
    await asyncio.wait_for(asyncio.gather(*(m.crawl() for m in members)), 90)
    assert all(m.frontier.status == "finished" for m in members)
    return await records(url, name)


async def test_the_sites_pages_are_not_held_up_by_silent_external_hosts(serve, redis_url):
    """A chain of 100 pages, each linking to the next and to URLs on two of 40 outside hosts
    that accept and never answer (--timeout 1); two engines of 4 page workers and 8 check
    workers. Without lanes the page workers would share the 80 checks, each holding a
    worker a second or more: 40 hosts x 2 strikes x 1 s over 8 workers, 10 s at least
    before the chain could end. With them the pages take about a second, and are all
    recorded before the last check is. Real time, one bound: the pages' span under 8 s
    (1.4 s measured on a 2-core machine busy with four other test runs: load would have
    to stretch it 5 times; the lanes' logic itself, exactly: the next test). Each silent host gets at
    most 3 connections (one at a time until it answers, retired after a few failures),
    and each of its URLs one record."""
    silent = [await Silent().start("127.0.0.30") for _ in range(40)]
    n = 100
    routes = {"/": page("/p1")}
    for i in range(1, n):
        routes[f"/p{i}"] = page(f"/p{i + 1}" if i + 1 < n else "/", f"{silent[i % 40].url}/x{i}",
                                f"{silent[(i + 17) % 40].url}/y{i}")
    site = await serve(routes)
    try:
        base = CrawlConfig(roots=(site.url + "/",), concurrency=4, checks=8, timeout=1.0, max_tries=2)

        def span(recs: list[tuple[int, dict]]) -> tuple[int, int]:
            times = [ms for ms, rec in recs if rec["url"].startswith(site.url)]
            assert len(times) == n
            return min(times), max(times)

        started = time.monotonic()
        lanes = await crawl(redis_url, "lanes", dataclasses.replace(base, external=True))
        took = time.monotonic() - started
        page_first, page_last = span(lanes)
        assert page_last - page_first < 8000, page_last - page_first
        checks = [(ms, rec) for ms, rec in lanes if not rec["url"].startswith(site.url)]
        assert len(checks) == len({rec["url"] for _ms, rec in checks}) == 2 * (n - 1)
        assert max(ms for ms, _rec in checks) > page_last  # the checks went on after the pages
        assert all(rec["error"] for _ms, rec in checks)
        assert "host-retired" in {rec["error_kind"] for _ms, rec in checks}, checks[:3]
        connections = [s.connections for s in silent]
        assert all(1 <= c <= 3 for c in connections), connections
        assert took < 40, took
    finally:
        for s in silent:
            s.stop()


async def test_a_lanes_pop_hands_out_only_its_own_hosts_urls(redis_url):
    """pop(PAGES) and pop(CHECKS) on one RedisFrontier: each gets its own lane's URLs only
    and waits rather than take the other's; a host that never answered has one URL out at
    a time until `answered` reaches Redis; `relane` moves a host to the pages lane."""
    config = CrawlConfig(roots=("http://site.test/",), robots=False)
    r = cluster.client(redis_url)
    await cluster.start(r, redis_url, "pop", config)
    await r.aclose()
    f = cluster.frontier(redis_url, "pop", config)
    f.hosts.configure(Politeness(robots=False, one_until_answered=True))  # as a crawl's
    outside = {"a.test", "b.test", "c.test", "moved.test"}
    f.hosts.sort_into_lanes(lambda url: urlsplit(url).hostname in outside)
    try:
        for url in ("http://site.test/", "http://site.test/1", "http://a.test/", "http://b.test/",
                    "http://moved.test/", "http://c.test/1", "http://c.test/2"):
            assert f.add(Item(url, 10, 1, 0, None, "L"))

        async def pop(lane: int, within: float = 5.0) -> str | None:
            try:
                return (await asyncio.wait_for(f.pop(lane), within)).url
            except TimeoutError:
                return None

        checks = {await pop(CHECKS) for _ in range(4)}
        assert checks == {"http://a.test/", "http://b.test/", "http://moved.test/", "http://c.test/1"}
        assert await pop(CHECKS, 0.5) is None  # c.test never answered: its second URL waits
        assert await pop(PAGES) == "http://site.test/"
        assert await pop(PAGES, 0.5) is None  # nor does site.test get two at once before an answer

        c1 = Item("http://c.test/1", 10, 1, 0, None, "L")
        f.hosts.answered(f.hosts.of(c1.url))
        f.requeue(c1)
        f.done(c1)  # with the answer: c.test takes its full share now, both its URLs
        assert {await pop(CHECKS), await pop(CHECKS)} == {"http://c.test/1", "http://c.test/2"}

        f.hosts.sort_into_lanes(lambda url: urlsplit(url).hostname in outside - {"moved.test"})
        moved = Item("http://moved.test/", 10, 1, 0, None, "L")
        f.requeue(moved)
        f.done(moved)
        await f.flush()
        f.hosts.relane(moved.url)  # the scope grew: moved.test is the site's now
        assert await pop(PAGES) == "http://moved.test/"
        assert await pop(CHECKS, 0.5) is None
        rows = aioredis.Redis.from_url(redis_url)
        k = Keys("pop")
        assert await rows.zrange(k.checks, 0, -1) == [] and await rows.hget(k.h("moved.test"), "l") == b"0"
        assert await rows.hget(k.h("c.test"), "an") == b"1" and await rows.hget(k.h("a.test"), "an") is None
        await rows.aclose()
    finally:
        await f.close()
