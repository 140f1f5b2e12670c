"""Large bodies are read and parsed a budget at a time (core/fetching/budget.py): the budget
itself, and real crawls of large pages whose sizes are known, unknown (chunked, gzip) or
come with an error status, which must all be recorded and give every byte back."""
from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable

from aiohttp import web
from support.crawl import ListSink
from support.wait import wait_until

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.fetching.budget import LARGE, BodyBudget

MB = 1 << 20


async def test_bodies_wait_in_arrival_order_until_they_fit() -> None:
    budget = BodyBudget(limit=4 * MB)
    assert await budget.take(3 * MB) == 3 * MB
    order: list[str] = []

    async def take(name: str, n: int) -> int:
        got = await budget.take(n)
        order.append(name)
        return got

    big = asyncio.create_task(take("big", 2 * MB))
    small = asyncio.create_task(take("small", MB // 2))  # would fit, but must not overtake
    await wait_until(lambda: len(budget._waiting) == 2)  # both in line
    assert order == [] and budget.used == 3 * MB
    budget.give(3 * MB)
    assert await big == 2 * MB and await small == MB // 2
    assert order == ["big", "small"] and budget.used == 2 * MB + MB // 2


async def test_a_body_over_the_whole_budget_goes_alone() -> None:
    budget = BodyBudget(limit=2 * MB)
    assert await budget.take(10 * MB) == 2 * MB  # nothing held: it goes, counted as the whole budget
    second = asyncio.create_task(budget.take(MB))
    await wait_until(lambda: len(budget._waiting) == 1)
    assert not second.done()
    budget.give(2 * MB)
    assert await second == MB and budget.used == MB


async def test_a_cancelled_waiter_takes_nothing_and_lets_the_next_one_in() -> None:
    budget = BodyBudget(limit=2 * MB)
    held = await budget.take(2 * MB)
    first = asyncio.create_task(budget.take(2 * MB))
    second = asyncio.create_task(budget.take(MB))
    await wait_until(lambda: len(budget._waiting) == 2)
    first.cancel()
    await wait_until(first.done)
    assert first.cancelled() and not second.done() and len(budget._waiting) == 1
    budget.give(held)
    assert await second == MB and budget.used == MB


class _Watched(BodyBudget):
    """The real budget, remembering the most it ever lent at once."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.most = 0

    async def take(self, n: int) -> int:
        got = await super().take(n)
        self.most = max(self.most, self.used)
        return got


def chunked_handler(body: bytes, size: int) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A handler sending body chunked, size bytes a chunk: no Content-Length."""
    async def chunked(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(0, len(body), size):
            await resp.write(body[i:i + size])
        await resp.write_eof()
        return resp

    return chunked


async def test_a_crawl_of_large_bodies_records_them_all_and_gives_every_byte_back(serve) -> None:
    big = b"<html><body>" + b"x" * (2 * LARGE) + b"</body></html>"
    names = [f"/k{i}.html" for i in range(6)]
    links = "".join(f'<a href="{n}">{n}</a>' for n in [*names, "/chunked.html", "/gzip.html", "/busy.html"])

    async def root(request: web.Request) -> web.Response:
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def known(request: web.Request) -> web.Response:
        return web.Response(body=big, content_type="text/html")

    chunked = chunked_handler(big, 256 * 1024)
    async def gzipped(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(big), content_type="text/html",
                            headers={"Content-Encoding": "gzip"})

    async def busy(request: web.Request) -> web.Response:
        return web.Response(status=503, body=big, content_type="text/html")

    site = await serve({"/": root, **dict.fromkeys(names, known), "/chunked.html": chunked,
                        "/gzip.html": gzipped, "/busy.html": busy})
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), robots=False, backoff=0.01, max_tries=2,
                                  timeout=10.0, concurrency=8), sinks=[sink])
    budget = crawler._bodies = _Watched(limit=3 * LARGE)
    await asyncio.wait_for(crawler.crawl(), 60)
    recs = sink.by_url()
    for name in [*names, "/chunked.html", "/gzip.html"]:
        assert recs[site.url + name].status == 200 and recs[site.url + name].size == len(big), name
    assert recs[site.url + "/busy.html"].status == 503 and recs[site.url + "/busy.html"].tries == 2
    assert budget.used == 0 and not budget._waiting
    assert 0 < budget.most <= 3 * LARGE  # never more than the budget lent at once


async def test_a_large_body_is_read_without_a_second_copy(serve) -> None:
    """Chunks joined at the end held the chunks and the body at once: twice the body. Past
    LARGE they go into one buffer that grows in place and is handed over uncopied."""
    import hashlib
    import tracemalloc

    import aiohttp

    from crawltop.core.fetching.fetch import read_capped

    big = bytes(range(256)) * (8 * MB // 256)

    chunked = chunked_handler(big, 64 * 1024)
    site = await serve({"/big": chunked})
    waited: list[bool] = []

    async def over() -> None:
        waited.append(True)

    async with aiohttp.ClientSession() as session:
        for cap, want in ((len(big) + 1, big), (5 * MB + 7, big[:5 * MB + 7])):
            async with session.get(site.url + "/big") as resp:
                sha1 = hashlib.sha1()
                waited.clear()
                tracemalloc.start()
                body, truncated = await read_capped(resp, cap, sha1, over)
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            assert body == want and truncated == (cap <= len(big)) and waited == [True]
            assert sha1.hexdigest() == hashlib.sha1(want).hexdigest()
            assert peak < 1.4 * len(want), (peak, len(want))  # joined chunks: 2x
