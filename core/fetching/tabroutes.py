"""The crawl's rules for every request a browser tab makes, paused in Chromium at two stages.

Apart from the tab's life (core/fetching/tab.py: open, scroll, read) and from the protocol
(core/fetching/devtools.py) because this is where the crawl's rules meet the browser,
request by request, and where a URL's Record gets its answer. Chromium's own network stack
sends what goes out (its proxy, connections and cookies); each request is paused before it
leaves, and its answer only when the crawl records or keeps it:

- **Request stage.** It passes the crawl's rules first (`Rules.refusal`: --exclude, ignores,
  robots.txt): a refused one fails in the page (blocked by client) and never leaves. A URL
  never seen is *claimed* (`Rules.claim`: marked seen), so aiohttp never fetches it. A URL
  seen before is not requested again: served from what this browser already loaded when it
  can be (core/fetching/tabshare.py), else an image, font or media file is refused (links
  never depend on them) and anything else goes out unrecorded (a page's scripts need it),
  its whole 2xx kept there too, so a URL another engine claimed is asked once per engine.
  A URL robots.txt refuses is claimed for its skip Record, as the aiohttp path records it.
  The page's own document is answered from the response the crawl already fetched.
  Credentials keep the crawl's rule per request (core/fetching/session.py): `--header`'s
  Authorization and Cookie go only to the roots' hosts (or --header-host's), the session's
  cookie jar by its cookies' domains (put in the browser at launch). A request waits for its
  host's turn (core/fetching/tabturns.py) before it is claimed: one whose turn would come too
  late is refused unclaimed, left to the crawl's ordinary path. A request going out
  unrecorded is not paused again: its turn ends on the session's `Network` events.
- **Response stage** (core/fetching/tabresponses.py; asked for as a claimed or kept request
  goes out, each redirect hop anew). A claimed URL's answer is recorded: status, reason,
  headers, the request's method and headers, its body read as a stream (a small one of plain
  length in one call) and cut at --max-bytes (marked truncated), then handed to the page. A
  redirect is recorded as the claimed URL's answer and Chromium follows it: its target is
  paused at the Request stage again (same network id), passes the rules on its own and, when
  the first URL was claimed, is claimed as its redirect. A body that cannot be read whole
  fails the load (its Record says why), never recorded as a whole answer.

A tab that closes lets its claims in flight land (bounded), then fails what is still paused,
all at once; a load it shared stays other tabs' to wait on (shielded from its cancel).
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..parsing.urls import canonical
from .browser_rules import ROBOTS, Rules
from .browserlife import BrowserLife
from .devtools import DevTools, Paused
from .fetch import Loaded, Response
from .tabclaims import Flow
from .tabresponses import TabResponses
from .tabshare import Shared

if TYPE_CHECKING:  # playwright is the optional extra crawltop[browser]: imported when a crawl asks
    from playwright.async_api import CDPSession

CLAIM_WAIT = 3.0  # seconds the tab's closing waits for claims in flight (a Redis round trip)
FAIL_WAIT = 5.0  # seconds the tab's closing waits for Chromium to fail what is still paused
MAX_HOPS = 10  # redirects a tab's request may follow (each one checked here)
# What a page's links never depend on: when seen before, not requested again
SKIPPABLE = frozenset(("image", "media", "font"))
# Kept to serve again: what a page's scripts and layout need to build it
SHAREABLE = frozenset(("script", "stylesheet", "fetch", "xhr", "font", "manifest", "other"))
# A requisite's hop letter by what loaded it (core/output/provenance.py hop): a fetch() or an
# XHR was made by a script, so it is the script's letter
LETTERS = {"image": "I", "stylesheet": "K", "script": "J", "media": "V", "font": "U", "texttrack": "V",
           "manifest": "K", "fetch": "J", "xhr": "J", "eventsource": "J", "websocket": "J"}


class TabRoutes(TabResponses):
    """One tab's requests: what it claimed (core/fetching/tabclaims.py), the requests paused
    now, where a script moved the page."""

    def __init__(self, browser: BrowserLife, answers: Shared, rules: Rules, url: str, resp: Response,
                 phase: Callable[[str], None] | None = None) -> None:
        super().__init__(browser, answers, url, resp)
        self.rules = rules
        self.phase = phase if phase is not None else _nothing
        self.document_served = False
        self.moved: str | None = None  # where a script sent the page (its redirect)
        self.downloads: list[str] = []  # what the page offered to download: links of the page
        self.devtools: DevTools | None = None
        self.main_frame: str | None = None
        self.paused: set[str] = set()  # requests the tab is waiting on
        self._tasks: set[asyncio.Task[None]] = set()

    async def intercept(self, session: CDPSession) -> None:
        """Every request of the page (its frames' and dedicated workers' too: one renderer,
        core/fetching/chromium.py) is paused here from now on."""
        devtools = self.devtools = DevTools(session)
        session.on("Fetch.requestPaused", self._on_paused)
        session.on("Network.requestWillBeSentExtraInfo", self._on_wire)
        session.on("Network.responseReceived", self._on_response)
        session.on("Network.loadingFailed", self._on_response)
        login, tried = self.browser.proxy_login, set[str]()
        if login is not None:
            session.on("Fetch.authRequired", lambda event: self._spawn(devtools.authorize(event, login, tried)))
        self.main_frame = await devtools.enable(login)

    def _on_paused(self, event: dict[str, Any]) -> None:
        self._spawn(self._paused(Paused(event)))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Each event its own task, kept until it ends (the tab's close cancels what is left)."""
        task = asyncio.ensure_future(_quietly(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _paused(self, p: Paused) -> None:
        devtools = self.devtools
        assert devtools is not None
        self.paused.add(p.id)
        try:
            if p.answered:
                await self._answered(devtools, p)
            else:
                await self._decide(devtools, p)
        except asyncio.CancelledError:  # the tab is closing: the request must not stay paused
            self._abandon(p, "the page was closed before its answer came")
            with contextlib.suppress(Exception):
                await asyncio.wait_for(devtools.fail(p.id), FAIL_WAIT)
            raise
        except Exception:  # the tab closed meanwhile, or a surprise: the request goes no further
            self._abandon(p, "the browser's request failed")
            with contextlib.suppress(Exception):
                await devtools.fail(p.id)
        finally:
            self.paused.discard(p.id)

    def _abandon(self, p: Paused, why: str) -> None:
        flow = self.flows.get(p.network)
        if flow is not None:
            self._end(flow, why)
            self._release(flow, None)

    async def refuse_pending(self) -> None:
        """Fail the requests still paused, before the tab closes: closing releases Chromium's
        interception, and a request still paused there would then go out on its own,
        unchecked (a second, unrecorded request to the server)."""
        devtools = self.devtools
        if devtools is None:
            return
        await self.claims_landed(CLAIM_WAIT)  # each yes in the tab's claims, to be settled
        if self.paused:  # all at once, under one bound: closing a tab stays near --page-timeout
            fails = [devtools.fail(rid) for rid in list(self.paused)]
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*fails, return_exceptions=True), FAIL_WAIT)
        for task in list(self._tasks):
            task.cancel()
        for flow in self.flows.values():
            self._release(flow, None)

    async def _decide(self, devtools: DevTools, p: Paused) -> None:
        """The Request stage: refuse, answer from what the crawl has, or let it go out."""
        if p.redirected and p.network in self.flows:
            await self._hop(devtools, p, self.flows[p.network])
            return
        frame = False
        if p.download:  # not saved: its URL is a link of the page, fetched (and recorded) as any link
            self.downloads.append(p.url)
            await devtools.fail(p.id)
            return
        if p.kind == "document":
            if p.frame == self.main_frame or p.frame is None:
                if not self.document_served:
                    self.document_served = True  # the page's own document: the answer we have
                    self.phase("loading")  # its requisites and scripts now, until `load`
                    resp = self.resp
                    await self._fulfill(devtools, p.id, resp.status, resp.headers.items(), resp.body, resp.reason)
                else:  # a script moved the page: its redirect, recorded, not followed here
                    if self.moved is None and not self.closed:
                        self.moved = canonical(p.url)
                    # 204: Chromium stays on the page (a failure would put its error page there)
                    await devtools.fulfill(p.id, 204, (), b"")
                return
            if not _same_origin(p.url, self.url):  # another site's frame: its own URL, checked apart
                await devtools.fail(p.id)
                return
            frame = True
        url = canonical(p.url)
        if url is None:  # not http(s) (data:, blob:): nothing of the crawl's; an http(s) URL the
            if foreign(p.url):  # crawl cannot read cannot pass its rules: it never goes out
                await devtools.proceed(p.id)
            else:
                await devtools.fail(p.id)
            return
        if p.kind == "other" and urlsplit(url).path == "/favicon.ico":
            # Chromium's own guess at an icon, which no page asked for (a declared icon is a
            # requisite the crawl's parser finds): a browser's habit, not the site's
            await devtools.fail(p.id)
            return
        if await self._refused(p, url, Loaded(url, "E" if frame else LETTERS.get(p.kind, "O"), self.url, False)):
            await devtools.fail(p.id)
            return
        answers = self.answers
        fut = answers.shared(url) if p.method == "GET" else None
        if fut is not None:  # this browser has it, or is loading it for another tab
            # shielded: this tab closing (its tasks cancelled) must not cancel the load for
            # every other tab waiting on it, nor for every later one
            kept = await asyncio.shield(fut)
            if kept is not None:
                await self._fulfill(devtools, p.id, kept.status, kept.headers, kept.body)
                return
            # that load failed: this one goes on as for any URL seen before
        flow = self.flows[p.network] = Flow()
        if self.closed or not await self._turn(flow, url):
            await devtools.fail(p.id)
        elif p.kind != "preflight" and await self._claimed(self.rules.claim(url), lambda: self._claim(
                flow, Loaded(url, "E" if frame else LETTERS.get(p.kind, "O"), self.url, False),
                # no share once closing: nobody would settle it, and later tabs would wait on it
                answers.share(url) if p.kind in SHAREABLE and p.method == "GET" and not self.closed else None)):
            await self._send(devtools, p, url, flow)
        elif p.kind in SKIPPABLE:
            self._release(flow, None, used=False)
            await devtools.fail(p.id)
        else:
            if p.kind in SHAREABLE and p.method == "GET" and answers.shared(url) is None:
                # seen (another engine claimed it): asked once here, later tabs served its answer
                flow.share = answers.share(url)
            await self._send(devtools, p, url, flow)

    async def _hop(self, devtools: DevTools, p: Paused, flow: Flow) -> None:
        """A redirect's target, Chromium following it: the rules first (refused: the
        request fails, the target never asked for); a claimed URL's target is claimed as
        its redirect."""
        flow.hops += 1
        self._release(flow, None)  # an unrecorded hop's answer was not paused: its turn ends here
        url = canonical(p.url)
        before = flow.loaded
        if (flow.hops > MAX_HOPS or url is None
                or await self._refused(p, url, Loaded(url, before.letter, before.url, True) if before else None)
                or self.closed or not await self._turn(flow, url)):
            await devtools.fail(p.id)  # a loop, a target refused, or its host's turn too late
            return
        if before is not None and await self._claimed(self.rules.claim(url), lambda: self._claim(
                flow, Loaded(url, before.letter, before.url, True), None)):
            pass
        elif p.kind in SKIPPABLE:
            self._release(flow, None, used=False)
            await devtools.fail(p.id)
            return
        else:
            flow.loaded = None
        await self._send(devtools, p, url, flow)

    async def _refused(self, p: Paused, url: str, loaded: Loaded | None) -> bool:
        """The crawl's rules refuse the request (it is failed in the page, blocked by client)?
        A URL robots.txt refuses gets the skip Record the aiohttp path would give it, once:
        claimed (seen from now on) when it would be recorded (`loaded`, not a preflight,
        --requisites, under --max-pages), so the page's links never queue it again."""
        why = await self.rules.refusal(url)
        if why is None:
            return False
        if why == ROBOTS and loaded is not None and p.kind != "preflight" and not self.closed:
            loaded.error = ROBOTS
            await self._claimed(self.rules.claim(url), lambda: self._robots(loaded))
        return True

    def _robots(self, loaded: Loaded) -> None:
        self._skipped(loaded)
        self.rules.robots_refused()

    async def _send(self, devtools: DevTools, p: Paused, url: str, flow: Flow) -> None:
        """Out it goes (its host's turn came), with the crawl's credentials for its host."""
        sent = await self._headers(url, p.headers)
        flow.sent = sent
        # its answer paused only when recorded or kept: else no Response stage (one round trip less)
        await devtools.proceed(p.id, sent if sent is not p.headers else None,
                               answer=flow.loaded is not None or flow.share is not None)


def _nothing(_: str) -> None:
    pass


async def _quietly(work: Coroutine[Any, Any, None]) -> None:
    """A closed tab's session fails what is still sent on it: nothing left to tell."""
    with contextlib.suppress(Exception):
        await work


def foreign(url: str) -> bool:
    """A URL (one `canonical` refused) of a scheme that is not the crawl's: not http(s), so
    not the network's requests the crawl's rules are for."""
    scheme = url.partition(":")[0].strip().lower()
    return bool(url.partition(":")[1]) and scheme not in ("http", "https")


def _same_origin(url: str, other: str) -> bool:
    try:
        a, b = urlsplit(url), urlsplit(other)
        return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)
    except ValueError:
        return False
