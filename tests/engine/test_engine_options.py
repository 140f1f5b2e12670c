"""Depth, page and politeness limits, and the User-Agent, against a real server."""
from __future__ import annotations

import time

from aiohttp import web
from support.crawl import crawl
from support.sites import page, slow_site


def chain(n: int) -> dict:
    return {"/": page("/d1")} | {f"/d{i}": page(f"/d{i + 1}") for i in range(1, n)}


async def test_max_depth(serve) -> None:
    site = await serve(chain(6))
    _, sink = await crawl(site.url + "/", robots=False, max_depth=2)
    assert sorted(r.depth for r in sink.records) == [0, 1, 2]
    assert sink.by_url()[site.url + "/d2"].num_urls == 1 and sink.by_url()[site.url + "/d2"].num_new_urls == 0


async def test_max_pages(serve) -> None:
    site = await serve({"/": page(*[f"/p{i}" for i in range(50)])} | {f"/p{i}": page() for i in range(50)})
    crawler, sink = await crawl(site.url + "/", robots=False, max_pages=10)
    assert len(sink.records) == 10 == crawler.frontier.seen_count


async def test_per_host_cap_and_delay(serve) -> None:
    site = await serve(slow_site(12, 0.05))
    await crawl(site.url + "/", robots=False, concurrency=8, per_host=2)
    assert site.max_in_flight == 2
    started = time.monotonic()
    await crawl(site.url + "/", robots=False, concurrency=8, delay=0.05)
    assert time.monotonic() - started >= 12 * 0.05


async def test_user_agent_default_and_override(serve) -> None:
    seen: list[str] = []

    async def ua(request: web.Request) -> web.Response:
        seen.append(request.headers["User-Agent"])
        return web.Response(text="x", content_type="text/html")

    site = await serve({"/": ua})
    await crawl(site.url + "/", robots=False)
    await crawl(site.url + "/", robots=False, user_agent="MyBot/2")
    assert seen[0].startswith("crawltop/") and seen[1] == "MyBot/2"
