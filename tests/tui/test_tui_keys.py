"""Every key of the TUI against a real crawl of a real aiohttp site on 127.0.0.1.

The app runs headless (App.run_test) on the test's loop, the engine runs the crawl on
the same loop, and the assertions look at both the engine and the screen.
"""
from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from support.crawl import ListSink
from support.sites import held, page, slow_site
from support.tui import finished, make
from support.wait import until
from textual.command import CommandList, CommandPalette
from textual.widgets import Input

from crawltop.core import CrawlConfig, Crawler
from crawltop.tui.app import CrawlApp
from crawltop.tui.panels.summary import SummaryScreen
from crawltop.tui.screens.dialogs import ConcurrencyPrompt, ConfirmQuit, ErrorListScreen, HelpScreen, MergeListScreen

pytestmark = pytest.mark.timeout(30)


def footer_keys(app: CrawlApp) -> dict[str, bool]:
    """Actions shown in the footer right now -> enabled."""
    return {b.action: enabled for _, b, enabled, _ in app.screen.active_bindings.values() if b.show}


async def test_p_pauses_new_fetches_and_p_resumes(serve) -> None:
    site = await serve(slow_site(60, 0.05))
    crawler, sink, app = make(site.url + "/", concurrency=4)
    async with app.run_test() as pilot:
        await until(pilot, lambda: sum(site.hits.values()) >= 10)
        assert "pause" in footer_keys(app) and "resume" not in footer_keys(app)
        await pilot.press("p")
        assert crawler.paused and crawler.stats.state == "PAUSED"
        assert app.status_bar.plain.startswith(" PAUSED ")  # shown at once, not at the next tick
        assert "in flight" in app.status_bar.plain
        await pilot.pause(0.2)  # fetches already in flight finish and are recorded
        hits, pages = sum(site.hits.values()), crawler.stats.pages
        await pilot.pause(0.4)
        assert sum(site.hits.values()) == hits and crawler.stats.pages == pages
        keys = footer_keys(app)
        assert "resume" in keys and "pause" not in keys
        await pilot.press("p")
        assert not crawler.paused and crawler.stats.state == "RUNNING"
        await until(pilot, lambda: crawler.stats.pages > pages)
        await finished(pilot, app)
        await until(pilot, lambda: isinstance(app.screen, SummaryScreen))
    assert len(sink.records) == 61 and sum(site.hits.values()) == 61


async def test_plus_minus_and_big_steps_change_workers(serve) -> None:
    site = await serve(slow_site(400, 0.05))
    crawler, sink, app = make(site.url + "/", concurrency=3)
    async with app.run_test() as pilot:
        await until(pilot, lambda: site.in_flight == 3)
        await pilot.press("plus")
        assert crawler.concurrency == 4
        await until(pilot, lambda: site.in_flight == 4)
        await until(pilot, lambda: app.workers_table.row_count == 4)
        await pilot.press("minus", "minus")
        assert crawler.concurrency == 2
        await until(pilot, lambda: len(crawler.stats.snapshot().workers) == 2)
        await until(pilot, lambda: app.workers_table.row_count == 2)
        await pilot.press("right_square_bracket")
        assert crawler.concurrency == 12
        await until(pilot, lambda: app.workers_table.row_count == 12)
        await pilot.press("left_square_bracket")
        assert crawler.concurrency == 2
        for _ in range(3):
            await pilot.press("minus")
        assert crawler.concurrency == 1  # never below one worker
        assert footer_keys(app)["fewer(1)"] is False  # shown, greyed out
        await pilot.press("c")
        assert isinstance(app.screen, ConcurrencyPrompt)
        await pilot.press("1", "6", "enter")
        assert crawler.concurrency == 16 and not isinstance(app.screen, ConcurrencyPrompt)
        await until(pilot, lambda: app.workers_table.row_count == 16)
        await pilot.press("c", "escape")
        assert crawler.concurrency == 16
        await finished(pilot, app)
    assert len(sink.records) == 401  # nothing lost while shrinking and growing


async def test_x_cancels_the_selected_stalled_worker(serve) -> None:
    never = held()

    async def stall_once(request: web.Request) -> web.StreamResponse:
        if site.hits["/stuck"] == 1:
            return await never(request)  # until the worker is cancelled
        return web.Response(text="<p>finally</p>", content_type="text/html")

    routes = slow_site(30, 0.03, {"/": page("/stuck", *[f"/p{i}" for i in range(30)]), "/stuck": stall_once})
    site = await serve(routes)
    crawler, sink, app = make(site.url + "/", concurrency=3)
    stuck = site.url + "/stuck"
    async with app.run_test() as pilot:
        def stuck_worker() -> int | None:
            return next((w.id for w in crawler.stats.snapshot().workers if w.url == stuck), None)

        await until(pilot, lambda: stuck_worker() is not None)
        wid = stuck_worker()
        assert "cancel_worker" in footer_keys(app)
        table = app.workers_table
        # the person sees the worker on /stuck (path in the url column) and selects it
        await until(pilot, lambda: str(wid) in table.row_keys() and table.cells_of(str(wid))[3][0] == "/stuck")
        table.focus()
        while table.selected_worker() != wid:
            await pilot.press("down")
        await pilot.press("x")
        assert crawler.concurrency == 2
        await until(pilot, lambda: str(wid) not in table.row_keys())
        assert wid not in {w.id for w in crawler.stats.snapshot().workers}
        await finished(pilot, app)
    recs = [r for r in sink.records if r.url == stuck]
    assert len(recs) == 1 and recs[0].status == 200 and recs[0].tries == 2  # re-queued, fetched again
    assert len(sink.records) == 32 and site.hits["/stuck"] == 2


async def test_q_asks_then_stops_and_flushes_every_record(serve, tmp_path) -> None:
    site = await serve(slow_site(200, 0.1))
    out = tmp_path / "out.jsonl"
    crawler, sink, app = make(site.url + "/", concurrency=5, output=str(out))
    async with app.run_test() as pilot:
        await until(pilot, lambda: crawler.stats.records >= 10)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("n")  # changed my mind: the crawl goes on
        assert not isinstance(app.screen, ConfirmQuit)
        assert crawler.stats.state == "RUNNING" and not app.crawl_task.done()
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("y")
        await until(pilot, lambda: app.crawl_task.done())
        await pilot.pause(0.1)
    assert app.return_code == 0
    assert sink.closed
    urls = [r.url for r in sink.records]
    assert len(urls) == len(set(urls)) == crawler.frontier.seen_count == 201
    assert len(out.read_text().splitlines()) == 201
    assert any((r.error or "").startswith("Cancelled") for r in sink.records)


async def test_quit_while_paused_and_ctrl_c_ask_too(serve) -> None:
    site = await serve(slow_site(100, 0.05))
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), concurrency=3, robots=False), sinks=[sink])
    app = CrawlApp(crawler, refresh_hz=10)
    async with app.run_test() as pilot:
        await until(pilot, lambda: crawler.stats.records >= 5)
        await pilot.press("p")
        assert crawler.paused
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("escape")
        assert not isinstance(app.screen, ConfirmQuit) and crawler.paused
        await pilot.press("ctrl+c", "ctrl+c")  # twice: ask, then yes
        await until(pilot, lambda: app.crawl_task.done())
        await pilot.pause(0.1)
    assert app.return_code == 0 and sink.closed
    assert len({r.url for r in sink.records}) == len(sink.records) == crawler.frontier.seen_count


async def test_error_and_merge_screens_list_the_right_rows(serve) -> None:
    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=500, text="down")

    async def robots(request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nDisallow: /private/\n")

    def moved(to: str):
        async def handler(request: web.Request) -> web.Response:
            return web.Response(status=301, headers={"Location": to})
        return handler

    routes = {
        "/": page("/a", "/old", "/older", "/broken/1", "/broken/2", "/private/x", "/missing"),
        "/a": page(),
        "/old": moved("/a"),
        "/older": moved("/a"),
        "/broken/1": broken,
        "/broken/2": broken,
        "/robots.txt": robots,
    }
    site = await serve(routes)
    crawler, sink, app = make(site.url + "/", concurrency=3, robots=True, max_tries=2)
    async with app.run_test(size=(100, 30)) as pilot:
        await finished(pilot, app)
        await until(pilot, lambda: isinstance(app.screen, SummaryScreen) and bool(app.screen.query("#summary-text")))
        summary = str(app.screen.query_one("#summary-text").render())
        assert "DONE" in summary and "Top error URLs" in summary and "/broken/1" in summary

        await pilot.press("e")
        screen = app.screen
        assert isinstance(screen, ErrorListScreen)
        rows = [screen.table.cells_of(k) for k in screen.table.row_keys()]
        got = sorted((c[2][0], c[4][0]) for c in rows)
        assert got == sorted([  # paths: the root's host is named in the heading; reasons in words
            ("HTTP 500 after 2 tries", "/broken/1"),
            ("HTTP 500 after 2 tries", "/broken/2"),
        ])  # /private/x, blocked by robots.txt, is skipped: not an error (core/outcomes.py)
        assert crawler.stats.errors == 2 and crawler.stats.tally.counts["skipped"] == 1
        filt = screen.query_one("#error-list-filter")
        filt.focus()
        await pilot.press(*"broken/2")
        assert [screen.table.cells_of(k)[4][0] for k in screen.table.row_keys()] == ["/broken/2"]
        await pilot.press("ctrl+l")
        assert screen.table.row_count == 2
        await pilot.press("escape")  # back to the summary
        assert isinstance(app.screen, SummaryScreen)

        await pilot.press("r")
        screen = app.screen
        assert isinstance(screen, MergeListScreen)
        rows = [screen.table.cells_of(k) for k in screen.table.row_keys()]
        assert sorted((c[4][0], c[5][0]) for c in rows) == [("/old", "/a"), ("/older", "/a")]
        await pilot.press("escape")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen) and bool(app.screen.query("#help-text")))
        help_text = str(app.screen.query_one("#help-text").render())
        listed = dict(app.help_keys())
        assert set(listed) >= {"p", "+", "-", "]", "[", "c", "x", "e", "r", "q", "tab"}
        for key, meaning in listed.items():
            assert f"{key} " in help_text and meaning in help_text
        await pilot.press("escape")
        await pilot.press("q")  # the crawl is done: no question asked
    assert app.return_code == 0


async def run_command(pilot, app: CrawlApp, query: str, title: str) -> None:
    """Open the palette, type, wait for the hit to be listed, choose it."""
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette) and isinstance(app.focused, Input))
    await pilot.press(*query)
    options = app.screen.query_one(CommandList)

    def listed() -> bool:
        return options.option_count > 0 and title in str(options.get_option_at_index(0).prompt)

    await until(pilot, listed)
    while options.highlighted != 0:
        await pilot.press("down")
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def test_command_palette_offers_the_same_actions(serve) -> None:
    site = await serve(slow_site(200, 0.05))
    crawler, sink, app = make(site.url + "/", concurrency=2)
    async with app.run_test() as pilot:
        await until(pilot, lambda: crawler.stats.pages >= 2)
        await run_command(pilot, app, "pause crawl", "Pause crawl")
        await until(pilot, lambda: crawler.paused)
        await run_command(pilot, app, "concurrency +10", "Concurrency +10")
        await until(pilot, lambda: crawler.concurrency == 12)
        await run_command(pilot, app, "resume", "Resume crawl")
        await until(pilot, lambda: not crawler.paused)
        await finished(pilot, app)
    assert len(sink.records) == 201


async def test_markup_and_escape_sequences_in_urls_show_literally(serve) -> None:
    release = asyncio.Event()

    async def error_500(request: web.Request) -> web.Response:
        return web.Response(status=500, text="[bold]no[/bold]")

    slow_500 = held(release, error_500)  # in flight until the workers table was read

    body = '<a href="/[bold]x[/bold]">a</a> <a href="/e\x1b[31mred\x1b[0m">b</a> <a href="/q?x=[i]y[/i]">c</a>'

    async def root(request: web.Request) -> web.Response:
        return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")

    # aiohttp hands us the decoded path: brackets as they are, %1B as a real ESC.
    routes = {"/": root, "/[bold]x[/bold]": slow_500, "/e\x1b[31mred\x1b[0m": slow_500, "/q": slow_500}
    site = await serve(routes)
    crawler, sink, app = make(site.url + "/", concurrency=4, max_tries=1)
    async with app.run_test(size=(120, 40)) as pilot:
        def paths() -> list[str]:
            return [app.workers_table.cells_of(k)[3][0] for k in app.workers_table.row_keys()]

        await until(pilot, lambda: "/[bold]x[/bold]" in paths())  # in the workers table, literally
        release.set()
        await finished(pilot, app)
        await until(pilot, lambda: isinstance(app.screen, SummaryScreen))
        await pilot.press("escape")  # back to the live view: the errors panel has the rows
        await pilot.pause(0.1)
        screen_text = app.export_screenshot()
        assert "\x1b" not in screen_text
        table = app.errors_panel.table
        lines = [table.line_of(k) for k in table.row_keys()]
        assert any("/[bold]x[/bold]" in line for line in lines)  # literally, brackets and all
        assert any("[31mred" in line for line in lines)
        assert all("\x1b" not in line for line in lines)
        await pilot.press("e")
        await pilot.pause(0.1)
        table = app.screen.table
        lines = [table.line_of(k) for k in table.row_keys()]
        assert any("/[bold]x[/bold]" in line for line in lines)
        assert any("/q?x=[i]y[/i]" in line for line in lines)


async def test_key_bar_swaps_pause_for_resume_without_mounting_widgets(serve) -> None:
    from crawltop.tui.panels.keybar import KeyBar

    site = await serve(slow_site(40, 0.05))
    crawler, sink, app = make(site.url + "/", concurrency=2)
    async with app.run_test() as pilot:
        bar = app.query_one(KeyBar)
        await until(pilot, lambda: "Pause" in bar.plain)
        widgets = len(list(app.screen.walk_children()))
        await pilot.press("p")
        await until(pilot, lambda: "Resume" in bar.plain)
        assert "Pause" not in bar.plain
        assert len(list(app.screen.walk_children())) == widgets
        crawler.stop()
