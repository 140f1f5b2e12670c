"""Layout, refresh loop and rendering rules of the TUI: resizing, NO_COLOR, row diffing,
a refresh timer that never overlaps itself, errors that don't scroll away, stuck workers,
and run_tui_async end to end on the demo site."""
from __future__ import annotations

import asyncio
import dataclasses
import re
import time

import pytest
from support.crawl import ListSink
from support.frozen import ROOT, FrozenCrawler, sample_snapshot
from support.sites import slow_site
from support.wait import until

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.monitor.stats import ErrorEvent, WorkerView
from crawltop.demo.site import DemoSite
from crawltop.tui import fmt
from crawltop.tui.app import CrawlApp, run_tui_async
from crawltop.tui.panels.workers import stuck_workers

pytestmark = pytest.mark.timeout(30)






async def test_resize_down_to_40x12_and_back_during_a_crawl(serve) -> None:
    site = await serve(slow_site(300, 0.02))
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), concurrency=6, robots=False), sinks=[sink])
    app = CrawlApp(crawler, refresh_hz=10)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: crawler.stats.pages >= 5)
        for size in [(40, 12), (20, 6), (120, 40), (40, 12), (200, 60), (80, 24)]:
            await pilot.resize_terminal(*size)
            await pilot.pause(0.15)
            assert app.size == size
            assert app.is_running
        frames = app.frames
        await until(pilot, lambda: app.frames > frames + 2)  # still refreshing
        await until(pilot, lambda: app.crawl_task is not None and app.crawl_task.done(), 20)
    assert len(sink.records) == 301


async def _colours() -> set[str]:
    app = CrawlApp(FrozenCrawler())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        svg = app.export_screenshot()
    colours = set(re.findall(r"fill=\"#([0-9a-f]{6})\"", svg)) | set(re.findall(r"fill: #([0-9a-f]{6})", svg))
    return {c for c in colours if not c[0:2] == c[2:4] == c[4:6]}  # drop the greys


# The SVG's own window chrome: traffic-light dots and the default foreground.
CHROME = {"ff5f57", "febc2e", "28c840", "c5c8c6"}


async def test_no_color_is_respected(monkeypatch) -> None:
    assert len(await _colours() - CHROME) > 5  # normally: states, phases, sparklines in colour
    monkeypatch.setenv("NO_COLOR", "1")
    assert await _colours() <= CHROME  # NO_COLOR: only greys on the screen


async def test_tables_are_diffed_never_rebuilt() -> None:
    """Same data frame after frame: no row added or removed, no cell rewritten."""
    app = CrawlApp(FrozenCrawler(), refresh_hz=20)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.frames >= 10)
        table = app.workers_table
        assert table.rows_added == 10 and table.rows_removed == 0 and table.cell_updates == 0
        assert app.errors_panel.table.rows_added == 5  # the frozen crawl has 5 failed URLs
        assert app.merges_panel.table.rows_added == 4


async def test_live_crawl_updates_cells_not_rows(serve) -> None:
    site = await serve(slow_site(150, 0.02))
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), concurrency=4, robots=False))
    app = CrawlApp(crawler, refresh_hz=20)
    async with app.run_test() as pilot:
        await until(pilot, lambda: app.frames >= 15 and crawler.stats.pages >= 30)
        table = app.workers_table
        assert table.rows_added == 4 and table.rows_removed == 0  # one row per worker, ever
        assert table.cell_updates > 0
        crawler.stop()
        await until(pilot, lambda: app.crawl_task is not None and app.crawl_task.done(), 10)


async def test_refresh_timer_never_overlaps_itself(monkeypatch) -> None:
    app = CrawlApp(FrozenCrawler(), refresh_hz=20)
    original = app.refresh_now
    active = 0
    overlaps = 0

    def slow_refresh():
        nonlocal active, overlaps
        active += 1
        overlaps += active > 1
        time.sleep(0.1)  # a frame slower than the 50 ms period
        try:
            return original()
        finally:
            active -= 1

    monkeypatch.setattr(app, "refresh_now", slow_refresh)
    async with app.run_test() as pilot:
        start = app.frames
        await pilot.pause(1.0)
        frames = app.frames - start
    assert overlaps == 0
    assert frames <= 9  # re-armed after each 100 ms frame: at most ~1 / (0.1 + 0.05) per second


def _with_errors(n: int):
    snap = sample_snapshot()
    errs = tuple(ErrorEvent(i, float(i), f"{ROOT}/e/{i}", "TimeoutError", "slow", 1) for i in range(1, n + 1))
    return dataclasses.replace(snap, recent_errors=errs, errors=n, errors_by_kind={"TimeoutError": n})


async def test_new_errors_do_not_scroll_away_what_is_being_read() -> None:
    crawler = FrozenCrawler()
    count = 20
    crawler.make_snapshot = lambda state: _with_errors(count)  # type: ignore[method-assign]
    app = CrawlApp(crawler, refresh_hz=20)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.errors_panel.table
        await until(pilot, lambda: table.row_count == 20)
        assert table.selected_key() == "20"  # following the newest while not focused
        table.focus()
        await pilot.press("up", "up", "up")
        reading = table.selected_key()
        assert reading == "17"
        scroll = table.scroll_y
        count = 30
        await until(pilot, lambda: table.row_count == 30)
        await pilot.pause(0.1)
        assert table.selected_key() == reading and table.scroll_y == scroll  # nothing moved
        await pilot.press("end")
        count = 35
        await until(pilot, lambda: table.row_count == 35)
        assert table.selected_key() == "35"  # back at the bottom: following again


def test_stuck_worker_stands_out() -> None:
    def w(i: int, t: float, phase: str = "reading") -> WorkerView:
        return WorkerView(i, phase, f"{ROOT}/{i}", "h", t, 1, False)

    assert stuck_workers([w(1, 0.3), w(2, 0.5), w(3, 42.0), w(4, 0.2)]) == {3}
    assert stuck_workers([w(1, 6.0), w(2, 7.0), w(3, 8.0)]) == set()  # all slow: none stands out
    assert stuck_workers([w(1, 4.0), w(2, 0.1)]) == set()  # under 5 s is never stuck
    assert stuck_workers([w(1, 42.0), w(2, 0.1, "waiting")], {"h": 200.0}) == {1}  # alone: vs host latency
    assert stuck_workers([w(1, 42.0)], {"h": 20_000.0}) == set()


def test_untrusted_text_helpers() -> None:
    t = fmt.safe("/[bold]x[/bold]\x1b[31m")
    assert t.plain == "/[bold]x[/bold]?[31m" and not t.spans
    assert fmt.display_url("http://www.example.com/a?b=1", fmt.home_hosts(["https://example.com/"])) == "/a?b=1"
    assert fmt.display_url("http://other.org/a", fmt.home_hosts(["https://example.com/"])) == "other.org/a"
    assert fmt.duration(3725) == "1:02:05" and fmt.duration(65) == "1:05"
    assert fmt.compact(12_345) == "12.3k" and fmt.human_bytes(2048) == "2.0 KB"


@pytest.mark.timeout(60)
async def test_run_tui_async_exits_on_finish_with_every_record() -> None:
    async with DemoSite(fast=True) as site:
        sink = ListSink()
        crawler = Crawler(CrawlConfig(roots=(site.url,), concurrency=20, timeout=5.0), sinks=[sink])
        code = await asyncio.wait_for(run_tui_async(crawler, exit_on_finish=True, headless=True), 50)
    assert code == 0
    assert crawler.stats.state == "DONE" and sink.closed
    assert len(sink.records) == crawler.frontier.seen_count


async def test_80x24_keeps_q_and_tells_cut_rows_apart() -> None:
    """A key bar that means what it says: at 80x24 `q Quit` stays on the key bar, and error rows whose URLs share a
    long prefix show where they differ (a middle ellipsis), not the same cut prefix."""
    crawler = FrozenCrawler()
    base = f"{ROOT}/private/reports/2026/quarterly/finance-department-summary"
    errs = tuple(ErrorEvent(i, float(i), f"{base}-{name}.pdf", "connection refused", "refused", 1, None, "connect")
                 for i, name in enumerate(("alpha", "beta", "gamma"), 1))
    snap = dataclasses.replace(sample_snapshot(), recent_errors=errs, errors=3, errors_by_kind={"connect": 3})
    crawler.make_snapshot = lambda state: snap  # type: ignore[method-assign]
    app = CrawlApp(crawler, refresh_hz=20)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.errors_panel.table
        await until(pilot, lambda: table.row_count == 3)
        await pilot.pause(0.2)
        lines = [table.line_of(k) for k in table.row_keys()]
        assert len(set(lines)) == 3, lines
        for line, name in zip(lines, ("alpha", "beta", "gamma"), strict=True):
            assert f"{name}.pdf" in line and "…" in line, line  # the end of the path kept
        keybar = app.screen.query_one("KeyBar").render().plain
        assert keybar.rstrip().endswith("q Quit"), keybar
