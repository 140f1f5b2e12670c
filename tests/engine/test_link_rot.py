"""Link rot never slows a crawl: the site's pages are taken by page workers only, checks of
other hosts by check workers of their own; a host that never answered gets one connection at a
time and is retired after a few failures. Real servers on loopback, counted at the server."""
from __future__ import annotations

import asyncio
import time

from support.crawl import ListSink
from support.deadhosts import DeadHost
from support.sites import page
from support.wait import wait_until
from support.wholesite import refused_url

from crawltop.core import CrawlConfig, Crawler, Record
from crawltop.core.queueing.frontier import MemoryFrontier
from crawltop.core.queueing.hosts import ANSWERED, CHECKS, PAGES, Hosts
from crawltop.core.queueing.item import Item
from crawltop.core.queueing.politeness import NEVER_ANSWERED_STRIKES, Politeness

PAGES_N = 200


class TimedSink(ListSink):
    """Records with the moment each was written."""

    def __init__(self) -> None:
        super().__init__()
        self.at: dict[str, float] = {}

    def write(self, record: Record) -> None:
        super().write(record)
        self.at[record.url] = time.monotonic()


async def _dead(n: int, silent: bool, first: int) -> list[DeadHost]:
    hosts = [DeadHost(silent) for _ in range(n)]
    for i, h in enumerate(hosts):
        await h.start(f"127.0.0.{first + i}")
    return hosts


def _site_routes(dead: list[str]) -> dict:
    """Page k links to pages 2k+1, 2k+2 and to three dead hosts, a path of its own on each."""
    routes = {}
    for k in range(PAGES_N):
        kids = [f"/p{c}" for c in (2 * k + 1, 2 * k + 2) if c < PAGES_N]
        outs = [f"{dead[(3 * k + j) % len(dead)]}/from{k}" for j in range(3)]
        routes["/" if k == 0 else f"/p{k}"] = page(*kids, *outs)
    return routes


async def _run(root: str, **options: object) -> tuple[Crawler, TimedSink, float]:
    sink = TimedSink()
    crawler = Crawler(CrawlConfig(roots=(root,), backoff=0.01, **options), sinks=[sink])  # type: ignore[arg-type]
    began = time.monotonic()
    await asyncio.wait_for(crawler.crawl(), 60)
    return crawler, sink, began


async def test_the_site_s_pages_never_wait_behind_dead_links(serve) -> None:
    silent = await _dead(10, True, 10)
    closers = await _dead(10, False, 30)
    refused = [refused_url(f"127.0.0.{50 + i}") for i in range(10)]
    try:
        dead = [h.url for h in silent] + [h.url for h in closers] + refused
        site = await serve(_site_routes(dead))
        pages = {site.url + "/"} | {f"{site.url}/p{k}" for k in range(1, PAGES_N)}

        _, alone, began = await _run(site.url + "/", timeout=1.0, concurrency=10)
        bare = max(alone.at[u] for u in pages) - began
        for h in silent + closers:
            assert h.connections == 0  # without checks nothing went there

        crawler, sink, began = await _run(site.url + "/", timeout=1.0, concurrency=10, external=True)
        by_url = sink.by_url()
        assert all(by_url[u].status == 200 for u in pages)
        last_page = max(sink.at[u] for u in pages) - began
        checks = [r for r in sink.records if r.url not in pages]
        assert len(checks) == PAGES_N * 3 and all(r.status is None and r.error_kind for r in checks)
        last_check = max(sink.at[r.url] for r in checks) - began
        # the pages within twice their time alone plus a second; the rot after them
        assert last_page <= 2 * bare + 1.0, (last_page, bare)
        assert last_check >= last_page
        # a host that never answered: one connection at a time, retired after a few
        assert max(h.connections for h in silent) <= NEVER_ANSWERED_STRIKES, [h.connections for h in silent]
        assert max(h.connections for h in closers) <= 12, [h.connections for h in closers]
        # every URL of a retired host still got its Record, once
        assert len(sink.records) == len(by_url)
    finally:
        for h in silent + closers:
            await h.stop()


async def test_a_host_that_closes_at_once_costs_a_few_connections(serve) -> None:
    (closer,) = await _dead(1, False, 70)
    try:
        site = await serve({"/": page(*(f"{closer.url}/x{i}" for i in range(30)))})
        _, sink, _ = await _run(site.url + "/", timeout=1.0, concurrency=10, external=True)
        failed = [r for r in sink.records if r.url.startswith(closer.url)]
        assert len(failed) == 30 and all(r.error_kind for r in failed)
        assert closer.connections <= 12, closer.connections
    finally:
        await closer.stop()


async def test_a_healthy_host_that_drops_one_connection_is_never_retired(serve) -> None:
    dropped: list[bool] = []

    async def flaky(request):
        if not dropped:
            dropped.append(True)
            request.transport.close()  # one connection cut before any answer (what is written after is lost)
        return await page()(request)

    other = await serve({f"/x{i}": (flaky if i == 5 else page()) for i in range(20)}, address="127.0.0.80")
    site = await serve({"/": page(*(f"{other.url}/x{i}" for i in range(20)))})
    _, sink, _ = await _run(site.url + "/", timeout=1.0, concurrency=10, external=True)
    out = {r.url: r for r in sink.records if r.url.startswith(other.url)}
    assert len(out) == 20 and all(r.status == 200 for r in out.values()), {u: r.error for u, r in out.items()}


async def test_check_workers_are_counted_apart(serve) -> None:
    (silent,) = await _dead(1, True, 90)
    try:
        site = await serve({"/": page(f"{silent.url}/a")})
        sink = ListSink()
        crawler = Crawler(CrawlConfig(roots=(site.url + "/",), timeout=2.0, robots=False, external=True,
                                      concurrency=3, checks=7), sinks=[sink])
        task = asyncio.ensure_future(crawler.crawl())
        await wait_until(lambda: crawler.stats.snapshot().checks_busy, 5)
        snap = crawler.stats.snapshot()
        assert snap.checks_busy == 1 and snap.checks == 7
        assert snap.concurrency == 3 and snap.busy == 0 and snap.idle == 3  # page workers only
        assert [w.check for w in snap.workers].count(True) == 1
        crawler.stop()
        await asyncio.wait_for(task, 10)
    finally:
        await silent.stop()


# -- the lanes and the strike rule as arithmetic on a fake clock ---------------------------

def _hosts(**policy: object) -> Hosts:
    h = Hosts()
    h.configure(Politeness(**policy))  # type: ignore[arg-type]
    h.sort_into_lanes(lambda url: "://site/" not in url)
    return h


def test_each_lane_takes_only_its_own_hosts() -> None:
    h = _hosts()
    for url in ("http://site/a", "http://far/x", "http://site/b", "http://far2/y"):
        h.admit(Item(url, 0, 0))
    pages = [h.take(0.0, PAGES) for _ in range(3)]
    assert [p[0].url for p in pages if p] == ["http://site/a", "http://site/b"] and pages[2] is None
    got = {h.take(0.0, CHECKS)[0].url, h.take(0.0, CHECKS)[0].url}  # type: ignore[index]
    assert got == {"http://far/x", "http://far2/y"} and h.take(0.0, CHECKS) is None


def test_a_host_that_joins_the_scope_moves_to_the_pages_lane() -> None:
    h = _hosts()
    h.admit(Item("http://later/x", 0, 0))
    assert h.next_wake(PAGES) is None and h.next_wake(CHECKS) == 0.0
    h.classify = lambda url: False
    h.relane("http://later/x")
    assert h.next_wake(CHECKS) is None
    assert h.take(0.0, PAGES)[0].url == "http://later/x"  # type: ignore[index]


def test_one_request_at_a_time_until_the_host_answers() -> None:
    h = _hosts(one_until_answered=True)
    for i in range(5):
        h.admit(Item(f"http://site/{i}", 0, 0))
    first = h.take(0.0)
    assert first is not None and h.take(0.0) is None  # the second waits for an answer
    host = first[1]
    h.succeeded(host, 0.0, 0.01)
    h.finished(host)
    assert host.flags & ANSWERED
    assert sum(h.take(0.0) is not None for _ in range(4)) == 4  # answered: all at once


def test_a_host_that_never_answered_retires_sooner() -> None:
    h = _hosts(max_failures=5, backoff=0.0)
    never, alive = h.of("http://far/"), h.of("http://site/")
    h.answered(alive)
    n = NEVER_ANSWERED_STRIKES
    assert n < 5 and [h.failed(never, "connect", t, t) for t in range(1, n + 1)] == [False] * (n - 1) + [True]
    assert [h.failed(alive, "connect", t, t) for t in (1.0, 2.0, 3.0, 4.0, 5.0)] == [False] * 4 + [True]


async def test_a_memory_frontier_pops_by_lane() -> None:
    f = MemoryFrontier()
    f.hosts.sort_into_lanes(lambda url: "far" in url)
    f.add(Item("http://far/1", 0, 0))
    waiting = asyncio.ensure_future(f.pop(PAGES))
    await wait_until(lambda: f._lanes[PAGES].getters)  # it waits in its lane
    assert not waiting.done()  # a check URL is never handed to a page worker
    assert (await asyncio.wait_for(f.pop(CHECKS), 1)).url == "http://far/1"
    f.add(Item("http://near/1", 0, 0))
    assert (await asyncio.wait_for(waiting, 1)).url == "http://near/1"


def test_a_crawl_of_many_processes_counts_every_process_s_checks() -> None:
    import dataclasses

    from support.frozen import sample_snapshot

    from crawltop.core.cluster.combine import merge

    one = dataclasses.replace(sample_snapshot(), checks_busy=3, checks=32)
    two = dataclasses.replace(sample_snapshot(), checks_busy=1, checks=32)
    both = merge([one, two], state="RUNNING", queued=0, seen=0, in_flight=0)
    assert (both.checks_busy, both.checks) == (4, 64)
