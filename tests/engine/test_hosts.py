"""Scheduling by host (core/queueing/hosts.py) in a real crawl, against real aiohttp servers on
several loopback addresses (127.0.0.2, 127.0.0.3, ... all reach `lo`), every request
timestamped at the server: what the crawler does with what a server says (Retry-After,
refused connections, robots.txt, a 500), hosts in parallel, budgets, resume, and a seed
that redirects to another host.

The policy's arithmetic (gaps, turns, back-off, strikes, budgets, pause, live and adaptive
delays) is tests/engine/test_schedule.py's, on a fake clock with exact numbers; a test here
that times anything says what real-time behaviour it checks and why its bound holds on a
loaded 2-core machine."""
from __future__ import annotations

import asyncio
import json
import sys
import time
from email.utils import formatdate
from pathlib import Path

from aiohttp import web
from support.crawl import ListSink, crawl
from support.sites import page, redirect
from support.wait import wait_until

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.queueing.politeness import NEVER_ANSWERED_STRIKES
from crawltop.core.storage.open_state import open_state

# A request is stamped when its server's loop gets to it, and sent when the crawler's loop gets
# to it: on a loaded machine either can be late by hundreds of ms and shorten the gap after it
# by as much, so no test here asks for a gap measured at a server (bench/politeness.py
# measures them at nginx, to the millisecond).


def tree(n: int) -> dict:
    """/ links to /p0 ... /p{n-2}: n pages in all."""
    routes = {"/": page(*[f"/p{i}" for i in range(n - 1)])}
    routes.update({f"/p{i}": page() for i in range(n - 1)})
    return routes


def gaps(times: list[tuple[float, str]]) -> list[float]:
    ts = sorted(t for t, _ in times)
    return [b - a for a, b in zip(ts, ts[1:], strict=False)]


async def child_sites(pages: int, addresses: list[str]) -> tuple[asyncio.subprocess.Process, dict[str, str]]:
    """tests/support/hostsites.py in a child process: {address: root URL}."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(Path(__file__).parents[1] / "support" / "hostsites.py"), str(pages), *addresses,
        stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    ports = json.loads(await asyncio.wait_for(proc.stdout.readline(), 20))
    return proc, {a: f"http://{a}:{p}/" for a, p in ports.items()}


async def child_times(proc: asyncio.subprocess.Process) -> dict[str, list[tuple[float, str]]]:
    """Stop the child; each address's requests as (time, path), as it stamped them."""
    proc.terminate()
    out, _ = await asyncio.wait_for(proc.communicate(), 20)
    times: dict[str, list[tuple[float, str]]] = {}
    for line in out.decode().split("\n"):
        if line.strip():
            t, address, path = line.split(" ", 2)
            times.setdefault(address, []).append((float(t), path))
    return times


async def test_twenty_hosts_run_in_parallel_each_at_its_delay() -> None:
    """Real time, end to end: the delay holds at each server (the crawler's timers), and the
    hosts run side by side. Served by a child process (its own loop: stamps as a server sees
    them). Each gap exactly: test_schedule.py and the probe's test below; here, two bounds
    load cannot break: each host's five requests span at least half of their four gaps of
    0.3 s (0.6 s: a request stamped late can shorten one gap by any amount, seen up to 0.3 s
    here, but the span only by a late first stamp, and a delay not kept at all shows as a
    span of a few ms), and the crawl takes under 12 s where one host at a time takes 24 s
    (side by side: ~1.2 s)."""
    addresses = [f"127.0.0.{i}" for i in range(2, 22)]
    proc, roots = await child_sites(5, addresses)
    try:
        started = time.monotonic()
        crawler, sink = await crawl(list(roots.values()), delay=0.3, concurrency=20, robots=False)
        took = time.monotonic() - started
    finally:
        times = await child_times(proc)
    assert len(sink.records) == 100 and all(r.status == 200 for r in sink.records)
    for address in addresses:
        assert len(times[address]) == 5
        assert sum(gaps(times[address])) >= 4 * 0.3 / 2, (address, gaps(times[address]))
    assert took < 12, took
    assert crawler.stats.snapshot().host_counts == {"done": 20}


async def test_a_host_waits_out_retry_after_and_the_others_go_on(serve) -> None:
    """The crawler reads Retry-After (seconds) and blocks the whole host for it. Real time,
    but only a lower bound: nothing reaches the host within 1 s of its 429 (load only makes
    the crawler later), while the other host, 12 pages at 0.1 s, goes on meanwhile."""
    first: list[float] = []

    async def limited(req: web.Request) -> web.StreamResponse:
        if not first:
            first.append(time.monotonic())
            return web.Response(status=429, headers={"Retry-After": "1"})
        return web.Response(text="<p>ok</p>", content_type="text/html")

    busy_routes = {"/": page(*[f"/p{i}" for i in range(8)])}
    busy_routes.update({f"/p{i}": limited for i in range(8)})
    busy = await serve(busy_routes, "127.0.0.2")
    other = await serve(tree(12), "127.0.0.3")
    _, sink = await crawl([busy.url + "/", other.url + "/"], delay=0.1, concurrency=8, robots=False)
    assert len(sink.records) == 9 + 12
    assert all(r.status == 200 for r in sink.records), [r for r in sink.records if r.status != 200]
    t429 = first[0]
    during = [t for t, _ in busy.times if t429 < t < t429 + 1.0]
    assert during == [], f"{len(during)} requests reached the host within its Retry-After"
    assert any(t429 < t < t429 + 1.0 for t, _ in other.times)  # the other host kept going


async def test_retry_after_as_an_http_date_blocks_the_host(serve) -> None:
    """Retry-After as an HTTP date. A lower bound again: nothing within 0.9 s of the 503."""
    first: list[float] = []

    async def limited(req: web.Request) -> web.StreamResponse:
        if not first:
            first.append(time.monotonic())
            return web.Response(status=503, headers={"Retry-After": formatdate(time.time() + 2, usegmt=True)})
        return web.Response(text="<p>ok</p>", content_type="text/html")

    routes = {"/": page(*[f"/p{i}" for i in range(4)])}
    routes.update({f"/p{i}": limited for i in range(4)})
    site = await serve(routes, "127.0.0.2")
    _, sink = await crawl(site.url + "/", concurrency=4, robots=False, per_host=1)  # none in flight with it
    assert all(r.status == 200 for r in sink.records) and len(sink.records) == 5
    # An HTTP date has one-second resolution: the block ends 1 to 2 s after the 429.
    assert not [t for t, _ in site.times if first[0] < t < first[0] + 0.9]


async def test_connection_refused_backs_off_then_retires_the_host_with_a_record_each(serve) -> None:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.5", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connection refused
    dead = [f"http://127.0.0.5:{port}/{i}" for i in range(8)]
    live = await serve(tree(3), "127.0.0.6")
    crawler, sink = await crawl([*dead, live.url + "/"], concurrency=4, robots=False, backoff=0.05,
                                host_max_failures=3, max_tries=10, per_host=1)
    by = sink.by_url()
    assert sorted(by) == sorted([*dead, live.url + "/", live.url + "/p0", live.url + "/p1"])
    assert len(sink.records) == len(by)  # one record each
    kinds = [by[u].error_kind for u in dead]
    assert kinds.count("host-retired") >= 6 and set(kinds) <= {"host-retired", "connect"}, kinds
    # A host that never answered retires after NEVER_ANSWERED_STRIKES (2) failures, under
    # --host-max-failures 3 (the back-off between them: test_schedule.py)
    row = next(h for h in crawler.steering.host_table() if h.host == f"127.0.0.5:{port}")
    assert row.state == "retired" and row.queued == 0 and row.failures == NEVER_ANSWERED_STRIKES == 2
    assert crawler.stats.snapshot().host_counts.get("retired") == 1


async def test_budget_per_host_counts_what_it_refuses(serve) -> None:
    site = await serve(tree(30), "127.0.0.2")
    crawler, sink = await crawl(site.url + "/", robots=False, max_pages_per_host=10)
    assert len(sink.records) == 10 and len(site.times) == 10
    row = crawler.steering.host_table()[0]
    assert row.over == 20 and row.done == 10
    assert crawler.stats.snapshot().hosts_over_budget == 20


def robots_txt(text: str):
    async def handler(req: web.Request) -> web.Response:
        return web.Response(text=text)
    return handler


async def test_robots_is_the_hosts_first_request_and_sets_its_delay(serve) -> None:
    routes = tree(4)
    routes["/robots.txt"] = robots_txt("User-agent: *\nCrawl-delay: 0.3\n")
    site = await serve(routes, "127.0.0.2")
    crawler, sink = await crawl(site.url + "/", concurrency=4)
    assert [p for _, p in site.times][0] == "/robots.txt" and len(site.times) == 5
    # (the gap it makes: test_schedule.py on a fake clock, the 20 hosts above in real time)
    row = crawler.steering.host_table()[0]
    assert row.delay == 0.3 and row.source == "robots"


async def test_crawl_delay_is_capped_and_the_row_says_so(serve) -> None:
    routes = tree(2)
    routes["/robots.txt"] = robots_txt("User-agent: *\nCrawl-delay: 100\n")
    site = await serve(routes, "127.0.0.2")
    crawler, _ = await crawl(site.url + "/", max_crawl_delay=0.2)
    row = crawler.steering.host_table()[0]
    assert row.delay == 0.2 and row.source == "robots (capped)"


async def test_a_seed_that_redirects_to_another_host_brings_that_host_into_scope(serve) -> None:
    b = await serve({"/": page("/x"), "/x": page()}, "127.0.0.3")
    a = await serve({"/": redirect(b.url + "/")}, "127.0.0.2")
    _, sink = await crawl(a.url + "/", robots=False)
    assert {r.url for r in sink.records} == {a.url + "/", b.url + "/", b.url + "/x"}


async def test_a_link_that_redirects_to_another_host_stays_out_of_scope(serve) -> None:
    b = await serve({"/": page("/x"), "/x": page()}, "127.0.0.3")
    a = await serve({"/": page("/go"), "/go": redirect(b.url + "/")}, "127.0.0.2")
    _, sink = await crawl(a.url + "/", robots=False)
    assert {r.url for r in sink.records} == {a.url + "/", a.url + "/go"}


async def test_queue_by_domain_puts_two_ports_in_one_queue(serve) -> None:
    # Two names of one registered domain (localhost-style literal hosts have no domain),
    # so use two ports of one IP with --queue-by domain: same key, one queue (its one delay
    # across them: test_schedule.py).
    a = await serve(tree(3), "127.0.0.2")
    b = await serve(tree(3), "127.0.0.2")
    crawler, sink = await crawl([a.url + "/", b.url + "/"], robots=False, queue_by="domain")
    assert len(sink.records) == 6
    assert [h.host for h in crawler.steering.host_table()] == ["127.0.0.2"]


async def test_resume_keeps_each_hosts_state(serve, tmp_path) -> None:
    slow = await serve(tree(6), "127.0.0.2")
    fast = await serve(tree(3), "127.0.0.3")
    path = str(tmp_path / "s.db")
    config = CrawlConfig(roots=(slow.url + "/", fast.url + "/"), robots=False, max_pages_per_host=4)
    _, store = open_state(path, config)
    crawler = Crawler(config, frontier=store, sinks=[store.sink])
    slow_key, fast_key = slow.url.split("//")[1], fast.url.split("//")[1]
    crawler.steering.set_host_delay(slow_key, 5.0)  # live: after its first page, the rest wait
    crawler.steering.pause_host(fast_key)
    task = asyncio.ensure_future(crawler.crawl())

    def rooted() -> bool:  # the slow host's root is parsed: its links admitted, 2 over budget
        h = store.hosts.hosts.get(slow_key)
        return h is not None and h.over == 2

    await wait_until(rooted, what="the slow host's root parsed")
    crawler.stop()
    await asyncio.wait_for(task, 10)
    store.save_session(status="stopped")
    store.close()

    _, store = open_state(path, None)
    rows = {h.key: h for h in store.hosts}
    assert rows[slow_key].live_delay == 5.0 and rows[slow_key].admitted == 4 and rows[slow_key].over == 2
    assert rows[fast_key].paused
    resumed = Crawler(config, frontier=store, sinks=[ListSink()])
    view = {r.host: r for r in resumed.steering.host_table()}
    assert view[slow_key].delay == 5.0 and view[slow_key].source == "live"
    assert view[fast_key].paused and store.size == 3 + 1  # the slow host's 3 left, the paused root
    store.close()


async def test_report_and_headless_summary_count_retired_hosts(serve, tmp_path) -> None:
    import io
    import json as _json
    import socket

    from crawltop.cli.headless import report as headless_report
    from crawltop.core.reporting.linkcheck import analyse
    s = socket.socket()
    s.bind(("127.0.0.7", 0))
    port = s.getsockname()[1]
    s.close()
    dead = [f"http://127.0.0.7:{port}/{i}" for i in range(6)]
    out = tmp_path / "r.jsonl"
    crawler, _ = await crawl(dead, robots=False, backoff=0.01, host_max_failures=2, per_host=1, output=str(out))
    records = [_json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 6
    assert analyse(records).retired_hosts == {f"127.0.0.7:{port}"}
    text = io.StringIO()
    headless_report(crawler, text)
    assert "retired 1" in text.getvalue()
    from crawltop.tui.panels.summary import summary_content
    plain = summary_content(crawler.stats.snapshot(), []).plain
    assert "hosts retired" in plain and "over host budget" in plain


async def test_a_500_waits_its_own_back_off_without_a_worker_and_without_its_host(serve) -> None:
    """A 500 is the URL's own retry (Hosts.defer; its arithmetic: test_schedule.py): the
    one worker goes on with the host's other pages and the retry comes after its back-off.
    Real time, two bounds that load cannot break: the retry at least 0.3 s after the 500
    (--backoff 0.6, jittered x0.5 to x1.5: load only makes it later), and the six other
    pages, a few ms each, all fetched before it."""
    tries: list[float] = []

    async def twice_500(req: web.Request) -> web.StreamResponse:
        tries.append(time.monotonic())
        return web.Response(status=500 if len(tries) < 3 else 200, text="<p>ok</p>", content_type="text/html")

    routes = tree(8)
    routes["/p0"] = twice_500
    site = await serve(routes, "127.0.0.2")
    _, sink = await crawl(site.url + "/", robots=False, concurrency=1, backoff=0.6)
    assert sink.by_url()[site.url + "/p0"].status == 200 and sink.by_url()[site.url + "/p0"].tries == 3
    assert tries[1] - tries[0] >= 0.6 * 0.5
    others = [t for t, p in site.times if p.startswith("/p") and p != "/p0"]
    assert len(others) == 6 and max(others) < tries[1], (tries, site.times)


async def test_the_adaptive_delay_is_set_from_the_hosts_response_time(serve) -> None:
    """The crawler hands each answer's latency to the host (the delay it makes and the gap
    that follows: test_schedule.py): with --delay-factor and no --delay, any answer, however
    fast, makes the delay adaptive."""
    site = await serve(tree(5), "127.0.0.2")
    crawler, sink = await crawl(site.url + "/", robots=False, concurrency=4, delay_factor=2.0)
    assert len(sink.records) == 5
    row = crawler.steering.host_table()[0]
    assert row.source == "adaptive" and 0 < row.delay < 5, (row.source, row.delay)


async def test_a_robots_refusal_frees_the_hosts_slot(serve) -> None:
    """The slot taken for a URL that robots.txt refuses goes back: with --per-host 1
    the host's other pages still come (the crawl ends, nothing stays 'fetching')."""
    routes = {"/": page("/x1", "/x2", "/p1", "/p2"), "/p1": page(), "/p2": page(),
              "/robots.txt": robots_txt("User-agent: *\nDisallow: /x\n")}
    site = await serve(routes, "127.0.0.2")
    crawler, sink = await crawl(site.url + "/", per_host=1)
    kinds = {r.url.rsplit("/", 1)[1]: r.error_kind for r in sink.records}
    assert kinds == {"": None, "x1": "robots", "x2": "robots", "p1": None, "p2": None}
    assert crawler.steering.host_table()[0].in_flight == 0


async def test_a_worker_woken_for_one_host_keeps_the_timer_on_the_next(serve) -> None:
    """Two workers wait; host A comes due, then B a little later: B is taken by the other
    worker on its own timer, not when the first worker is done with A. A's page answers
    only once B's second page was asked for (or after 20 s: the timer was lost), so the
    test needs no bound on time at all."""
    b1_asked = asyncio.Event()
    b1_first: list[bool] = []

    async def held(req: web.Request) -> web.StreamResponse:
        try:
            await asyncio.wait_for(b1_asked.wait(), 20)
        except TimeoutError:
            pass
        b1_first.append(b1_asked.is_set())
        return web.Response(text="<p>ok</p>", content_type="text/html")

    async def b1(req: web.Request) -> web.StreamResponse:
        b1_asked.set()
        return web.Response(text="<p>ok</p>", content_type="text/html")

    a = await serve({"/": page("/slow"), "/slow": held}, "127.0.0.2")
    b = await serve({"/": page("/b1"), "/b1": b1}, "127.0.0.3")
    crawler, sink = await crawl([a.url + "/", b.url + "/"], robots=False, concurrency=2, delay=0.3)
    assert b1_first == [True]  # B's page was taken while A's worker was still held
    assert len(sink.records) == 4


async def test_a_rate_limit_backs_off_but_never_retires_the_host(serve) -> None:
    count: list[int] = [0]

    async def limited(req: web.Request) -> web.StreamResponse:
        count[0] += 1
        if count[0] <= 6:
            return web.Response(status=429, headers={"Retry-After": "0"})
        return web.Response(text="<p>ok</p>", content_type="text/html")

    routes = {"/": page(*[f"/p{i}" for i in range(3)])}
    routes.update({f"/p{i}": limited for i in range(3)})
    site = await serve(routes, "127.0.0.2")
    crawler, sink = await crawl(site.url + "/", robots=False, per_host=1, host_max_failures=2, max_tries=10)
    assert all(r.status == 200 for r in sink.records) and len(sink.records) == 4
    assert crawler.steering.host_table()[0].state == "done"


async def test_the_sitemap_probe_is_one_of_the_hosts_requests_and_keeps_the_gap(serve) -> None:
    """robots.txt, the page and the /sitemap.xml probe each take a turn of the host and keep
    its gap, on a host with pages left and on one with nothing left to take a turn (the turn
    on a fake clock: test_schedule.py). Exact whatever the load: each request, as it reaches
    its server (in this loop), finds its host's next-allowed time a full delay past the one
    the request before it found (a turn taken, the gap counted from its start), where a
    request sent out of turn would find the time unchanged."""
    found: dict[str, list[tuple[str, float]]] = {}
    sink = ListSink()
    crawler: Crawler | None = None

    def observed(site_routes: dict) -> dict:
        def wrap(handler):
            async def run(req: web.Request) -> web.StreamResponse:
                assert crawler is not None
                host = crawler.frontier.hosts.hosts[req.host]  # type: ignore[attr-defined]
                found.setdefault(req.host, []).append((req.path, host.next_at))
                return await handler(req)
            return run
        return {path: wrap(handler) for path, handler in site_routes.items()}

    robots = robots_txt("User-agent: *\n")
    multi = await serve(observed({**tree(4), "/robots.txt": robots, "/sitemap.xml": page()}), "127.0.0.2")
    single = await serve(observed({"/": page(), "/robots.txt": robots, "/sitemap.xml": page()}), "127.0.0.3")
    crawler = Crawler(CrawlConfig(roots=(multi.url + "/", single.url + "/"), delay=0.2, sitemaps=True,
                                  backoff=0.01, timeout=5.0), sinks=[sink])
    await asyncio.wait_for(crawler.crawl(), 60)
    assert len(sink.records) == 4 + 1  # HTML at /sitemap.xml: not a sitemap, so no record
    for site in (multi, single):
        requests = found[site.url.split("//")[1]]
        paths = [p for p, _ in requests]
        assert "/sitemap.xml" in paths and paths[:2] == ["/robots.txt", "/"], paths
        times = [at for _, at in requests]
        assert all(b - a >= 0.2 - 1e-9 for a, b in zip(times, times[1:], strict=False)), requests
