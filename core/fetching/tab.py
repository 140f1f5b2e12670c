"""One page in one browser tab: opened, rendered, read, closed, within one hard limit.

Apart from the routes that answer its requests (core/fetching/tabroutes.py) and from the
browser it runs in (core/fetching/browserlife.py) because this is the page's own life and
how it can end:

- Its document is served from the crawl's own aiohttp answer (the server sees one request
  for it). When the page is done is core/fetching/pagedone.py's: `load`, the tab's own
  network idle, scrolling to the bottom in steps, idle again; then `page.content()` is the
  HTML the scripts made, for links, with those of same-origin frames added.
- Dialogs are dismissed, downloads never sent (their URL becomes a link of the page), and a
  script that moves the page is recorded as its redirect (`Response.moved`), not followed.
- One hard limit (--page-timeout) bounds the tab: a hung tab, one that crashes (its `crash`
  event ends it at once) or a browser that dies under it (`Died`) gives the page its reason,
  never a stalled worker; every URL the tab claimed still ends with an answer or a reason.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ..errors import CrawlError
from ..parsing.urls import canonical
from .chromium import first_line
from .pagedone import IDLE_CAP, Traffic, frame_links, scroll, with_links
from .tabroutes import TabRoutes

if TYPE_CHECKING:  # playwright is the optional extra crawltop[browser]: imported when a crawl asks
    from collections.abc import Callable

    from playwright.async_api import Dialog, Download, Page

    from .browser_rules import Rules
    from .browserlife import BrowserLife
    from .fetch import Response
    from .tabshare import Shared


class BrowserFailure(CrawlError):
    """The browser could not finish a page: its tab crashed, or the browser is gone."""

    retryable = True  # another try, in a new tab or a new browser, may well render it


class BrowserGone(BrowserFailure):
    """No browser is left to render pages (it kept dying, or would not start): no try can help."""

    retryable = False


class TabTimeout(BrowserFailure):
    """A tab still busy at the page's hard limit."""

    kind = "timeout"


class Died(Exception):
    """The browser itself went away under a page (not only its tab)."""


class Tab(TabRoutes):
    """One page in one tab: its paused requests' routes, the answers it claimed, its final HTML."""

    def __init__(self, browser: BrowserLife, answers: Shared, rules: Rules, url: str, resp: Response,
                 phase: Callable[[str], None] | None = None) -> None:
        super().__init__(browser, answers, rules, url, resp, phase)
        self.read = False  # the final DOM is in hand: a limit reached after it cuts no page

    async def open(self, tabs: dict[str, Tab]) -> None:
        """Open the page in a tab, listed in `tabs` while it is open; fills resp.dom and
        resp.loaded, or resp.error. A tab that crashes ends at once (its `crash` event), not
        at the limit; a browser that died raises Died."""
        browser, url, resp = self.browser, self.url, self.resp
        context = browser.context
        if context is None:
            raise Died
        try:
            page = await context.new_page()
        except Exception as exc:
            if await browser.dead(context):
                raise Died from None
            resp.error = BrowserFailure(f"browser: could not open a tab: {first_line(exc)}")
            return
        crashed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        page.on("crash", lambda _: _settle(crashed))
        runner = asyncio.ensure_future(self.run(page))
        tabs[url] = self
        try:
            async with asyncio.timeout(browser.limit):
                await asyncio.wait((runner, crashed), return_when=asyncio.FIRST_COMPLETED)
            if crashed.done():
                if await browser.dead(context):  # every tab "crashes" when the browser is killed
                    self.settle("the browser died while the page loaded")
                    raise Died
                resp.error = BrowserFailure("browser: tab crashed")
            else:
                runner.result()
        except TimeoutError:
            if not self.read:
                resp.error = TabTimeout(
                    f"browser: page timed out (not done within --page-timeout {browser.limit:g}s)")
        except Exception as exc:
            if await browser.dead(context):
                self.settle("the browser died while the page loaded")
                raise Died from None
            resp.error = BrowserFailure(f"browser: {_crash(exc)}")
        else:
            if resp.error is None:
                browser.lived()
        finally:
            tabs.pop(url, None)
            crashed.cancel()
            runner.cancel()
            await asyncio.wait((runner,), timeout=5)  # its calls end as the tab closes, at the latest
            if runner.done() and not runner.cancelled():
                runner.exception()  # retrieved: a crashed tab's pending call fails, and that is known
            resp.moved = self.moved
            traffic = self.traffic
            if traffic is not None:
                resp.browser = {"requests": traffic.made, "failed": traffic.failed, "bytes": traffic.bytes}
            self.closed = True  # no claim after this: the loads are about to be handed back
            await self.refuse_pending()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(page.close(run_before_unload=False), 5)
            self.settle("still loading when the page was read")

    async def run(self, page: Page) -> None:
        """`load`, idle, scroll, idle, then the final DOM (core/fetching/pagedone.py); the
        caller's hard limit bounds it all."""
        traffic = self.traffic = Traffic()
        traffic.watch(page)
        page.on("requestfailed", lambda request: self.gone(canonical(request.url) or ""))
        page.on("dialog", _dismiss)
        page.on("download", self._download)
        await self.intercept(await page.context.new_cdp_session(page))
        phase = self.phase
        phase("navigating")
        await page.goto(self.url, wait_until="load", timeout=0)  # the hard limit is the caller's
        quiet = self.browser.quiet
        phase("network idle")
        await traffic.idle(quiet, IDLE_CAP)
        phase("scrolling")
        with contextlib.suppress(Exception):  # a page that cannot scroll (no body, a frameset) is read as it is
            await scroll(page, traffic, quiet)
        phase("network idle")
        await traffic.idle(quiet, IDLE_CAP)
        phase("reading links")
        dom = await page.content()
        self.resp.dom = with_links(dom, [*await frame_links(page), *self.downloads])
        self.read = True
        # idle allows one request in flight: what the tab claimed is given its time to end,
        # so its Record holds its answer rather than "still loading"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._claims_done.wait(), self.browser.timeout)

    async def _download(self, download: Download) -> None:
        """One Chromium started anyway (its request is failed where it is paused): not saved,
        its URL a link of the page, fetched (and recorded) as any link."""
        self.downloads.append(download.url)
        with contextlib.suppress(Exception):
            await download.cancel()


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def _dismiss(dialog: Dialog) -> None:
    """alert(), confirm(), prompt(), beforeunload: dismissed, so no script waits on a person."""
    with contextlib.suppress(Exception):
        await dialog.dismiss()


def _crash(exc: BaseException) -> str:
    """A tab's failure in words: a crashed tab says so."""
    text = first_line(exc)
    return "tab crashed" if "crash" in text.lower() else f"the page could not be rendered: {text}"
