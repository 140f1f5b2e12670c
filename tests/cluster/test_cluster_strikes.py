"""Hosts that never answered, on Redis: one connection at a time across every process until
a host answers, retired after a few failures in a row (min(--host-max-failures,
NEVER_ANSWERED_STRIKES)), and a host retired outright (a name that does not resolve) for
every process; each URL of a retired host gets one record. Connections are counted at the
servers: raw TCP servers on loopback that stay silent, close at once, or answer HTTP."""
from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from support.cluster import engines, host_keys, stream_entries_async, unique
from support.sites import page
from support.wait import wait_value

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.keys import Keys

pytestmark = pytest.mark.timeout(120)

PAGE = b"<html><body>ok</body></html>"


class Raw:
    """A TCP server on ADDRESS counting the connections it accepts. `silent`: held open,
    never a word; `fin`: closed at once; `http`: a small page (robots.txt: 404), one
    request per connection, except connection number `drop`, closed without a word."""

    def __init__(self, mode: str, address: str, drop: int = 0) -> None:
        self.mode, self.address, self.drop = mode, address, drop
        self.connections = 0
        self.url = ""
        self._held: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> Raw:
        self._server = await asyncio.start_server(self._accept, self.address, 0)
        self.url = f"http://{self.address}:{self._server.sockets[0].getsockname()[1]}"
        return self

    @property
    def netloc(self) -> str:
        return self.url.split("//")[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._held.append(writer)
        if self.mode == "silent":
            return
        if self.mode == "fin" or self.connections == self.drop:
            writer.close()
            return
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        path = head.split(b" ", 2)[1]
        status = b"404 Not Found" if path == b"/robots.txt" else b"200 OK"
        writer.write(b"HTTP/1.1 %s\r\nContent-Type: text/html\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                     % (status, len(PAGE), PAGE))
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    def stop(self) -> None:
        for w in self._held:
            w.close()
        if self._server is not None:
            self._server.close()


async def recorded(url: str, name: str) -> list[dict]:
    r = cluster.client(url)
    entries = await stream_entries_async(r, name)  # every partition's stream
    await r.aclose()
    return [json.loads(f[b"data"]) for f in entries]


@pytest.mark.redis
async def test_connections_to_hosts_that_never_answered_across_two_processes(serve, shared_url):
    """`crawl --processes 2 -c 10 --timeout 1`: a site whose root links to 30 URLs on each of
    three outside hosts. One accepts and stays silent: 3 connections at most. One closes
    each connection at once: 12 at most. One answers, but drops its very first connection:
    never retired, its 30 URLs all fetched. Every URL of every host has one record."""
    silent, fin = await Raw("silent", "127.0.0.2").start(), await Raw("fin", "127.0.0.3").start()
    healthy = await Raw("http", "127.0.0.4", drop=1).start()
    hosts = {"silent": silent, "fin": fin, "healthy": healthy}
    urls = {name: [f"{raw.url}/{name}{i}" for i in range(30)] for name, raw in hosts.items()}
    site = await serve({"/": page("/a", *(u for name in hosts for u in urls[name])), "/a": page("/")})
    redis_url, crawl = shared_url, unique("strikes")
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "crawltop.cli", "crawl", site.url + "/", "--processes", "2", "-c", "10",
            "--timeout", "1", "--redis", redis_url, "--name", crawl, "--headless", "--quiet", "--no-sitemaps",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=dict(os.environ))
        out, err = await asyncio.wait_for(proc.communicate(), 90)
        assert proc.returncode in (0, 1), err.decode()[-2000:]  # 1: broken links were found
        assert silent.connections <= 3 and fin.connections <= 12, (silent.connections, fin.connections)
        recs = await recorded(redis_url, crawl)
        by_url = {}
        for rec in recs:
            assert rec["url"] not in by_url, rec["url"]  # one record each, whole crawl
            by_url[rec["url"]] = rec
        assert set(by_url) == {site.url + "/", site.url + "/a", *(u for name in hosts for u in urls[name])}
        for name in ("silent", "fin"):
            kinds = [by_url[u]["error_kind"] for u in urls[name]]
            assert kinds.count("host-retired") >= 27, (name, kinds)
        assert [by_url[u]["status"] for u in urls["healthy"]] == [200] * 30
        assert healthy.connections >= 31  # 30 pages, robots.txt, the dropped one
        r = cluster.client(redis_url)
        state = {name: await r.hgetall((await host_keys(r, crawl, raw.netloc)).h(raw.netloc))
                 for name, raw in hosts.items()}  # each host's state, in its partition
        await r.aclose()
        assert state["silent"].get(b"r") == state["fin"].get(b"r") == b"1"
        assert b"an" not in state["silent"] and b"an" not in state["fin"]
        assert state["healthy"].get(b"r") is None and state["healthy"][b"an"] == b"1"
        assert {state[name][b"l"] for name in hosts} == {b"1"}  # checks: out of the site's scope
    finally:
        for raw in hosts.values():
            raw.stop()


async def test_a_host_retired_outright_gives_every_url_a_record_in_both_engines(serve, redis_url):
    """Two engines, a host with 30 URLs, --per-host 1, whose pages after the third answer
    only once the test says so. With its first pages in, one engine retires it (as for a
    name that does not resolve); once that is in Redis, no request starts there, from
    either engine (the one in flight as it landed aside), and each of its URLs has exactly
    one record, the queued ones HostRetired, from whichever engine took them."""
    hits: list[str] = []
    go = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        hits.append(request.path)
        if len(hits) > 3:
            await go.wait()
        return web.Response(text="<p>held</p>", content_type="text/html")

    site = await serve({"/": page(*(f"/s{i}" for i in range(29))), **{f"/s{i}": held for i in range(29)}})
    config = CrawlConfig(roots=(site.url + "/",), concurrency=3, per_host=1, robots=False)
    members = await engines(redis_url, "outright", config, 2)
    crawls = asyncio.gather(*(m.crawl() for m in members))
    r = aioredis.Redis.from_url(redis_url)
    k = Keys("outright")
    netloc = site.url.split("//")[1]
    try:
        await wait_value(lambda: r.hget(k.count, "records"), lambda n: int(n or 0) >= 3, interval=0.02)
        hosts = members[0].frontier.hosts
        assert hosts.retire(hosts.of(site.url + "/"), "dns") >= 0
        await wait_value(lambda: r.hget(k.h(netloc), "r"), lambda v: v == b"1", interval=0.01)
        started = len(hits)
        go.set()
        await asyncio.wait_for(crawls, 60)
        assert len(hits) <= started + 1, hits  # at most one in flight as the retirement landed
        recs = await recorded(redis_url, "outright")
        urls = [rec["url"] for rec in recs]
        assert sorted(urls) == sorted([site.url + "/", *(f"{site.url}/s{i}" for i in range(29))])
        kinds = [rec["error_kind"] for rec in recs]
        assert kinds.count("host-retired") == 30 - len(hits) - 1, kinds  # each URL not fetched
        state = await r.hgetall(k.h(netloc))
        assert state[b"r"] == b"1" and state[b"le"] == b"dns"
        assert int(await r.hget(k.count, "retired")) == 1
    finally:
        await r.aclose()
