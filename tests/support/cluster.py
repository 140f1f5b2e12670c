"""What the tests of real crawltop processes on a shared crawl have in common: start and
run the CLI, wait for a condition, and read who recorded what from Redis; and for the
tests of engines in one process: a site of linked pages (`tree`), n engines on one crawl."""
from __future__ import annotations

import os
import subprocess
import sys

import redis

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.member import Member
from support.sites import page, redirect, slow

CLI = [sys.executable, "-m", "crawltop.cli"]


def start(*args: str, env: dict | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def records_of(r: redis.Redis, name: str) -> int:
    return int(r.hget(Keys(name).count, "records") or 0)


def recorded_by(r: redis.Redis, name: str) -> dict[str, int]:
    """proc -> records it wrote, from the stream (each entry says who wrote it)."""
    out: dict[str, int] = {}
    for _id, fields in r.xrange(Keys(name).rec):
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


async def engines(url: str, name: str, config: CrawlConfig, n: int) -> list[Member]:
    """Crawl NAME created in Redis and n engines on it (in this loop; not started)."""
    r = cluster.client(url)
    await cluster.start(r, url, name, config)
    await r.aclose()
    members = []
    for _ in range(n):
        f = cluster.frontier(url, name, config)
        members.append(Member(Crawler(config, frontier=f, sinks=[f.sink]), f))
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
