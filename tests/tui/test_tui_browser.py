"""--browser in the Workers panel at 80x24: each tab's phase, its requests in flight and bytes
after the URL, Chromium's memory and restarts on the panel's title line; nothing of it
without the browser. The crawl is the frozen sample with a browser's numbers added (the
engine side is tests/engine/test_browser.py, against a real Chromium)."""
from __future__ import annotations

import dataclasses
import io

from rich.console import Console
from support.frozen import FrozenCrawler

from crawltop.core.monitor.stats import BrowserView, Snapshot
from crawltop.tui.app import CrawlApp

PHASES = ("navigating", "loading", "network idle", "scrolling", "reading links")


class BrowserCrawl(FrozenCrawler):
    def make_snapshot(self, state: str) -> Snapshot:
        snap = super().make_snapshot(state)
        workers = list(snap.workers)
        for i, phase in enumerate(PHASES):
            workers[i] = dataclasses.replace(workers[i], phase=phase, tab_requests=i + 1, tab_bytes=1000 * 10 ** i)
        return dataclasses.replace(snap, workers=tuple(workers), browser=BrowserView(412_000_000, 1 << 30, 2))


async def screen(crawler: FrozenCrawler) -> list[str]:
    app = CrawlApp(crawler)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause(0.3)
        console = Console(width=80, height=24, file=io.StringIO(), force_terminal=True, record=True,
                          legacy_windows=False, safe_box=False)
        console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
        return console.export_text(styles=False).rstrip("\n").split("\n")


async def test_tabs_phases_requests_bytes_and_the_browsers_memory_fit_80_columns():
    lines = await screen(BrowserCrawl())
    title = next(line for line in lines if line.startswith("Workers "))
    assert "chromium 392.9 MB  restarts 2" in title, title
    rows = {line.split()[0]: line for line in lines if line[:6].strip().isdigit()}
    for n, (label, tail) in enumerate((("navigating", "1 req 1000 B"), ("loading", "2 req 9.8 KB"),
                                       ("net idle", "3 req 97.7 KB"), ("scrolling", "4 req 976.6 KB")), start=1):
        assert label in rows[str(n)] and tail in rows[str(n)], rows[str(n)]
    assert all(len(line) <= 80 for line in lines)


async def test_nothing_of_the_browser_without_it():
    lines = await screen(FrozenCrawler())
    assert not [line for line in lines if "chromium" in line or " req " in line], lines
