"""One-shot Redis calls for the command line: open a client, do one thing, close it.

No argparse and no printing here: cli/commands/ and cli/processes.py call these and
say what happened."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import redis

from ..config import CrawlConfig
from ..errors import ReportError, UsageError
from ..sockets.rundir import check_name
from . import connect as cluster
from .keys import Keys, text
from .records import StreamRecords


async def start(url: str, name: str, config: CrawlConfig, *, expect_urls: int | None = None,
                partitions: int | None = None) -> str:
    """Create crawl NAME (or continue it with the same settings); its status."""
    r = cluster.client(url)
    try:
        return (await cluster.start(r, url, name, config, expect_urls=expect_urls, partitions=partitions))[1]
    finally:
        await r.aclose()


async def join(url: str, name: str, *, resume: bool = True, old_ok: bool = False) -> tuple[CrawlConfig, str]:
    """The settings and status of crawl NAME, or a one-line UsageError."""
    r = cluster.client(url)
    try:
        return await cluster.join(r, url, name, resume=resume, old_ok=old_ok)
    finally:
        await r.aclose()


def check_crawl(url: str, name: str | None) -> str:
    """NAME, once Redis is reachable and holds that crawl; else a one-line UsageError."""
    if not name:
        raise UsageError("with --redis, name the crawl: NAME")
    name = check_name(name)
    asyncio.run(join(url, name, resume=False))
    return name


def status(url: str, name: str) -> str:
    """Crawl NAME's status ("?" if it has none); a RedisError if Redis is unreachable."""
    return text(cluster.sync_client(url, socket_timeout=5).hget(Keys(name).meta, "status") or b"?")


def records(url: str, name: str) -> Iterator[dict[str, Any]]:
    """The records of a crawl on Redis (those not yet trimmed by `export --trim`)."""
    try:
        name = check_crawl(url, name)
        yield from StreamRecords(cluster.sync_client(url, socket_timeout=30), name)
    except (UsageError, redis.RedisError) as exc:
        raise ReportError(f"Redis at {url}: {exc}" if isinstance(exc, redis.RedisError) else str(exc)) from None
