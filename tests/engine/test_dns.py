"""A name is resolved once (core/fetching/resolver.py), against a real DNS server on loopback
UDP (tests/support/dnsserver.py) that counts the queries reaching it, through the crawl's
real aiohttp session (core/fetching/session.py) and a real crawl. Names under `.test` point
at 127.0.0.1, where the aiohttp test sites listen; limits are short, so no test waits long.

c-ares asks A and AAAA for each lookup, and gives a lookup two tries (a retransmission,
or a second SERVFAIL): the tests count A queries, and allow two per lookup where a server
fails."""
from __future__ import annotations

import asyncio
import pickle
import socket
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.resolver import ThreadedResolver
from support.crawl import crawl
from support.dnsserver import NXDOMAIN, SERVFAIL, SILENT, DNSServer
from support.sites import page
from support.wait import wait_until, wait_value

from crawltop.cli.options import Parser, add_crawl_options, config_from
from crawltop.core import CrawlConfig, errors
from crawltop.core.fetching import resolver as dns
from crawltop.core.fetching.session import CrawlSession
from crawltop.core.outcomes import reason

pytest.importorskip("aiodns")

NAMES = {"good.test": "127.0.0.1", "good2.test": "127.0.0.1", "nx.test": NXDOMAIN, "sf.test": SERVFAIL,
         "quiet.test": SILENT, "www.site.test": "127.0.0.1"}
C_ARES_TRIES = 2  # core/fetching/resolver.py build(): tries=2


@pytest.fixture
async def server() -> AsyncIterator[DNSServer]:
    srv = DNSServer(NAMES)
    await srv.start()
    yield srv
    srv.close()


async def open_session(srv: DNSServer, **options: object) -> CrawlSession:
    """The crawl's own session, as core/crawler.py opens it, pointed at `srv`."""
    config = CrawlConfig(roots=(), dns_servers=(srv.address,), **options)  # type: ignore[arg-type]
    http = CrawlSession(config, "crawltop-test", [])
    http.open(aiohttp.ClientTimeout(total=10))
    return http


async def get(http: CrawlSession, url: str) -> int | BaseException:
    """The status, or the exception the session raised."""
    assert http.session is not None
    try:
        async with http.session.get(url) as resp:
            await resp.read()
            return resp.status
    except aiohttp.ClientError as exc:
        return exc


def a_queries(srv: DNSServer, name: str) -> int:
    return srv.by_type[(name, "A")]


async def test_many_requests_to_a_name_that_does_not_exist_make_one_query(server, serve) -> None:
    site = await serve({"/": page()})
    port = site.url.rsplit(":", 1)[1]
    http = await open_session(server)
    try:
        results = await asyncio.gather(*[get(http, f"http://nx.test:{port}/p{i}") for i in range(50)])
        results += [await get(http, f"http://NX.test.:{port}/later"), await get(http, f"https://nx.test/{port}")]
    finally:
        await http.close()
    assert a_queries(server, "nx.test") == 1 and server.queries["nx.test"] == 2  # one lookup: A and AAAA
    assert http.resolver is not None
    counts = http.resolver.counts()
    assert (counts.lookups, counts.shared, counts.hits, counts.unresolvable) == (1, 49, 2, 1)
    assert http.resolver.not_found("nx.test") == "NXDOMAIN"
    for exc in results:
        assert isinstance(exc, aiohttp.ClientConnectorDNSError), exc
        assert errors.name_not_found(exc) and errors.error_kind(exc) == "dns"
        found = errors.unresolvable(exc)
        assert found is not None and found.host == "nx.test" and found.why == "NXDOMAIN"
        assert "name does not resolve: nx.test (NXDOMAIN)" in errors.describe(exc)
        assert reason("dns", errors.describe(exc)) == "name does not resolve"
    assert site.hits == {}


async def test_a_good_name_is_asked_once_for_many_requests_on_any_port(server, serve) -> None:
    one, two = await serve({"/": page()}), await serve({"/": page()})
    urls = [f"http://good.test:{s.url.rsplit(':', 1)[1]}/?{i}" for i in range(25) for s in (one, two)]
    http = await open_session(server)
    try:
        statuses = await asyncio.gather(*[get(http, u) for u in urls])
        statuses.append(await get(http, urls[0]))
    finally:
        await http.close()
    assert statuses == [200] * 51
    assert a_queries(server, "good.test") == 1  # aiohttp's own cache kept one per (host, port)
    assert http.resolver is not None and http.resolver.counts().lookups == 1
    assert http.resolver.not_found("good.test") is None


async def test_a_silent_name_times_out_in_its_limit_and_delays_no_other_name(server, serve) -> None:
    """Every good name is answered before the silent one gives up (the order, not a time),
    and the silent one gives up at its 2 s limit, not the 5 s default: bounds wide enough for
    a loaded 2-core machine, where this loop (the DNS server's too) can stall for a second."""
    site = await serve({"/": page()})
    port = site.url.rsplit(":", 1)[1]
    http = await open_session(server, timeout=2.0)  # lookups: min(5 s, --timeout) = 2 s
    loop = asyncio.get_running_loop()

    async def timed(url: str) -> tuple[float, int | BaseException]:
        result = await get(http, url)
        return loop.time() - started, result

    try:
        started = loop.time()
        silent = [asyncio.ensure_future(timed(f"http://quiet.test:{port}/{i}")) for i in range(20)]
        await wait_until(lambda: a_queries(server, "quiet.test") >= 1)  # the silent lookup is under way first
        good = await asyncio.gather(*[timed(f"http://{n}:{port}/?{i}") for i in range(20)
                                      for n in ("good.test", "good2.test", "localhost", "127.0.0.1")])
        quiet = await asyncio.gather(*silent)
    finally:
        await http.close()
    assert all(r == 200 for _, r in good), [r for _, r in good if r != 200][:3]
    assert max(t for t, _ in good) < min(t for t, _ in quiet)  # none waited for the silent name
    for elapsed, exc in quiet:
        assert 0.3 < elapsed < 4.5, elapsed  # c-ares may give up first (its retry timers adapt), never at 5 s
        assert isinstance(exc, aiohttp.ClientConnectorDNSError) and not errors.name_not_found(exc)
        failure = errors.dns_failure(exc)
        assert isinstance(failure, errors.LookupFailed) and errors.unresolvable(exc) is None
        assert failure.host == "quiet.test" and failure.retry_in > 0
        assert "quiet.test (no answer within 2 s" in str(exc)
    assert a_queries(server, "quiet.test") <= C_ARES_TRIES  # one lookup for the 20 requests
    assert a_queries(server, "localhost") == a_queries(server, "127.0.0.1") == 0


async def test_servfail_is_asked_at_most_max_tries_times_then_the_name_is_dead(server) -> None:
    """Asked every 0.1 s until the name is dead: within a back-off the failure is the cached
    one (no query), after it the name is looked up again, and the 3rd failed lookup kills it.
    Back-offs of 0.5 and 1 s: the 2nd request is in the first however loaded the machine."""
    http = await open_session(server, max_tries=3, backoff=0.5)  # back-offs 0.5, 1 s
    try:
        first = await get(http, "http://sf.test/")
        in_backoff = await get(http, "http://sf.test/again")  # within 0.5 s: no query
        queries = a_queries(server, "sf.test")
        results = [first, in_backoff]

        async def again() -> int | BaseException:
            results.append(await get(http, "http://sf.test/"))
            return results[-1]

        await wait_value(again, errors.name_not_found, 20, interval=0.1)
        results.append(await get(http, "http://sf.test/"))  # and dead it stays
    finally:
        await http.close()
    assert http.resolver is not None
    assert 1 <= queries <= C_ARES_TRIES
    assert http.resolver.counts().lookups == 3
    assert a_queries(server, "sf.test") <= 3 * C_ARES_TRIES
    assert not errors.name_not_found(first) and not errors.name_not_found(in_backoff)
    assert "SERVFAIL" in str(first) and "asked again after" in str(in_backoff)
    kinds = [errors.name_not_found(r) for r in results if isinstance(r, BaseException)]
    assert len(kinds) == len(results) and kinds[-2:] == [True, True] and not any(kinds[:-2])
    assert http.resolver.not_found("sf.test") == "3 lookups failed, the last: SERVFAIL"


async def test_ip_literals_localhost_and_malformed_names_never_reach_dns(server, serve) -> None:
    site = await serve({"/": page()})
    port = site.url.rsplit(":", 1)[1]
    http = await open_session(server)
    try:
        ok = [await get(http, f"http://{h}:{port}/") for h in ("127.0.0.1", "localhost", "LOCALHOST.", "a.localhost")]
        bad = [await get(http, f"http://{h}/") for h in ("-x.test", "x-.test", "nothing.invalid", "a..test")]
    finally:
        await http.close()
    assert ok == [200] * 4
    assert all(errors.name_not_found(e) for e in bad), bad
    assert sum(server.queries.values()) == 0
    assert http.resolver is not None and http.resolver.counts().lookups == 0


async def test_a_crawl_asks_each_name_once_however_many_links_and_tries(server, serve) -> None:
    """External links to dead names: every URL fails with a record saying why, from one
    lookup per name, though each URL has 4 tries and robots.txt is asked for first."""
    ext = await serve({"/ok": page()})
    port = ext.url.rsplit(":", 1)[1]
    links = [f"http://nx.test:{port}/{i}" for i in range(30)] + [f"http://sf.test:{port}/{i}" for i in range(30)]
    links += [f"http://good.test:{port}/ok", f"http://good2.test:{port}/ok"]
    site = await serve({"/": page(*links)})
    _, sink = await crawl(site.url + "/", external=True, dns_servers=(server.address,), max_tries=4,
                          timeout=1.0, backoff=0.01, host_max_failures=100)
    records = sink.by_url()
    assert records[f"http://good.test:{port}/ok"].status == 200
    assert records[f"http://good2.test:{port}/ok"].status == 200
    # a name that does not exist fails every URL of its host at once, each saying why
    nx = [records[u] for u in links[:30]]
    assert all(r.status is None and r.error_kind == "dns" for r in nx)
    assert all(reason(r.error_kind, r.error) == "name does not resolve" for r in nx)
    assert all(r.tries <= 1 for r in nx), [r.tries for r in nx]  # no retry of a fact
    # SERVFAIL: the host's failures in a row, then dead too (by --max-tries lookups)
    sf = [records[u] for u in links[30:60]]
    assert all(r.status is None and r.error_kind in ("dns", "host-retired") for r in sf)
    assert a_queries(server, "nx.test") == 1
    assert a_queries(server, "good.test") == a_queries(server, "good2.test") == 1
    assert a_queries(server, "sf.test") <= 4 * C_ARES_TRIES  # --max-tries lookups, however many URLs


async def test_the_fallback_without_aiodns_shares_and_keeps_failures_too() -> None:
    """ThreadedResolver under the same cache: a name glibc refuses (a space) fails once."""
    resolver = dns.CrawlResolver(ThreadedResolver(), limit=2.0, in_flight=dns.IN_FLIGHT_THREADS)
    try:
        results = await asyncio.gather(*[resolver.resolve("a b.test", 80, socket.AF_UNSPEC) for _ in range(10)],
                                       return_exceptions=True)
        again = await asyncio.gather(resolver.resolve("A B.test"), return_exceptions=True)
        local = await resolver.resolve("localhost", 8080, socket.AF_INET)
    finally:
        await resolver.close()
    assert all(isinstance(r, errors.NameNotFound) for r in [*results, *again]), results
    assert resolver.counts()[:3] == (1, 1, 9)  # lookups, hits, shared
    assert local == [{"hostname": "localhost", "host": "127.0.0.1", "port": 8080, "family": socket.AF_INET,
                      "proto": 0, "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV}]


def test_dns_server_option_takes_addresses_and_refuses_anything_else(capsys) -> None:
    p = Parser(prog="crawltop crawl")
    p.add_argument("roots", nargs="*")
    add_crawl_options(p)
    args = p.parse_args(["http://example.com/", "--dns-server", "127.0.0.1:5353", "--dns-server", "::1",
                         "--dns-server", "[2001:db8::1]:5300"])
    config = config_from(args, args.roots)
    assert config.dns_servers == ("127.0.0.1:5353", "[::1]:53", "[2001:db8::1]:5300")
    assert p.parse_args(["http://example.com/"]).dns_servers == []
    for bad in ("dns.google", "1.2.3.4:0", "1.2.3.4:65536", "[::1]x", "1.2.3.4:"):
        with pytest.raises(SystemExit) as exit_:
            p.parse_args(["http://example.com/", "--dns-server", bad])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("crawltop: error: argument --dns-server: not ADDR[:PORT]")


def test_the_errors_keep_their_words_through_pickling() -> None:
    for exc in (errors.NameNotFound("nx.test", "NXDOMAIN"), errors.LookupFailed("sf.test", "SERVFAIL", 1.5)):
        back = pickle.loads(pickle.dumps(exc))
        assert str(back) == str(exc) and errors.error_kind(back) == "dns" and isinstance(back, OSError)
    assert str(errors.NameNotFound("nx.test", "NXDOMAIN")) == "name does not resolve: nx.test (NXDOMAIN)"
    assert not errors.name_not_found(OSError("Connect call failed"))


async def test_a_lookup_survives_the_request_that_started_it_being_cancelled(server) -> None:
    """Shielded: the first asker's timeout does not cancel the lookup the others wait on."""
    resolver = dns.build([server.address], timeout=1.0)
    try:
        first = asyncio.ensure_future(resolver.resolve("quiet.test", 80, socket.AF_UNSPEC))
        second = asyncio.ensure_future(resolver.resolve("quiet.test", 443, socket.AF_UNSPEC))
        await wait_until(lambda: a_queries(server, "quiet.test") >= 1)  # the lookup is under way
        first.cancel()
        started = time.monotonic()
        with pytest.raises(errors.LookupFailed):
            await second
        assert time.monotonic() - started > 0.5  # it went on to its 1 s limit
    finally:
        await resolver.close()
    assert resolver.counts().lookups == 1


async def test_one_dead_subdomain_never_takes_its_siblings_pages(server, serve) -> None:
    """Queued by registered domain, www.site.test and nx.site.test share a queue: the dead
    name fails its own URLs, once each, and the site's pages are all fetched."""
    site = await serve({"/a": page("/b"), "/b": page()})
    port = site.url.rsplit(":", 1)[1]
    site.routes["/"] = page("/a", "/b", *(f"http://nx.site.test:{port}/{i}" for i in range(5)))
    root = f"http://www.site.test:{port}/"
    _, sink = await crawl(root, external=True, dns_servers=(server.address,), queue_by="domain", scope="domain",
                          timeout=1.0, backoff=0.01)
    records = sink.by_url()
    assert [records[root + p].status for p in ("", "a", "b")] == [200, 200, 200]
    dead = [records[f"http://nx.site.test:{port}/{i}"] for i in range(5)]
    assert all(r.error_kind == "dns" and r.tries <= 1 for r in dead), [(r.error_kind, r.tries) for r in dead]
    assert a_queries(server, "nx.site.test") == 1
