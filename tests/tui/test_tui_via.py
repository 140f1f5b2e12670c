"""The error list says where each error was found (`via`), and `v` narrows the list to
that page: a real crawl on 127.0.0.1, driven through Pilot."""
from __future__ import annotations

import pytest
from aiohttp import web
from support.sites import page
from support.tui import finished, make
from support.wait import until

from crawltop.tui.screens.dialogs import ErrorListScreen

pytestmark = pytest.mark.timeout(30)


async def test_error_list_shows_via_and_v_filters_by_that_page(serve) -> None:
    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=500)

    site = await serve({
        "/": page("/hub", "/other"),
        "/hub": page("/b1", "/b2"),
        "/other": page("/b3"),
        "/b1": broken, "/b2": broken, "/b3": broken,
    })
    crawler, sink, app = make(site.url + "/", concurrency=2, max_tries=1)
    async with app.run_test(size=(100, 30)) as pilot:
        await finished(pilot, app)
        await pilot.press("e")
        screen = app.screen
        assert isinstance(screen, ErrorListScreen)
        await until(pilot, lambda: screen.table.row_count == 3)
        by_path = {screen.table.cells_of(k)[4][0]: k for k in screen.table.row_keys()}
        assert set(by_path) == {"/b1", "/b2", "/b3"}

        screen.table.move_cursor(row=screen.table.get_row_index(by_path["/b3"]))
        await until(pilot, lambda: "/other" in screen.via_line.plain)
        assert screen.via_line.plain.startswith("found on " + site.url + "/other")

        screen.table.move_cursor(row=screen.table.get_row_index(by_path["/b1"]))
        await until(pilot, lambda: "/hub" in screen.via_line.plain)
        await pilot.press("v")
        await until(pilot, lambda: screen.table.row_count == 2)
        shown = {screen.table.cells_of(k)[4][0] for k in screen.table.row_keys()}
        assert shown == {"/b1", "/b2"}  # the errors found on /hub, not /b3 (found on /other)
        assert screen.query_one("#error-list-filter").value == site.url + "/hub"
        await pilot.press("ctrl+l")
        await until(pilot, lambda: screen.table.row_count == 3)
    assert {r.url.removeprefix(site.url): r.via.removeprefix(site.url) for r in sink.records if r.error} == {
        "/b1": "/hub", "/b2": "/hub", "/b3": "/other"}
