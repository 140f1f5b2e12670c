"""The control surface during a live crawl: pause, concurrency, cancel, stop."""
from __future__ import annotations

import asyncio

from aiohttp import web
from support.crawl import ListSink
from support.sites import held, page, slow_site
from support.wait import wait_until

from crawltop.core import CrawlConfig, Crawler


def start(url: str, **options: object) -> tuple[Crawler, ListSink, asyncio.Task[None]]:
    options.setdefault("robots", False)
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(url,), **options), sinks=[sink])  # type: ignore[arg-type]
    return crawler, sink, asyncio.ensure_future(crawler.crawl())


async def test_pause_stops_new_fetches_and_resume_continues(serve) -> None:
    site = await serve(slow_site(60, 0.05))
    crawler, sink, task = start(site.url + "/", concurrency=4)
    await wait_until(lambda: sum(site.hits.values()) >= 10)
    crawler.pause()
    assert crawler.paused and crawler.stats.state == "PAUSED"
    # the fetches already in flight finish; then every worker waits, and one that is handed a
    # URL gives it back: the workers' phases are the pause's own signal that no fetch can start
    await wait_until(lambda: site.in_flight == 0
                     and all(w.phase in ("waiting", "paused") for w in crawler.stats.snapshot().workers))
    frozen = sum(site.hits.values())
    assert frozen < 61 and crawler.frontier.size == 61 - frozen
    crawler.resume()
    await asyncio.wait_for(task, 20)
    assert len(sink.records) == 61 and sum(site.hits.values()) == 61


async def test_a_pause_while_workers_wait_for_a_due_host_holds_no_url(serve) -> None:
    """Workers already waiting in pop() when the pause comes get their URL when its host
    comes due: it gives it back (the host's turn is spent), so a paused crawl holds nothing (in a cluster another
    process may fetch it) and loses nothing."""
    site = await serve(slow_site(6, 0.0))
    crawler, sink, task = start(site.url + "/", concurrency=4, delay=0.6)
    await wait_until(lambda: crawler.frontier.size == 6)  # the root's links, its host not due yet
    crawler.pause()
    # the host comes due (0.6 s): a waiting worker is handed a URL, gives it back and pauses
    await wait_until(lambda: any(w.phase == "paused" for w in crawler.stats.snapshot().workers))
    assert sum(site.hits.values()) == 1
    workers = [(w.phase, w.url) for w in crawler.stats.snapshot().workers]
    assert ("paused", None) in workers and all(url is None for _, url in workers), workers
    assert crawler.frontier.size == 6
    crawler.resume()
    await asyncio.wait_for(task, 20)
    assert sorted(r.url for r in sink.records) == sorted([site.url + "/"] + [f"{site.url}/p{i}" for i in range(6)])


async def test_set_concurrency_changes_busy_workers(serve) -> None:
    site = await serve(slow_site(200, 0.1))
    crawler, sink, task = start(site.url + "/", concurrency=2)
    await wait_until(lambda: site.in_flight == 2)
    crawler.set_concurrency(8)
    await wait_until(lambda: site.in_flight == 8)
    assert crawler.concurrency == 8 and len(crawler.stats.snapshot().workers) == 8
    crawler.set_concurrency(3)
    # busy workers retire after their current URL
    await wait_until(lambda: len(crawler.stats.snapshot().workers) == 3 and site.in_flight <= 3)
    site.max_in_flight = 0
    await asyncio.wait_for(task, 30)
    assert site.max_in_flight == 3  # for the rest of the crawl, never more
    assert len(sink.records) == 201  # nothing lost while shrinking


async def test_cancel_worker_requeues_its_url(serve) -> None:
    never = held()

    async def stall_once(request: web.Request) -> web.StreamResponse:
        if site.hits["/stuck"] == 1:
            return await never(request)  # until the worker is cancelled
        return web.Response(text="<p>finally</p>", content_type="text/html")

    routes = slow_site(20, 0.02) | {"/": page("/stuck", *[f"/p{i}" for i in range(20)]), "/stuck": stall_once}
    site = await serve(routes)
    crawler, sink, task = start(site.url + "/", concurrency=3)
    stuck = site.url + "/stuck"
    await wait_until(lambda: any(w.url == stuck for w in crawler.stats.snapshot().workers))
    wid = next(w.id for w in crawler.stats.snapshot().workers if w.url == stuck)
    assert crawler.cancel_worker(wid)
    assert crawler.concurrency == 2
    assert not crawler.cancel_worker(9999)
    await asyncio.wait_for(task, 20)
    recs = [r for r in sink.records if r.url == stuck]
    assert len(recs) == 1 and recs[0].status == 200 and recs[0].tries == 2
    assert len(sink.records) == 22 and site.hits["/stuck"] == 2


async def test_stop_flushes_every_record(serve, tmp_path) -> None:
    site = await serve(slow_site(100, 0.1))
    out = tmp_path / "out.jsonl"
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), concurrency=5, robots=False, output=str(out)))
    task = asyncio.ensure_future(crawler.crawl())
    await wait_until(lambda: crawler.stats.records >= 10)
    crawler.stop()
    assert crawler.stats.state == "STOPPING"
    await asyncio.wait_for(task, 10)
    lines = out.read_text().splitlines()
    assert len(lines) == crawler.frontier.seen_count == 101  # every seen URL has its one record
    cancelled = [ln for ln in lines if '"error":"Cancelled' in ln]
    assert len(cancelled) >= 80
    assert crawler.stats.state == "DONE"


async def test_control_before_crawl_starts_is_safe(serve) -> None:
    site = await serve(slow_site(5, 0.0))
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), concurrency=2, robots=False))
    crawler.set_concurrency(5)
    crawler.pause()
    task = asyncio.ensure_future(crawler.crawl())
    await wait_until(lambda: [w.phase for w in crawler.stats.snapshot().workers] == ["paused"] * 5)
    assert site.hits == {}
    crawler.resume()
    await asyncio.wait_for(task, 10)
    assert crawler.stats.records == 6


async def test_a_failing_sink_stops_the_crawl_with_its_error(serve) -> None:
    class FullDisk(ListSink):
        def write(self, record) -> None:
            if len(self.records) == 3:
                raise OSError(28, "No space left on device")
            super().write(record)

    site = await serve(slow_site(30, 0.01))
    sink = FullDisk()
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), robots=False, concurrency=4), sinks=[sink])
    try:
        await asyncio.wait_for(crawler.crawl(), 10)
    except OSError as exc:
        assert "No space left" in str(exc)
    else:
        raise AssertionError("the sink's failure was swallowed")
    assert sink.closed and crawler.stats.state == "DONE"


async def test_jsonl_lines_reach_the_disk_while_the_crawl_is_quiet(serve, tmp_path) -> None:
    release = asyncio.Event()
    site = await serve({"/": page("/a", "/b", "/stall"), "/a": page(), "/b": page(), "/stall": held(release)})
    out = tmp_path / "r.jsonl"
    crawler, _, task = start(site.url + "/", output=str(out), concurrency=2)
    await wait_until(lambda: crawler.stats.records == 3)
    # /stall holds the crawl open and nothing else is written: only the timer can flush
    await wait_until(lambda: out.exists() and len(out.read_text().splitlines()) == 3, timeout=5)
    assert not task.done() and site.in_flight == 1
    release.set()
    await asyncio.wait_for(task, 10)
    assert len(out.read_text().splitlines()) == 4
