"""The real engine run to the end, its records kept in memory for assertions."""
from __future__ import annotations

import asyncio

from crawltop.core import CrawlConfig, Crawler, Record


class ListSink:
    """Keeps records in memory, in order, for assertions."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.closed = False

    def write(self, record: Record) -> None:
        self.records.append(record)

    def close(self) -> None:
        self.closed = True

    def by_url(self) -> dict[str, Record]:
        return {r.url: r for r in self.records}


async def crawl(roots: list[str] | str, **options: object) -> tuple[Crawler, ListSink]:
    """Crawl to the end with the real engine; fast backoff unless a test says otherwise."""
    options.setdefault("backoff", 0.01)
    options.setdefault("timeout", 5.0)
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=tuple([roots] if isinstance(roots, str) else roots), **options),  # type: ignore[arg-type]
                      sinks=[sink])
    await asyncio.wait_for(crawler.crawl(), 60)
    return crawler, sink
