"""The host queues in the TUI (each host's state, steered by hand), with Pilot against real crawls: real aiohttp
servers on several loopback addresses (127.0.0.2, 127.0.0.3, ... all reach `lo`) with a
delay, so hosts wait, back off and fetch for real. The queues view (`H`) lists them with
their states, sorts (`o`/`O`) and filters (`f`/`F`) them, `h` pauses one; the header counts
hosts by state and the workers line says why nothing is due."""
from __future__ import annotations

import pytest
from aiohttp import web
from support.crawl import ListSink
from support.sites import html, page
from support.wait import until

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.queueing.hosts import STATES
from crawltop.core.steering.steer import HOST_SORTS
from crawltop.tui.app import CrawlApp
from crawltop.tui.panels.summary import SummaryScreen
from crawltop.tui.screens.queues import QueuesScreen

pytestmark = pytest.mark.timeout(90)


def tree(n: int) -> dict:
    """/ links to /p0 ... /p{n-2}: n pages in all."""
    routes = {"/": page(*[f"/p{i}" for i in range(n - 1)])}
    routes.update({f"/p{i}": page() for i in range(n - 1)})
    return routes


def ordered(rows: list, sort: str) -> bool:
    key, reverse = HOST_SORTS[sort]
    return [key(r) for r in rows] == sorted((key(r) for r in rows), reverse=reverse)


async def test_queues_view_shows_host_states_sorts_filters_and_pauses(serve) -> None:
    sites = [await serve(tree(8), f"127.0.0.{i}") for i in range(2, 7)]
    refused: list[int] = []

    async def limited(request: web.Request) -> web.StreamResponse:
        if not refused:  # the first page answers 429: the whole host backs off 3 s
            refused.append(1)
            return web.Response(status=429, headers={"Retry-After": "3"})
        return html()

    routes = {"/": page(*[f"/p{i}" for i in range(6)])} | {f"/p{i}": limited for i in range(6)}
    sites.append(await serve(routes, "127.0.0.7"))
    hosts = sorted(s.url.split("//")[1] for s in sites)
    slow = sites[-1].url.split("//")[1]
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=tuple(s.url + "/" for s in sites), delay=0.6, concurrency=6, robots=False,
                                  timeout=5.0, backoff=0.01), sinks=[sink])
    app = CrawlApp(crawler, refresh_hz=10)
    async with app.run_test(size=(100, 30)) as pilot:
        # The header counts the six hosts by state; with a delay, nothing is due most of the time.
        await until(pilot, lambda: app.status_bar.plain.count("hosts 6: ") == 1, 15)
        await until(pilot, lambda: "next due in" in app.workers_panel.heading.plain, 15)
        assert any(w in app.workers_panel.heading.plain for w in ("waiting", "backing off"))

        await pilot.press("H")
        await until(pilot, lambda: isinstance(app.screen, QueuesScreen))
        screen = app.screen
        assert isinstance(screen, QueuesScreen)
        await until(pilot, lambda: len(screen.rows) == 6)
        assert sorted(h.host for h in screen.rows) == hosts
        assert all(h.state in STATES for h in screen.rows)
        # The 429 backs its whole host off: the row says so, with the reason and the time left.
        await until(pilot, lambda: any(h.host == slow and h.state == "backoff" for h in screen.rows), 15)
        rank = next(i for i, h in enumerate(screen.rows) if h.host == slow)
        line = screen.table.line_of(str(rank))
        assert line.split()[0] == slow and "backoff 429 " in line, line

        # o cycles the order: queued, errors, latency, wake, done, host; O goes back.
        assert screen.sort == "queued" and ordered(screen.rows, "queued")
        for sort in ("errors", "latency", "wake"):
            await pilot.press("o")
            assert screen.sort == sort
            await until(pilot, lambda sort=sort: len(screen.rows) == 6 and ordered(screen.rows, sort))
        await pilot.press("o", "o")
        assert screen.sort == "host"
        await until(pilot, lambda: [h.host for h in screen.rows] == hosts)
        assert [screen.table.line_of(k).split()[0] for k in screen.table.row_keys()] == hosts
        assert "sort host" in screen.heading.plain
        await pilot.press("O")
        assert screen.sort == "done"
        await pilot.press("o")

        # f cycles the state shown: all, ready, fetching, waiting, ...; F goes back.
        await pilot.press("f", "f", "f")
        assert screen.state == "waiting" and "state waiting" in screen.heading.plain
        await until(pilot, lambda: bool(screen.rows) and screen.table.row_count == len(screen.rows), 15)
        assert all(h.state == "waiting" for h in screen.rows)
        assert all(" waiting " in screen.table.line_of(k) for k in screen.table.row_keys())
        await pilot.press("F", "F", "F")
        assert screen.state is None
        await until(pilot, lambda: len(screen.rows) == 6)

        # h pauses the selected host (by name: row 0 is the first host), and resumes it.
        first = hosts[0]
        assert screen.selected() is not None and screen.selected().host == first
        await pilot.press("h")
        await until(pilot, lambda: first in crawler.steering.paused_hosts())
        await until(pilot, lambda: screen.rows[0].host == first and screen.rows[0].state == "paused", 5)
        assert " paused " in screen.table.line_of("0")
        await pilot.press("h")
        await until(pilot, lambda: first not in crawler.steering.paused_hosts())

        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, SummaryScreen), 60)
    assert len(sink.records) == 5 * 8 + 7 and all(r.status == 200 for r in sink.records)


async def test_thousands_of_hosts_cost_the_rows_that_fit() -> None:
    """600 hosts queued (a crawl that starts paused: nothing is fetched): the view asks the
    engine for two pages of rows, more as the cursor moves down, never all of them."""
    roots = tuple(f"http://127.0.{i // 200}.{i % 200 + 2}:9/" for i in range(600))
    crawler = Crawler(CrawlConfig(roots=roots, start_paused=True, robots=False, concurrency=4), sinks=[ListSink()])
    app = CrawlApp(crawler, refresh_hz=10)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(crawler.stats.hosts) == 600, 15)
        await until(pilot, lambda: "hosts 600: 600 paused" in app.status_bar.plain, 5)
        await pilot.press("H")
        await until(pilot, lambda: isinstance(app.screen, QueuesScreen))
        screen = app.screen
        assert isinstance(screen, QueuesScreen)
        await until(pilot, lambda: screen.reads >= 2 and screen.rows != [])
        body = screen.table.body_height
        assert 10 <= body <= 24
        assert len(screen.rows) == screen.table.row_count <= 2 * body + 1 < 600
        assert "Host queues 600" in screen.heading.plain and "first " in screen.heading.plain
        await pilot.press("pagedown", "pagedown")  # the cursor nears the last row read: read further
        await until(pilot, lambda: len(screen.rows) > 2 * body + 1)
        assert len(screen.rows) <= screen.table.cursor_row + 2 * body + 1 < 600
        await pilot.press("f")  # ready: none, the crawl is paused and so are its hosts (state shown as it is)
        await until(pilot, lambda: screen.state == "ready" and screen.table.row_count == 0)
        await pilot.press("f")  # fetching: none
        await until(pilot, lambda: screen.state == "fetching" and screen.table.row_count == 0)
        assert "no host in state fetching" in screen.detail.plain
        await pilot.press("f", "f", "f")  # waiting, backoff, paused: every host of a paused crawl
        await until(pilot, lambda: screen.state == "paused" and screen.table.row_count == len(screen.rows) > 0)
        crawler.stop()
