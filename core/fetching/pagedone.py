"""When a page in a browser tab is done (core/fetching/tab.py), and what it made.

Playwright's `networkidle` waits for *no* request for 500 ms, so one long poll or a hung
image keeps it waiting to its timeout, and it says nothing about what the page did. Here the
tab's own requests are counted from its events: a page is idle once no request has been in
flight for a quiet time (about 2 s by default), or no more than one for at least ONE_LEFT
seconds (a long poll), capped. A shorter quiet (--browser-quiet) never shortens the wait on
the one request left: on a loaded machine that one is most often the fetch of the page's
own content, and reading the DOM before it lands loses the page's links. After `load` and idle,
the page is scrolled to the bottom in steps (lazy images and infinite lists load as they
come into view), a bounded number of steps, then idle again; then its links are read from
the final DOM, same-origin frames included. The caller bounds the whole under one hard
per-page limit, so none of these waits can hold a worker.
"""
from __future__ import annotations

import asyncio
import html
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from playwright.async_api import Page

QUIET = 2.0  # seconds with no request in flight: the page is idle
ONE_LEFT = 2.0  # seconds with one request left in flight (a long poll, a hung image): idle too
IDLE_CAP = 10.0  # the most one wait for idle takes (a page that polls is read as it is)
SCROLL_STEPS = 30  # at most this many screens scrolled: an endless list ends somewhere
# One step: a screen down; says whether the bottom was reached, and how tall the page is
_STEP = """() => {
  const e = document.scrollingElement || document.documentElement;
  window.scrollBy(0, window.innerHeight);
  return [e.scrollTop + window.innerHeight >= e.scrollHeight - 2, e.scrollHeight];
}"""
_HEIGHT = "() => (document.scrollingElement || document.documentElement).scrollHeight"
_LINKS = "() => Array.from(document.querySelectorAll('a[href], area[href]'), a => a.href)"


class Traffic:
    """The tab's own requests, from its events: in flight now, made, failed, bytes served."""

    def __init__(self) -> None:
        self.inflight: set[Any] = set()
        self.made = 0
        self.failed = 0
        self.bytes = 0  # bodies the crawl handed to the tab (core/fetching/tabroutes.py)
        self._changed = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._clock = loop.time
        self.quiet_since: float | None = self._clock()  # when at most one request was left in flight
        self.empty_since: float | None = self.quiet_since  # when none was

    def watch(self, page: Page) -> None:
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._failed)

    def _started(self, request: Any) -> None:
        self.inflight.add(request)
        self.made += 1
        self._moved()

    def _ended(self, request: Any) -> None:
        self.inflight.discard(request)
        self._moved()

    def _failed(self, request: Any) -> None:
        self.inflight.discard(request)
        self.failed += 1
        self._moved()

    def _moved(self) -> None:
        n = len(self.inflight)
        if n > 1:
            self.quiet_since = None
        elif self.quiet_since is None:
            self.quiet_since = self._clock()
        if n:
            self.empty_since = None
        elif self.empty_since is None:
            self.empty_since = self._clock()
        self._changed.set()

    async def idle(self, quiet: float, cap: float) -> bool:
        """Wait until no request has been in flight for `quiet` seconds, or at most one for
        max(quiet, ONE_LEFT) (True), or `cap` seconds passed (False)."""
        end = self._clock() + cap
        one = max(quiet, ONE_LEFT)
        while True:
            now = self._clock()
            ready = [since + after for since, after in ((self.empty_since, quiet), (self.quiet_since, one))
                     if since is not None]
            if ready and now >= min(ready):
                return True
            if now >= end:
                return False
            wait = min([end, *ready]) - now
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(wait, 0.001))
            except TimeoutError:
                pass


async def scroll(page: Page, traffic: Traffic, quiet: float, steps: int = SCROLL_STEPS) -> int:
    """Scroll to the bottom a screen at a time, so what loads on view loads; at the bottom,
    wait for what that started and go on while the page grows. Returns the steps taken."""
    for step in range(1, steps + 1):
        bottom, height = await page.evaluate(_STEP)
        await asyncio.sleep(0.05)  # a frame or two: scroll handlers and lazy loading react to the view
        if bottom:  # what the bottom started (an endless list's next part) ends first
            await traffic.idle(quiet, IDLE_CAP)
            if await page.evaluate(_HEIGHT) <= height:
                return step
    return steps


async def frame_links(page: Page) -> list[str]:
    """Absolute links of the page's same-origin frames (the page's own are in its DOM)."""
    origin = _origin(page.url)
    out: list[str] = []
    for frame in page.frames:
        if frame is page.main_frame or _origin(frame.url) != origin:
            continue
        try:
            out += await frame.evaluate(_LINKS)
        except Exception:  # noqa: S112  (a frame that went away meanwhile has no links to give)
            continue
    return out


def with_links(dom: str, links: list[str]) -> str:
    """The DOM with extra links (absolute) before its </body>, for the crawl's parser."""
    if not links:
        return dom
    block = "".join(f'<a href="{html.escape(u, quote=True)}"></a>' for u in dict.fromkeys(links))
    at = dom.lower().rfind("</body>")
    return dom + block if at < 0 else dom[:at] + block + dom[at:]


def _origin(url: str) -> tuple[str, str | None, int | None] | None:
    try:
        parts = urlsplit(url)
        return parts.scheme, parts.hostname, parts.port
    except ValueError:
        return None
