"""The TUI driven by Pilot against a real crawl: a site of slow pages, a crawler with its
app, and waiting for the crawl the app started to end."""
from __future__ import annotations

import asyncio

from crawltop.core import CrawlConfig, Crawler
from crawltop.tui.app import CrawlApp
from support.crawl import ListSink
from support.wait import until


def make(url: str, **options: object) -> tuple[Crawler, ListSink, CrawlApp]:
    options.setdefault("robots", False)
    options.setdefault("backoff", 0.01)
    options.setdefault("timeout", 5.0)
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(url,), **options), sinks=[sink])  # type: ignore[arg-type]
    return crawler, sink, CrawlApp(crawler, refresh_hz=10)


async def finished(pilot, app: CrawlApp, timeout: float = 20.0) -> None:
    """Wait for the crawl the app started (once its first screen was painted) to end."""
    await until(pilot, lambda: app.crawl_task is not None)
    await asyncio.wait_for(asyncio.shield(app.crawl_task), timeout)
