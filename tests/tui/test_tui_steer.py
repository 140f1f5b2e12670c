"""Steering from the keyboard (ignores, seeds, hosts), with Pilot against real crawls of real local
servers: a trap spotted in the queue view and ignored from there, refused patterns,
the ignores screen, adding a seed, pausing a host from the hosts panel."""
from __future__ import annotations

import asyncio

import pytest
from support.crawl import ListSink
from support.sites import held_site, page, slow_site
from support.trapsite import start_trap
from support.wait import until
from textual.widgets import Input, Static

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.monitor.queueview import suggest
from crawltop.tui.app import CrawlApp
from crawltop.tui.panels.summary import SummaryScreen
from crawltop.tui.screens.steer import IgnoresScreen, QueueScreen, TextPrompt

pytestmark = pytest.mark.timeout(60)


def make(url: str, **options: object) -> tuple[Crawler, ListSink, CrawlApp]:
    options.setdefault("robots", False)
    options.setdefault("timeout", 5.0)
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(url,), **options), sinks=[sink])  # type: ignore[arg-type]
    return crawler, sink, CrawlApp(crawler, refresh_hz=10)


@pytest.mark.timeout(150)
async def test_trap_spotted_in_the_queue_view_and_ignored_from_there() -> None:
    site = await start_trap()
    try:
        crawler, sink, app = make(site.url + "/", concurrency=4)
        crawler.steering.queue_stats.epoch = 1.0  # judge prefixes after a second, not half a minute
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: any(t.reason == "self-feeding" for t in crawler.steering.queue_view().traps),
                        60)
            await until(pilot, lambda: app.trap_warning.display and "self-feeding" in app.trap_warning.plain, 20)
            await pilot.press("u")
            await until(pilot, lambda: isinstance(app.screen, QueueScreen))
            screen = app.screen
            trap = screen.selected_target()
            assert trap == screen.view.prefixes[0].prefix and trap.endswith("/cal/")
            await until(pilot, lambda: "⚠" in screen.prefixes.line_of("0"))  # flagged in the view
            crawler.pause()  # hold the queue still while we compare sizes
            await until(pilot, lambda: crawler.stats.snapshot().busy == 0)  # fetches in flight done
            await pilot.press("i")
            await until(pilot, lambda: isinstance(app.screen, TextPrompt) and isinstance(app.screen.focused, Input))
            inp = app.screen.query_one(Input)
            assert inp.value == suggest(trap) == r"^https?://127\.0\.0\.1:" + site.url.rsplit(":", 1)[1] + "/cal/"
            before = crawler.frontier.size
            cal = crawler.steering.queue_stats.p1.get(trap)
            await pilot.press("enter")
            await until(pilot, lambda: not isinstance(app.screen, TextPrompt))
            assert crawler.frontier.size == before - cal  # at once: every calendar URL left the queue
            if isinstance(app.screen, QueueScreen):  # else the queue held only the calendar: done
                await until(pilot, lambda: screen.view.queued == crawler.frontier.size)  # the view shows it
            crawler.resume()
            await until(pilot, lambda: isinstance(app.screen, SummaryScreen), 60)  # the crawl finished
        ignored = [r for r in sink.records if r.error_kind == "ignored"]
        assert len(ignored) == cal and all(r.error == f"Ignored: {suggest(trap)}" for r in ignored)
        assert len(sink.records) == len({r.url for r in sink.records}) == crawler.frontier.seen_count
    finally:
        await site.stop()


async def test_invalid_and_unsupported_patterns_are_refused_in_the_prompt(serve) -> None:
    release = asyncio.Event()  # the leaves answer only at the end: the crawl outlasts the test
    site = await serve(held_site(3, release))
    crawler, sink, app = make(site.url + "/", concurrency=3, timeout=120.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(sink.records) >= 1)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, TextPrompt) and isinstance(app.screen.focused, Input))
        for bad, why in (("(a", "bad regex"), ("x(?=y)", "RE2 lacks")):
            app.screen.query_one(Input).value = bad
            await pilot.press("enter")
            await pilot.pause(0.1)
            assert isinstance(app.screen, TextPrompt) and why in (app.screen.refusal or "")
            assert why in str(app.screen.query_one("#prompt-error", Static).render())
        assert crawler.steering.ignores() == ()
        app.screen.query_one(Input).value = "/p1$"
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, TextPrompt))
        assert [r.pattern for r in crawler.steering.ignores()] == ["/p1$"]
        await pilot.press("I")
        await until(pilot, lambda: isinstance(app.screen, IgnoresScreen))
        assert app.screen.table.row_keys() == ["/p1$"]
        await pilot.press("delete")
        await until(pilot, lambda: crawler.steering.ignores() == ())
        assert app.screen.table.row_keys() == []
        crawler.stop()
        release.set()


async def test_a_adds_a_seed_and_refuses_a_bad_url(serve) -> None:
    release = asyncio.Event()  # a's leaves answer once the seed is in: the crawl lasts until then
    a = await serve(held_site(2, release))
    b = await serve({"/": page("/b1"), "/b1": page()})
    crawler, sink, app = make(a.url + "/", concurrency=2, timeout=120.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(sink.records) >= 1)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, TextPrompt) and isinstance(app.screen.focused, Input))
        app.screen.query_one(Input).value = "ftp://example.com/"
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert isinstance(app.screen, TextPrompt) and "not an http(s) URL" in (app.screen.refusal or "")
        app.screen.query_one(Input).value = b.url + "/"
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, TextPrompt))
        release.set()
        await until(pilot, lambda: isinstance(app.screen, SummaryScreen))
    assert {b.url + "/", b.url + "/b1"} <= {r.url for r in sink.records if r.status == 200}


async def test_h_pauses_the_selected_host_in_the_hosts_panel(serve) -> None:
    site = await serve(slow_site(30, 0.2))
    crawler, sink, app = make(site.url + "/", concurrency=2)
    host = site.url.split("//")[1]
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.breakdown.hosts.row_keys() == [host])
        app.breakdown.hosts.focus()
        await pilot.pause(0.05)
        await pilot.press("h")
        await until(pilot, lambda: host in crawler.steering.paused_hosts())
        await until(pilot, lambda: app.breakdown.hosts.cells_of(host)[0][0].startswith("⏸"))
        done = len(sink.records)
        await pilot.pause(0.8)  # fetches in flight finish, no new one starts
        assert len(sink.records) <= done + 2
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TextPrompt) and isinstance(app.screen.focused, Input))
        app.screen.query_one(Input).value = "0.05"
        await pilot.press("enter")
        await until(pilot, lambda: app.breakdown.hosts.cells_of(host)[0][0].endswith("⏱0.05s"))
        await pilot.press("h")
        await until(pilot, lambda: isinstance(app.screen, SummaryScreen), 30)
    assert len(sink.records) == 31 and all(r.status == 200 for r in sink.records)


async def test_ignores_screen_shows_each_patterns_set_and_turns_a_set_on() -> None:
    """Curated ignore sets, live: `I` lists the global set's patterns with their set; `s` then a set's name
    turns it on live: its queued calendar URLs leave the queue, each with its record."""
    from support.ignoresite import start_ignore_site

    site = await start_ignore_site()
    try:
        crawler, sink, app = make(site.url + "/", concurrency=1, delay=0.05, sitemaps=False, ignore_sets=("global",))
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: any("/cal/" in i.url for i in crawler.frontier.peek(50)), 30)
            crawler.pause()  # a queued /cal/ URL stays queued for the set to drop (a busy machine fetched it first)
            await pilot.press("I")
            await until(pilot, lambda: isinstance(app.screen, IgnoresScreen))
            screen = app.screen
            await until(pilot, lambda: "global" in screen.table.line_of("%25252525"))
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, TextPrompt) and isinstance(app.screen.focused, Input))
            app.screen.query_one(Input).value = "blogs"
            await pilot.press("enter")
            await until(pilot, lambda: not isinstance(app.screen, TextPrompt))
            assert "blogs" in crawler.steering.ignore_rules.enabled_sets()
            assert not any("/cal/" in i.url for i in crawler.frontier.peek(50))
            crawler.stop()
    finally:
        await site.stop()
    assert any("(ignore set blogs)" in (r.error or "") for r in sink.records)
