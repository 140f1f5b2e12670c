"""The Redis frontier against a real redis-server and real aiohttp sites: the same
crawl as the memory frontier, leases that outlive their process, records accepted only
from the lease holder, and `finished` decided by Redis."""
from __future__ import annotations

import asyncio
import json

import pytest
import redis.asyncio as aioredis
from support.cluster import engines, host_keys, slow_tree, stream_entries_async, tree, unique
from support.crawl import crawl
from support.sites import held, page, slow
from support.wait import wait_until

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.member import Member
from crawltop.core.cluster.seen import fingerprint
from crawltop.core.cluster.totals import totals
from crawltop.core.errors import UsageError
from crawltop.core.output.records import Record
from crawltop.core.parsing.urls import canonical
from crawltop.core.queueing.frontier import Item

pytestmark = pytest.mark.timeout(60)


async def shared_crawl(url: str, name: str, root: str, processes: int = 1, **options) -> list[Member]:
    members = await engines(url, name, CrawlConfig(roots=(root,), **options), processes)
    await asyncio.gather(*(m.crawl() for m in members))
    return members


async def records(url: str, name: str) -> list[dict]:
    r = cluster.client(url)
    entries = await stream_entries_async(r, name)  # every partition's stream
    await r.aclose()
    out = []
    for fields in entries:
        rec = json.loads(fields[b"data"])
        if fields[b"new"]:  # (a partitioned crawl's: the engine's own count, kept in the record)
            rec["num_new_urls"] = int(fields[b"new"])
        out.append(rec)
    return out


async def test_same_records_as_the_memory_frontier(serve, redis_url):
    site = await serve(tree())
    _, mem = await crawl(site.url)
    await shared_crawl(redis_url, "same", site.url)
    shared = await records(redis_url, "same")
    assert sorted(r["url"] for r in shared) == sorted(r.url for r in mem.records)
    by_url = {r["url"]: r for r in shared}
    for rec in mem.records:
        got = by_url[rec.url]
        assert (got["status"], got["merged"], got["error_kind"], got["depth"]) == \
               (rec.status, rec.merged, rec.error_kind, rec.depth), rec.url
        assert (got["via"] is None) == (rec.via is None) and len(got["discovery"]) == len(rec.discovery)
    assert by_url[site.url.rstrip("/") + "/r/merge"]["merged"] is True
    assert sum(r["num_new_urls"] for r in shared) == len(shared) - 1  # every URL but the root was new once


@pytest.mark.redis
async def test_two_processes_one_record_per_url(serve, shared_url):
    site = await serve(tree(120))
    name = unique("two")
    members = await shared_crawl(shared_url, name, site.url, processes=2, concurrency=4)
    shared = await records(shared_url, name)
    urls = [r["url"] for r in shared]
    assert len(urls) == len(set(urls)) == 124  # root, 120 pages, merge, loop a and b
    assert {r["proc"] if "proc" in r else None for r in shared} == {None}
    assert sum(m.reporter for m in members) == 1  # exactly one writes the whole crawl's report
    assert all(site.hits.get(p, 0) <= 1 for p in [f"/p{i}" for i in range(1, 121)])
    pages = [m.frontier.round_trips / max(1, m.stats.pages) for m in members]
    assert sum(m.stats.records for m in members) == 124
    # each page: one pop, one done, a share of the heartbeats: well under 3 round trips
    rt = sum(m.frontier.round_trips for m in members) / 124
    assert rt <= 3, (rt, pages)


@pytest.mark.redis
async def test_a_dead_process_leases_come_back(serve, shared_url):
    """A process pops URLs and dies without a word: after its lease they are reaped, and a
    live process fetches them; the dead one's late done() is refused."""
    site = await serve(tree(10))
    config = CrawlConfig(roots=(site.url,))
    redis_url, name = shared_url, unique("dead")
    r = cluster.client(redis_url)
    await cluster.start(r, redis_url, name, config)
    ghost = cluster.frontier(redis_url, name, config, lease=0.5)  # the crawl's kind: partitioned or not
    root = canonical(site.url)
    ghost.add(Item(root, 10, 0))
    taken = await ghost.pop()  # the root, leased to a process that will never finish it
    assert taken.url == root
    live = cluster.frontier(redis_url, name, config)
    crawler = Crawler(config, frontier=live, sinks=[live.sink])
    await Member(crawler, live).crawl()
    # the ghost comes back and tries to write its record: refused, nothing twice
    ghost.sink.write(Record(url=root, status=200))
    ghost.done(taken)
    await ghost.flush()
    shared = await records(redis_url, name)
    urls = [x["url"] for x in shared]
    assert len(urls) == len(set(urls)) == 14
    assert next(x for x in shared if x["url"] == root)["tries"] == 2  # the dead process spent one try
    assert (await totals(r, name))["rejected"] == 1
    await r.aclose()
    await ghost.close()


@pytest.mark.redis
async def test_settings_and_foreign_data_are_refused(shared_url):
    redis_url, (s, f, g) = shared_url, (unique(x) for x in "sfg")  # a cluster lives for the whole session
    r = cluster.client(redis_url)
    a = CrawlConfig(roots=("http://127.0.0.1:1/",), concurrency=3)
    assert (await cluster.start(r, redis_url, s, a))[0] is True
    assert (await cluster.start(r, redis_url, s, CrawlConfig(roots=a.roots, concurrency=9)))[0] is False
    with pytest.raises(UsageError, match="other settings.*max_depth"):
        await cluster.start(r, redis_url, s, CrawlConfig(roots=a.roots, max_depth=2))
    await r.set(f"crawltop:{{{f}}}:q", "someone else's")
    with pytest.raises(UsageError, match="foreign data"):
        await cluster.start(r, redis_url, f, a)
    await r.set(f"crawltop:{{{g}}}:meta", "a string")
    with pytest.raises(UsageError, match="foreign data"):
        await cluster.start(r, redis_url, g, a)
    with pytest.raises(UsageError, match="no crawl named"):
        await cluster.join(r, redis_url, unique("nobody"))
    config, status = await cluster.join(r, redis_url, s)
    assert config.roots == a.roots and status == "running"
    await r.aclose()
    dead = cluster.client("redis://127.0.0.1:1/0", timeout=1)
    with pytest.raises(UsageError, match="cannot reach Redis"):
        await cluster.check(dead, "redis://127.0.0.1:1/0")


async def test_links_batched_fingerprints_compact(serve, redis_url):
    site = await serve(tree(30))
    await shared_crawl(redis_url, "fp", site.url)
    r = aioredis.Redis.from_url(redis_url)
    buckets = [key async for key in r.scan_iter(match="crawltop:{fp}:seen:*")]
    members = set().union(*[await r.smembers(key) for key in buckets])
    assert len(members) == 34 and all(-2**63 <= int(m) < 2**63 for m in members)  # 64-bit integers
    assert {await r.object("encoding", key) for key in buckets} == {b"intset"}
    assert fingerprint(canonical(site.url)).encode() in members
    assert int(await r.hget(Keys("fp").count, "seen")) == 34
    assert int(await r.hget(Keys("fp").count, "queued") or 0) == 0 and await r.zcard(Keys("fp").leases) == 0
    assert (await r.hget(Keys("fp").meta, "status")) == b"finished"
    await r.aclose()


@pytest.mark.redis
async def test_an_ignore_holds_for_the_whole_crawl(serve, shared_url):
    """Two engines, two workers each, every worker holding one of the site's pages (held
    until the test lets them go), 45 matching URLs queued in Redis behind them (by a third
    process: the engines' links come out in no fixed order, so a page of theirs could not
    keep them behind the held ones). The ignore, added in one engine, takes all 45 at once,
    each with its `ignored` record; the other engine has it at its next beat; the matching
    links the held pages reveal afterwards are refused by whichever engine fetched them
    (never queued, never recorded); nothing matching is fetched, and every other URL has
    exactly one record."""
    release = asyncio.Event()
    held_pages = [f"/h{i}" for i in range(4)]
    matching = [f"/m{i}" for i in range(45)]
    routes = {"/": page(*held_pages)}
    routes.update({p: held(release, page(f"/m{100 + i}", f"/n{i}")) for i, p in enumerate(held_pages)})
    routes.update({p: page() for p in [*matching, "/keep", *(f"/n{i}" for i in range(4))]})
    site = await serve(routes)
    base = site.url.rstrip("/")
    config = CrawlConfig(roots=(site.url,), concurrency=2, robots=False, sitemaps=False)
    redis_url, name = shared_url, unique("ign")
    members = await engines(redis_url, name, config, 2)
    r = cluster.client(redis_url)
    run = asyncio.ensure_future(asyncio.gather(*(m.crawl() for m in members)))
    # the root's 4 links for 4 workers: each holds one, none is left to pop another
    await wait_until(lambda: site.in_flight == 4, what="every worker holding a page")
    adder = cluster.frontier(redis_url, name, config)
    for p in [*matching, "/keep"]:
        adder.add(Item(base + p, 10, 2, 0, base + "/h0", "LL"))
    await adder.flush()
    await adder.close()
    now = await totals(r, name)
    assert (now["queued"], now["leased"]) == (46, 4)
    result = await members[0].add_ignore(r"/m\d+$")
    assert result.ok and result.dropped == 45
    host = members[0].frontier.hosts.key(site.url)
    hq = (await host_keys(r, name, host)).hq(host)
    assert [json.loads(x)[0] for x in await r.lrange(hq, 0, -1)] == [base + "/keep"]
    await wait_until(lambda: r"/m\d+$" in members[1].ignore_rules, what="the other engine's ignore")
    release.set()
    await asyncio.wait_for(run, 30)
    shared = await records(redis_url, name)
    urls = [x["url"] for x in shared]
    others = {canonical(site.url), *(base + p for p in ["/keep", *held_pages, *(f"/n{i}" for i in range(4))])}
    assert len(urls) == len(set(urls)) and set(urls) == others | {base + p for p in matching}
    assert {x["url"] for x in shared if x["error_kind"] == "ignored"} == {base + p for p in matching}
    assert not any(p.startswith("/m") for p in site.hits)  # nothing matching was fetched
    assert (await totals(r, name))["seen"] == len(urls)  # /m100.. found after the ignore: never queued
    assert (members[0].stats.ignored, members[1].stats.ignored) == (45, 0)
    assert await r.hkeys(Keys(name).ignores) == [rb"/m\d+$"]  # a control key: one for the whole crawl
    await r.aclose()


async def test_per_host_cap_and_delay_hold_across_processes(serve, redis_url):
    """Two engines, 4 workers each, --per-host 2 --delay 0.05: the site never sees more
    than 2 requests at once, nor two starts closer than the delay, from both together."""
    import time

    starts: list[float] = []

    def timed(handler):
        late = slow(0.02, handler)

        async def run(request):
            starts.append(time.monotonic())
            return await late(request)
        return run

    site = await serve({p: timed(h) for p, h in tree(40).items()})
    config = CrawlConfig(roots=(site.url,), concurrency=4, per_host=2, delay=0.05, robots=False)
    members = await engines(redis_url, "polite", config, 2)
    await asyncio.gather(*(m.crawl() for m in members))
    assert all(m.stats.pages > 0 for m in members)  # both took part
    assert site.max_in_flight <= 2
    gaps = sorted(b - a for a, b in zip(starts, starts[1:], strict=False))
    # A start is stamped when its handler runs, late by the loop's lag, and one late start
    # makes the next gap short (a loaded machine has seen 5 ms): so the claim is on the median
    # gap and the whole span, where one delay per process would show as half the delay
    assert len(starts) == 44 and gaps[len(gaps) // 2] >= 0.05 - 0.01, gaps[:5]
    assert starts[-1] - starts[0] >= 43 * 0.05 - 0.025, starts[-1] - starts[0]


async def test_per_host_cap_alone_holds_across_processes(serve, redis_url):
    """Without a delay: 8 workers in two engines, --per-host 2, slow pages: exactly 2 at
    once at most (each engine alone would allow 2, so 4 together without Redis's slots)."""
    site = await serve(slow_tree(30, 0.1))
    config = CrawlConfig(roots=(site.url,), concurrency=4, per_host=2, robots=False)
    members = await engines(redis_url, "cap", config, 2)
    await asyncio.gather(*(m.crawl() for m in members))
    assert all(m.stats.pages > 0 for m in members)
    assert site.max_in_flight == 2


async def test_finish_waits_for_a_burst_of_late_links(serve, redis_url):
    """The last pages in flight are slow (longer than a lease, so only heartbeats keep
    them) and each reveals a burst of 60 new links, after the queue has been empty for
    seconds. A finish guessed from idleness (an empty queue for a while, or one engine
    with nothing to do) would end the crawl there. Here: Redis says `finished` only after
    the last burst is recorded, every URL has one record and one fetch, and both engines
    are still there for the last burst (each fetches part of it)."""
    import time

    from support.sites import html

    def late(seconds: float, *links: str):
        async def links_page(request):
            return html(*links)
        return slow(seconds, links_page)

    fast, burst = 20, 60
    routes = {"/": page(*(f"/f/{i}" for i in range(fast)), "/slow/a", "/slow/b")}
    routes.update({f"/f/{i}": page("/") for i in range(fast)})
    routes["/slow/a"] = late(2.5, *(f"/a/{i}" for i in range(burst)))
    routes["/slow/b"] = late(4.5, *(f"/b/{i}" for i in range(burst)), "/slow/a")
    routes.update({f"/{x}/{i}": late(0.02, "/", f"/{x}/{(i + 1) % burst}") for x in "ab" for i in range(burst)})
    total = 1 + fast + 2 + 2 * burst
    site = await serve(routes)
    config = CrawlConfig(roots=(site.url,), concurrency=2, robots=False, sitemaps=False)
    r = cluster.client(redis_url)
    await cluster.start(r, redis_url, "burst", config)
    members = []
    for _ in range(2):
        f = cluster.frontier(redis_url, "burst", config, lease=2.0)
        members.append(Member(Crawler(config, frontier=f, sinks=[f.sink]), f))
    k = Keys("burst")
    samples: list[tuple[float, int, int, int, bytes]] = []  # time, queued, leased, records, status
    exits: dict[str, int] = {}  # proc -> records in Redis when its engine returned

    async def watch() -> None:
        while True:
            q, leased, recs, status = await asyncio.gather(r.hget(k.count, "queued"), r.zcard(k.leases),
                                                           r.hget(k.count, "records"), r.hget(k.meta, "status"))
            samples.append((time.monotonic(), int(q or 0), leased, int(recs or 0), status))
            await asyncio.sleep(0.05)

    async def engine(m: Member) -> None:
        await m.crawl()
        exits[m.frontier.proc] = int(await r.hget(k.count, "records") or 0)

    watcher = asyncio.ensure_future(watch())
    await asyncio.wait_for(asyncio.gather(*(engine(m) for m in members)), 50)
    watcher.cancel()
    await asyncio.gather(watcher, return_exceptions=True)

    # the scenario happened: a long stretch with nothing queued and only the slow pages out
    idle, since = 0.0, None
    for t, q, leased, recs, _status in samples:
        if q == 0 and 0 < leased <= 2 and recs < total:
            since = t if since is None else since
            idle = max(idle, t - since)
        else:
            since = None
    assert idle >= 1.0, idle
    # never finished early: `finished` appears only with every record in
    assert all(recs == total for _t, _q, _l, recs, status in samples if status == b"finished")
    assert await r.hget(k.meta, "status") == b"finished"
    assert sorted(exits.values()) == [total, total], exits  # no engine left before the end
    shared = await records(redis_url, "burst")
    urls = [x["url"] for x in shared]
    assert len(urls) == len(set(urls)) == total
    assert set(site.hits) == set(routes) and set(site.hits.values()) == {1}, \
        {p: n for p, n in site.hits.items() if n != 1}  # the slow pages' leases were renewed, not reaped
    entries = await r.xrange(k.rec)
    last_burst = {fields[b"proc"] for _id, fields in entries if b"/b/" in fields[b"url"]}
    assert len(last_burst) == 2, last_burst  # the engine with nothing in flight was still there
    assert int(await r.hget(k.meta, "reaped") or 0) == 0
    await r.aclose()
