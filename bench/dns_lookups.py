"""DNS under link rot: aiohttp's ThreadedResolver (the crawl's resolver until now) against
core/fetching/resolver.py, both asking one DNS server on loopback.

    .venv/bin/python bench/dns_lookups.py        # about two minutes: the old way waits out glibc's timeouts

200 lookups spread over 60 names: 20 that do not exist (NXDOMAIN), 20 whose server never
answers, 20 good ones (A 127.0.0.1, where an aiohttp site listens). Two measures:

  lookups   200 resolve() calls at once, straight to the resolver (and to the new one's
            fallback without aiodns: the same cache and sharing over ThreadedResolver)
  requests  200 GETs at once through an aiohttp session, as a crawl makes them (the old
            connector: ThreadedResolver under aiohttp's cache, ttl_dns_cache=300; the new:
            CrawlResolver, use_dns_cache=False), then the same 200 again 1 s later, as a
            crawl's retries would

For each: wall time, when the last good name was answered, and the queries that reached the
server. glibc reads only /etc/resolv.conf and only port 53, so the script re-runs itself in
a namespace of its own (`unshare -rmn`: its own loopback and its own /etc/resolv.conf, bind
mounted, "nameserver 127.0.0.1") where the server can take port 53; nothing outside changes.
Both resolvers keep their defaults there: glibc 5 s x 2 attempts, the default thread pool
(min(32, cores + 4) threads); the new one min(5 s, --timeout) per lookup.
"""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import aiohttp  # noqa: E402
from aiohttp.abc import AbstractResolver  # noqa: E402
from aiohttp.resolver import ThreadedResolver  # noqa: E402
from support.dnsserver import NXDOMAIN, SILENT, DNSServer  # noqa: E402
from support.sites import Site, page  # noqa: E402

from crawltop.core.fetching import resolver as dns  # noqa: E402

INSIDE = "CRAWLTOP_DNS_BENCH_INSIDE"
KINDS = {"nx": NXDOMAIN, "quiet": SILENT, "good": "127.0.0.1"}
NAMES = [f"{kind}{i}.test" for i in range(20) for kind in KINDS]  # interleaved: nx0, quiet0, good0, nx1 ...
TIMEOUT = aiohttp.ClientTimeout(total=90, sock_connect=30, sock_read=30)  # the crawl's, --timeout 30


def kind_of(name: str) -> str:
    return name.split(".")[0].rstrip("0123456789")


async def timed(calls: list[tuple[str, Callable[[], Awaitable[object]]]]) -> dict[str, float]:
    """Run the calls at once: the wall time, and per kind of name when its last call ended."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    last: dict[str, float] = {}

    async def one(name: str, call: Callable[[], Awaitable[object]]) -> None:
        try:
            await call()
        except (OSError, aiohttp.ClientError):
            pass
        k = kind_of(name)
        last[k] = max(last.get(k, 0.0), loop.time() - started)

    await asyncio.gather(*(one(n, c) for n, c in calls))
    return {"wall": loop.time() - started, **last}


def line(label: str, times: dict[str, float], server: DNSServer, before: int) -> str:
    queries = sum(server.queries.values()) - before
    return (f"  {label:<34} wall {times['wall']:6.2f} s   last good {times.get('good', 0):6.2f} s   "
            f"last nx {times.get('nx', 0):6.2f} s   queries {queries:4d}")


async def bench() -> None:
    site = Site({"/": page()})
    port = int((await site.start()).rsplit(":", 1)[1])
    server = DNSServer({n: KINDS[kind_of(n)] for n in NAMES})
    await server.start("127.0.0.1", 53)
    names = [NAMES[i % len(NAMES)] for i in range(200)]
    print(f"200 lookups over {len(NAMES)} names (20 NXDOMAIN, 20 silent, 20 good); {os.cpu_count()} cores; "
          "queries: A and AAAA datagrams that reached the server")

    print("lookups, straight to the resolver:")
    for label, make in (("old: ThreadedResolver", ThreadedResolver),
                        ("new: CrawlResolver on c-ares", lambda: dns.build()),
                        ("fallback: CrawlResolver on threads", lambda: dns.CrawlResolver(
                            ThreadedResolver(), in_flight=dns.IN_FLIGHT_THREADS))):
        resolver: AbstractResolver = make()
        before = sum(server.queries.values())
        times = await timed([(n, partial(resolver.resolve, n, port, socket.AF_UNSPEC)) for n in names])
        print(line(label, times, server, before))
        await resolver.close()

    print("requests through an aiohttp session (then the same 200 again after 1 s: a crawl's retries):")
    for label, connector in (
            ("old: connector cache + threads", lambda: aiohttp.TCPConnector(limit=0, ttl_dns_cache=300,
                                                                            resolver=ThreadedResolver())),
            ("new: CrawlResolver", lambda: aiohttp.TCPConnector(limit=0, use_dns_cache=False, resolver=dns.build()))):
        conn = connector()
        async with aiohttp.ClientSession(connector=conn, timeout=TIMEOUT) as session:
            async def get(url: str) -> None:
                async with session.get(url) as resp:
                    await resp.read()

            for round_ in ("first", "again"):
                before = sum(server.queries.values())
                times = await timed([(n, partial(get, f"http://{n}:{port}/")) for n in names])
                print(line(f"{label}, {round_}", times, server, before))
                await asyncio.sleep(1.0)
        resolver = conn._resolver  # the new one is not the connector's to close
        if isinstance(resolver, dns.CrawlResolver):
            print(f"    {resolver.counts()}")
            await resolver.close()
    server.close()
    await site.stop()


def inside() -> None:
    """In the namespace: loopback up, resolv.conf pointing at it, then the bench."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False, capture_output=True)
    with tempfile.NamedTemporaryFile("w", suffix=".resolv.conf", delete=False) as f:
        f.write("nameserver 127.0.0.1\n")
    subprocess.run(["mount", "--bind", f.name, "/etc/resolv.conf"], check=True)
    try:
        asyncio.run(bench())
    finally:
        os.unlink(f.name)


def main() -> int:
    if os.environ.get(INSIDE):
        inside()
        return 0
    started = time.monotonic()
    rc = subprocess.run(["unshare", "-rmn", sys.executable, __file__, *sys.argv[1:]],
                        env={**os.environ, INSIDE: "1"}).returncode
    print(f"({time.monotonic() - started:.0f} s in all)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
