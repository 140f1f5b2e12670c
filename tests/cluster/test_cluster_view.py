"""The monitor of a shared crawl: two real engines on one real redis-server, watched by a
ClusterView in the real app (Pilot): a processes panel with both, merged totals equal
to what Redis holds, whole-crawl and per-process control through Redis."""
from __future__ import annotations

import asyncio

import pytest
from support.cluster import engines, slow_tree, tree
from support.crawl import crawl
from support.sites import held
from support.wait import until, wait_until, wait_value

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.combine import merge
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.member import Member
from crawltop.core.cluster.view import ClusterView
from crawltop.tui.app import CrawlApp

pytestmark = pytest.mark.timeout(90)


async def test_merge_adds_up_real_snapshots(serve):
    site = await serve(tree(20))
    a, _ = await crawl(site.url)
    b, _ = await crawl(site.url, max_depth=1)
    sa, sb = a.stats.snapshot(), b.stats.snapshot()
    m = merge([sa, sb], state="RUNNING", queued=7, seen=9, in_flight=1)
    assert m.pages == sa.pages + sb.pages and m.records == sa.records + sb.records
    assert m.statuses[200] == sa.statuses[200] + sb.statuses[200]
    assert (m.queued, m.seen, m.in_flight) == (7, 9, 1)
    host = m.hosts[0]
    # a host row with its queue state is the whole crawl's (read from Redis, the hosts' one home): the
    # fresher one is shown, not a sum (here: the fuller crawl's)
    assert host.done == max(sum(h.done for h in sa.hosts), sum(h.done for h in sb.hosts))
    assert len(m.recent_merges) == len(sa.recent_merges) + len(sb.recent_merges)
    assert [e.seq for e in m.recent_merges] == list(range(len(m.recent_merges)))


async def test_monitor_shows_both_processes_and_steers_them(serve, redis_url):
    """The crawl must outlast the monitor's steps however slow the machine: /p1 (and the
    half of the tree only it links to) is held until the steps are done, so both engines are
    there, one of them waiting on it, for as long as the test needs."""
    routes = tree(400)
    release = asyncio.Event()
    routes["/p1"] = held(release, routes["/p1"])
    site = await serve(routes)
    members = await engines(redis_url, "mon", CrawlConfig(roots=(site.url,), concurrency=2), 2)
    r = cluster.client(redis_url)
    running = asyncio.gather(*(m.crawl() for m in members))
    view = ClusterView(r, "mon", [site.url])
    app = CrawlApp(view, refresh_hz=8)
    async with app.run_test(size=(120, 40)) as pilot:
        try:
            await until(pilot, lambda: len(app.processes_panel.table.row_keys()) == 2, 30)
        except AssertionError:  # say what the monitor saw
            raise AssertionError(f"rows {view.rows!r}, problem {view.problem!r}, down {view.down}, "
                                 f"status {view.status}, engines {[m.stats.state for m in members]}") from None
        procs = {m.frontier.proc for m in members}
        assert set(app.processes_panel.table.row_keys()) == procs
        for proc in procs:
            cells = app.processes_panel.table.cells_of(proc)
            assert cells[1][0] == proc.split(":")[1] and cells[2][0] in ("RUNNING", "PAUSED")
        # an ignore typed in a monitor with no engine reaches every engine
        assert (await view.add_ignore(r"/p19[0-9]$")).ok
        assert not (await view.add_ignore(r"/p19[0-9]$")).ok
        await until(pilot, lambda: all(r"/p19[0-9]$" in m.ignore_rules for m in members), 10)
        # whole-crawl pause, through Redis, reaches both engines
        await pilot.press("p")
        await until(pilot, lambda: all(m.paused for m in members), 10)
        await until(pilot, lambda: app.crawler.stats.state == "PAUSED", 10)
        await pilot.press("p")
        await until(pilot, lambda: not any(m.paused for m in members), 10)
        # one process: select its row, P pauses only it
        app.processes_panel.table.focus()
        await pilot.pause()
        target = app.processes_panel.table.selected_key()
        await pilot.press("P")
        one = next(m for m in members if m.frontier.proc == target)
        other = next(m for m in members if m.frontier.proc != target)
        await until(pilot, lambda: one.paused, 10)
        assert not other.paused
        await pilot.press("R")
        await until(pilot, lambda: not one.paused, 10)
        assert not running.done()  # held by /p1 all along
        release.set()
        await asyncio.wait_for(asyncio.shield(running), 60)
        await until(pilot, lambda: app.crawler.stats.state == "DONE", 10)
        records = int(await r.hget(Keys("mon").count, "records"))
        assert records == int(await r.hget(Keys("mon").count, "seen")) <= len(routes)  # one each; some never queued
        assert app.crawler.stats.snapshot().queued == 0
        assert app.processes_panel.table.row_keys() == []  # both left: no row, none lost
    await r.aclose()


async def test_a_silent_process_is_shown_lost_with_its_leases_running_out(redis_url):
    from crawltop.core.cluster.frontier import RedisFrontier
    from crawltop.core.queueing.frontier import Item

    config = CrawlConfig(roots=("http://127.0.0.1:9/",))
    r = cluster.client(redis_url)
    await cluster.start(r, redis_url, "lost", config)
    ghost = RedisFrontier(cluster.client(redis_url), Keys("lost"), "ghost:4242:0", lease=4)
    member = Member(Crawler(config, frontier=ghost), ghost)
    ghost.add(Item("http://127.0.0.1:9/", 10, 0))
    await ghost.pop()
    await member.beat()  # one heartbeat, then silence: as a kill -9 would leave it
    view = ClusterView(r, "lost", list(config.roots), lease=1.0)
    await view.read()
    assert [row.lost for row in view.processes()] == [False]

    async def rows():
        await view.read()
        return view.processes()

    # silent for more than the view's lease (1 s, on Redis's clock): lost
    (row,) = await wait_value(rows, lambda rows: rows[0].lost, 10, interval=0.05)
    assert row.lost and row.leases == 1 and row.info.pid == 4242
    assert 1.0 < row.lease_left < 3.0  # counting down toward the reap
    app = CrawlApp(view)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.processes_panel.table.row_keys() == ["ghost:4242:0"], 5)
        cells = app.processes_panel.table.cells_of("ghost:4242:0")
        assert cells[2][0] == "LOST" and cells[7][0].startswith("1 back in")
        view.detach()
    await ghost.close()
    await r.aclose()


async def test_merged_rings_keep_their_seqs_from_frame_to_frame(serve):
    """A panel appends events newer than its last seq: merged events must keep theirs."""
    from crawltop.core.cluster.combine import Rings

    site = await serve(tree(20))
    a, _ = await crawl(site.url)
    b, _ = await crawl(site.url)
    rings = Rings()
    rings.absorb("a", a.stats.snapshot())
    first = rings.current()["recent_merges"]
    rings.absorb("b", b.stats.snapshot())
    rings.absorb("a", a.stats.snapshot())  # nothing new from a: nothing added
    second = rings.current()["recent_merges"]
    assert second[:len(first)] == first
    assert len(second) == len(a.stats.snapshot().recent_merges) + len(b.stats.snapshot().recent_merges)
    assert [e.seq for e in second] == sorted({e.seq for e in second})


async def test_foreign_rows_in_redis_do_not_kill_the_monitor(redis_url):
    """A process row that is not JSON (someone else's write): a notice, and the monitor
    goes on reading."""
    config = CrawlConfig(roots=("http://127.0.0.1:9/",))
    r = cluster.client(redis_url)
    await cluster.start(r, redis_url, "bad", config)
    await r.hset(Keys("bad").procs, "x:1:0", "not json")
    view = ClusterView(r, "bad", list(config.roots))
    poll = asyncio.ensure_future(view._poll())
    await wait_until(lambda: view.problem, 5, interval=0.05, what="a notice")
    assert "unreadable data in Redis" in view.problem and view.stats.snap.notice == view.problem
    await r.hdel(Keys("bad").procs, "x:1:0")
    await wait_until(lambda: not view.problem, 5, interval=0.05, what="the notice gone")
    assert view.problem == "" and not poll.done()
    poll.cancel()
    await r.aclose()


async def test_totals_outlive_the_processes(serve, redis_url):
    """A monitor that watched the crawl keeps what the processes did after they leave (their
    snapshots go with them): the end of the crawl reads its pages, not 0."""
    site = await serve(slow_tree(60, 0.02))
    members = await engines(redis_url, "gone", CrawlConfig(roots=(site.url,), concurrency=2), 2)
    r = cluster.client(redis_url)
    view = ClusterView(r, "gone", [site.url])
    running = asyncio.gather(*(m.crawl() for m in members))
    await wait_value(view.read, lambda _: running.done(), 60, interval=0.1)  # a monitor reading as it goes
    await running
    await view.read()
    snap = view.stats.snapshot()
    assert view.rows == [] and snap.state == "DONE"
    assert snap.records == sum(m.stats.records for m in members) == view.records == 64
    assert snap.pages == sum(m.stats.pages for m in members)
    assert snap.busy == 0 and snap.workers == ()
    await r.aclose()
