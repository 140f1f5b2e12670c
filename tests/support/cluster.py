"""What the tests of real crawltop processes on a shared crawl have in common: start and
run the CLI, wait for a condition, and read who recorded what from Redis; and for the
tests of engines in one process: a site of linked pages (`tree`), n engines on one crawl."""
from __future__ import annotations

import os
import subprocess
import sys

import redis
import redis.asyncio as aioredis

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.keys import Keys, partition_of
from crawltop.core.cluster.member import Member
from crawltop.core.cluster.totals import read_parts, read_parts_sync, totals_sync
from support.sites import page, redirect, slow

CLI = [sys.executable, "-m", "crawltop.cli"]


def start(*args: str, env: dict | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def records_of(r: redis.Redis, name: str) -> int:
    """The crawl's records count, summed over its partitions (one, or meta's `parts`)."""
    return totals_sync(r, name)["records"]


def stream_entries(r: redis.Redis, name: str) -> list[dict[bytes, bytes]]:
    """Every entry's fields in the crawl's record streams: each partition's, in its order."""
    return [fields for k in read_parts_sync(r, name) for _id, fields in r.xrange(k.rec)]


async def stream_entries_async(r: aioredis.Redis, name: str) -> list[dict[bytes, bytes]]:
    """stream_entries for an asyncio client."""
    return [fields for k in await read_parts(r, name) for _id, fields in await r.xrange(k.rec)]


def host_part(parts: list[Keys], host_key: str) -> Keys:
    """The keys of the partition holding a host's queue and state (hq:, h:), among `parts`
    (read_parts): with one partition, the crawl's own keys."""
    return parts[partition_of(host_key, len(parts))]


async def host_keys(r: aioredis.Redis, name: str, host_key: str) -> Keys:
    """host_part of crawl NAME, its partitions read from its meta."""
    return host_part(await read_parts(r, name), host_key)


def recorded_by(r: redis.Redis, name: str) -> dict[str, int]:
    """proc -> records it wrote, from the streams (each entry says who wrote it)."""
    out: dict[str, int] = {}
    for fields in stream_entries(r, name):
        proc = fields[b"proc"].decode()
        out[proc] = out.get(proc, 0) + 1
    return out


def tree(n: int = 40) -> dict:
    """A site of n pages, each linking to the next two and back to the root; one redirect
    to a page already linked (a merge), one loop of redirects."""
    routes = {"/": page("/p1", "/p2", "/r/merge", "/loop/a")}
    for i in range(1, n + 1):
        routes[f"/p{i}"] = page(*(f"/p{j}" for j in (2 * i, 2 * i + 1) if j <= n), "/")
    routes["/r/merge"] = redirect("/p1")  # seen on the root page, before the redirect
    routes["/loop/a"] = redirect("/loop/b")
    routes["/loop/b"] = redirect("/loop/a")
    return routes


async def engines(url: str, name: str, config: CrawlConfig, n: int, *,
                  partitions: int | None = None) -> list[Member]:
    """Crawl NAME created in Redis and n engines on it (in this loop; not started), as
    `crawl`/`join` make them: its partitions (`partitions`, else the default: one on one
    server, several on a Redis Cluster) as its meta says (a Member beats either way)."""
    r = cluster.client(url)
    await cluster.start(r, url, name, config, partitions=partitions)
    await r.aclose()
    parts = cluster.partitions_in(url, name)
    members = []
    for _ in range(n):
        f = cluster.frontier(url, name, config, parts=parts)
        crawler = Crawler(config, frontier=f, sinks=[f.sink])
        members.append(Member(crawler, f))
    return members


def slow_tree(n: int, delay: float) -> dict:
    """tree(n), each response `delay` seconds late."""
    return {p: slow(delay, handler) for p, handler in tree(n).items()}


def sync_redis(url: str) -> redis.Redis:
    """A blocking client for the tests' own reads, of the kind crawltop uses for `url`: a
    Redis Cluster's (which follows each key to its node) for a cluster node."""
    return cluster.sync_client(url)


def unique(name: str) -> str:
    """A crawl name of its own: the clusters live for a whole session, shared by its tests."""
    return f"{name}-{os.urandom(3).hex()}"
