"""`--browser` across engines: each engine process runs its own Chromium, and what a tab
loads is claimed exactly across the crawl (core/cluster/frontier.py `claim`), so every URL
has one Record wherever it was loaded. Against a real redis-server, real Chromium and a
site whose pages a script builds (support/spasite.py: every page needs /spa.js and shows
/img/logo.png, its links come from JSON), counted at the server."""
from __future__ import annotations

import asyncio
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from aiohttp import web
from support.cluster import recorded_by, sync_redis
from support.sites import Site, held, page
from support.spasite import PNG, spa_paths, spa_site
from support.wait import wait_value

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster import scripts
from crawltop.core.cluster.frontier import RedisFrontier
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.oneshot import start
from crawltop.core.dashboard.shared import RedisCrawl
from crawltop.core.output.records import Record
from crawltop.core.queueing.politeness import Politeness

pytestmark = pytest.mark.timeout(180)
QUIET = "0.3"  # --browser-quiet: a tab is read 0.3 s after its network went still (0.2 lost a late image under load)
# The script every page runs: a tab of an engine that did not claim it still needs it, and
# fetches it unrecorded, once per engine, its answer kept for the engine's later tabs
# (core/fetching/tabroutes.py, tabshare.py); every other URL is requested once.
SHARED_SCRIPT = "/spa.js"
ENGINES = 2


def per_engine_limit(status: dict) -> int:
    """--browser-memory, as each engine's heartbeat row says it (the same for all)."""
    limits = {p["browser"]["memory_limit"] for p in status["processes"]}
    assert len(limits) == 1
    return limits.pop()


async def cli(*args: str, timeout: float = 150) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "crawltop.cli", *args,
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


def check_once(records: list[dict], site, base: str) -> None:
    """Every URL of the site recorded exactly once, the script-built pages found as pages,
    and each URL requested once at the server (the shared script at most once per engine)."""
    urls = Counter(r["url"] for r in records)
    assert [u for u, n in urls.items() if n > 1] == []
    assert set(urls) == {base + p for p in site.routes}, sorted(set(urls) ^ {base + p for p in site.routes})
    kinds = {r["url"]: (r["kind"], r["status"]) for r in records}
    assert all(kinds[base + p] == ("page", 200) for p in spa_paths())  # found only through rendered links
    assert kinds[base + "/img/logo.png"] == ("requisite", 200)  # loaded by every page, recorded once
    again = {p: site.hits.get(p, 0) for p in site.routes if site.hits.get(p, 0) != 1 and p != SHARED_SCRIPT}
    assert again == {}
    assert 1 <= site.hits.get(SHARED_SCRIPT, 0) <= ENGINES, site.hits


@pytest.mark.redis
async def test_a_claim_answers_yes_to_one_engine_and_its_record_reaches_the_stream(redis_url):
    config = CrawlConfig(roots=("http://127.0.0.1:9/",))
    a, b = cluster.frontier(redis_url, "claims", config), cluster.frontier(redis_url, "claims", config)
    urls = [f"http://127.0.0.1:9/img/{i}.png" for i in range(40)]
    first = [await a.claim(u) for u in urls[:10]]
    won_a, won_b = await asyncio.gather(asyncio.gather(*(a.claim(u) for u in urls)),
                                        asyncio.gather(*(b.claim(u) for u in urls)))
    won_a[:10] = first
    assert [x + y for x, y in zip(won_a, won_b, strict=True)] == [1] * len(urls)  # one engine each
    assert not any(await asyncio.gather(*(b.claim(u) for u in urls)))  # never twice
    assert all(a.seen(u) and b.seen(u) for u in urls)  # seen on both sides: no link queues it again

    mine = [u for u, won in zip(urls, won_a, strict=True) if won]
    for u in mine:  # a claimed URL has no lease: its Record goes to the stream on its own
        a.sink.write(Record(url=u, status=200, kind="requisite"))
    await a.flush()
    r = sync_redis(redis_url)
    assert recorded_by(r, "claims") == {a.proc: len(mine)}
    assert int(r.hget(Keys("claims").count, "records") or 0) == len(mine)

    capped = cluster.frontier(redis_url, "capped", CrawlConfig(roots=config.roots, max_pages=3))
    got = [await capped.claim(u) for u in urls[:5]]
    assert got == [True, True, True, False, False]  # --max-pages holds for claims as for links
    assert not capped.seen(urls[3])  # refused by the cap: never seen, never recorded
    other = cluster.frontier(redis_url, "capped", CrawlConfig(roots=config.roots, max_pages=3))
    assert not await other.claim(urls[4])  # the cap is the crawl's, whichever engine asks
    r.close()
    for f in (a, b, capped, other):
        await f.close()


@pytest.mark.chromium
@pytest.mark.redis
async def test_processes_2_with_the_browser_record_each_url_once(serve, redis_url, rundir, tmp_path: Path):
    site = await serve(spa_site())
    out = tmp_path / "out.jsonl"
    rc, text, err = await cli("crawl", site.url + "/", "--browser", "--browser-quiet", QUIET, "--processes", "2",
                              "--redis", redis_url, "--name", "spa", "-c", "1", "--headless", "--no-robots",
                              "--no-sitemaps", "-o", str(out))
    assert rc == 0, err[-3000:]
    check_once([json.loads(line) for line in out.read_text().splitlines()], site, site.url)
    r = sync_redis(redis_url)
    assert len(recorded_by(r, "spa")) == 2  # both engines recorded pages and what their tabs loaded
    r.close()


@pytest.mark.chromium
async def test_crawl_redis_and_join_each_run_chromium_and_status_sums_them(serve, redis_url, rundir, tmp_path):
    release = asyncio.Event()
    routes = spa_site()
    routes["/p/9"] = held(release, routes["/p/9"])  # the crawl lasts until the status was read
    site = await serve(routes)
    common = ("--headless", "-c", "1")
    first = asyncio.ensure_future(cli("crawl", site.url + "/", "--browser", "--browser-quiet", QUIET, "--redis",
                                      redis_url, "--name", "spj", "--no-robots", "--no-sitemaps", *common))
    r = cluster.client(redis_url)
    await wait_value(lambda: r.exists(Keys("spj").meta), bool)  # a join needs the crawl made first
    await r.aclose()
    second = asyncio.ensure_future(cli("join", "spj", "--redis", redis_url, *common))

    async def status() -> dict:
        rc, text, err = await cli("ctl", "spj", "--redis", redis_url, "status", timeout=30)
        return json.loads(text) if rc == 0 else {"error": err}

    try:
        s = await wait_value(status, lambda s: len(s.get("processes", ())) == 2 and (s.get("browser") or {})
                             .get("memory", 0) > 0 and all(p.get("browser") for p in s["processes"]), 60, 0.3)
        row = RedisCrawl("spj")  # the dashboard's row of it (`crawltop --redis URL`)
        r = cluster.client(redis_url)
        await row.read(r, 0.0)
        await r.aclose()
        assert row.summary is not None and row.summary.browser["memory"] > 0
        assert row.summary.browser["memory_limit"] == 2 * per_engine_limit(s)
    finally:
        release.set()
    per = [p["browser"] for p in s["processes"]]  # each engine its own Chromium
    assert s["browser"]["memory"] >= max(b["memory"] for b in per) and s["browser"]["restarts"] == 0
    assert s["browser"]["memory_limit"] == sum(b["memory_limit"] for b in per) > 0
    for done in (first, second):
        rc, text, err = await done
        assert rc == 0, err[-3000:]
    out = tmp_path / "spj.jsonl"
    rc, text, err = await cli("export", "--redis", redis_url, "spj", "--jsonl", str(out))
    assert rc == 0, err
    check_once([json.loads(line) for line in out.read_text().splitlines()], site, site.url)
    r = sync_redis(redis_url)
    assert len(recorded_by(r, "spj")) == 2
    r.close()


@pytest.mark.redis
async def test_a_join_of_a_browser_crawl_checks_its_own_machines_chromium(redis_url) -> None:
    """A joined engine runs the crawl's browser too: without one it is refused in one line
    (exit 2) as `crawl --browser` is; --browser-path names this machine's."""
    await start(redis_url, "tabs", CrawlConfig(roots=("http://127.0.0.1:9/",), browser=True,
                                               browser_path="/elsewhere/chromium"))
    await start(redis_url, "plain", CrawlConfig(roots=("http://127.0.0.1:9/",)))
    for name, extra, said in (("tabs", ("--browser-path", "/no/such/chromium"),
                               "--browser-path /no/such/chromium: not an executable file"),
                              ("plain", ("--browser-path", "/usr/bin/true"), "was not made with --browser")):
        rc, text, err = await cli("join", name, "--redis", redis_url, "--headless", *extra, timeout=60)
        assert rc == 2 and err.count("\n") == 1 and said in err, err


async def _png(request: web.Request) -> web.StreamResponse:
    return web.Response(body=PNG, content_type="image/png")


@pytest.mark.chromium
@pytest.mark.redis
async def test_two_engines_tabs_take_their_hosts_turns_in_redis(serve, redis_url, rundir, tmp_path: Path):
    """--processes 2 --delay 0.4, one host: the pages both engines' workers fetch and the
    images their tabs load all take the host's turns in Redis (scripts.py TURN, POP), so the
    server's stamps hold the gap whichever engine sent them (read as the single-engine turns
    test reads them: a loaded machine stamps late, shortening the gap after a late stamp)."""
    pages = [f"/p{n}" for n in range(4)]
    routes = {"/": page(*pages)} | {p: page(extra="".join(f'<img src="{p}/i{k}.png">' for k in range(3)))
                                     for p in pages} | {f"{p}/i{k}.png": _png for p in pages for k in range(3)}
    site: Site = await serve(routes)
    out = tmp_path / "out.jsonl"
    rc, text, err = await cli("crawl", site.url + "/", "--browser", "--browser-quiet", QUIET, "--processes", "2",
                              "--redis", redis_url, "--name", "turns", "-c", "1", "--headless", "--no-robots",
                              "--no-sitemaps", "--delay", "0.4", "-o", str(out))
    assert rc == 0, err[-3000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["url"]: r["status"] for r in records} == {site.url + p: 200 for p in routes}
    assert len(site.times) == len(routes), site.times  # each URL once
    r = sync_redis(redis_url)
    assert len(recorded_by(r, "turns")) == 2  # both engines fetched
    r.close()
    times = sorted(t for t, _ in site.times)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert sum(gaps) >= 0.4 * len(gaps) - 0.1, (gaps, site.times)
    assert statistics.median(gaps) >= 0.4 - 0.03, (gaps, site.times)
    # A request leaves at most `late` after its turn was granted (Chromium's network stack, a
    # loaded machine; seen: gaps of 0.675, 0.391, 0.277 as one lateness lasted a few
    # requests), and turns are granted 0.4 s apart: every pair of stamps is as many delays
    # apart, less `late`. A turn granted twice puts two stamps together.
    late = 0.35
    for j in range(1, len(times)):
        for k in range(j):
            assert times[j] - times[k] >= 0.4 * (j - k) - late, (k, j, gaps, site.times)


@pytest.mark.redis
async def test_a_tabs_turn_in_redis_waits_for_the_hosts_gap_and_cap(redis_url) -> None:
    """The TURN script on the scheduler's own clock (ms given, as the policy tests give it):
    granted when due and under --per-host, moving the next-allowed time on by the delay as
    POP does; else how long until due, and whether the cap is what holds it; a paused host
    refused; a Crawl-delay the tab's rules read is the host's delay from then on."""
    now = 1_700_000_000_000
    r = aioredis.Redis.from_url(redis_url)
    f = RedisFrontier(r, Keys("turn"), "proc-1")
    f.hosts.configure(Politeness(delay=0.4, per_host=1))
    turn, hostctl = r.register_script(scripts.TURN), r.register_script(scripts.HOSTCTL)
    end = r.register_script(scripts.TURN_END)

    async def ask(at: int, lent: int = 0, crawl_delay: object = "") -> list[int]:
        return [int(x) for x in await turn(keys=f.std_keys(), args=f.std_args("t.test", lent, crawl_delay, 30_000,
                                                                                now_ms=at))]

    async def give_back(at: int) -> None:
        await end(keys=f.std_keys(), args=f.std_args("t.test", now_ms=at))
    try:
        await r.hset(Keys("turn").meta, "status", "running")
        assert await ask(now) == [1, 0, 1]
        assert int(await r.hget(Keys("turn").h("t.test"), "n")) == now + 400
        assert await ask(now + 100) == [0, 300, 0]  # its gap: 300 ms to go, and the tab's request holds the slot
        assert await ask(now + 400) == [0, 0, 0]  # due, but that tab request still holds the one slot
        await give_back(now + 400)
        await r.hset(Keys("turn").h("t.test"), "f", 1)  # a worker's leased page fetch there
        assert await ask(now + 400) == [0, 0, 0]
        assert await ask(now + 400, lent=1) == [1, 0, 1]  # the page's own slot, lent to its tab
        await give_back(now + 800)
        assert await ask(now + 800, lent=1, crawl_delay=1000) == [1, 0, 1]
        assert int(await r.hget(Keys("turn").h("t.test"), "n")) == now + 800 + 1000  # Crawl-delay 1 s
        await hostctl(keys=f.std_keys(Keys("turn").hq("t.test"), Keys("turn").h("t.test")),
                      args=f.std_args("pause", "t.test", now_ms=now))
        assert (await ask(now + 5000, lent=1))[0] == -1
    finally:
        await r.aclose()
