"""The routes that answer every request a browser tab makes, by the crawl's rules.

Apart from the tab's life (core/fetching/tab.py: open, scroll, read) because this is where
the crawl's rules meet the browser, request by request, and where a URL's Record gets its
answer:

- Every request passes the crawl's rules first (`Rules.allow`: --exclude, ignores,
  robots.txt): a refused one is aborted in the browser.
- A URL never seen is *claimed* (`Rules.claim`: marked seen), so aiohttp never fetches it;
  its answer comes back in `Response.loaded` for its own Record and WARC records. A URL seen
  before is not requested again: served from what this browser already loaded when it can be
  (core/fetching/tabshare.py), else an image, font or media file is aborted (links never
  depend on them) and anything else goes out unrecorded (a page's scripts need it).
- What goes out is sent by the route itself (`route.fetch`, redirects off): Chromium routes
  no redirect's target, so each hop is followed here and passes the rules too; a claimed
  URL's target is claimed as its redirect.
- Credentials keep the crawl's rule per request (core/fetching/session.py): `--header`'s
  Authorization and Cookie go only to the roots' hosts (or --header-host's), the session's
  cookie jar by its cookies' domains (put in the browser at launch).
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urljoin, urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

from ..output.provenance import new_hasher, payload_digest
from ..parsing.urls import canonical
from .browserlife import BrowserLife
from .chromium import first_line
from .fetch import Loaded, Response, _raw_content_type
from .pagedone import Traffic
from .tabshare import Kept, Shared

if TYPE_CHECKING:  # playwright is the optional extra crawltop[browser]: imported when a crawl asks
    from playwright.async_api import Request, Route

MAX_HOPS = 10  # redirects a tab's request may follow (each one checked here)
# What a page's links never depend on: when seen before, not requested again
SKIPPABLE = frozenset(("image", "media", "font"))
# Kept to serve again: what a page's scripts and layout need to build it
SHAREABLE = frozenset(("script", "stylesheet", "fetch", "xhr", "font", "manifest", "other"))
# A requisite's hop letter by what loaded it (core/output/provenance.py hop): a fetch() or an
# XHR was made by a script, so it is the script's letter
LETTERS = {"image": "I", "stylesheet": "K", "script": "J", "media": "V", "font": "U", "texttrack": "V",
           "manifest": "K", "fetch": "J", "xhr": "J", "eventsource": "J", "websocket": "J"}
_DROP = ("content-encoding", "content-length", "transfer-encoding")
_CREDENTIALS = frozenset(("authorization", "cookie", "proxy-authorization"))


class Rules(Protocol):
    """The crawl's rules for a browser's own requests (core/fetching/browser_rules.py implements them)."""

    async def allow(self, url: str) -> bool:
        """May the tab request this canonical URL? (--exclude, ignores, robots.txt; a URL
        refused here may get its skip Record from the crawl.)"""
        ...

    async def claim(self, url: str) -> bool:
        """Mark the URL seen for this tab to record; False if seen before, or not to be
        recorded (--no-requisites, --max-pages)."""
        ...


class TabRoutes:
    """One tab's requests: what it claimed (each to end with an answer or a reason), the
    routes still waiting, where a script moved the page."""

    def __init__(self, browser: BrowserLife, answers: Shared, rules: Rules, url: str, resp: Response,
                 phase: Callable[[str], None] | None = None) -> None:
        self.browser, self.answers, self.rules, self.url, self.resp = browser, answers, rules, url, resp
        self.phase = phase if phase is not None else _nothing
        self.claimed: list[tuple[Loaded, asyncio.Future[Kept | None] | None]] = []
        self.document_served = False
        self.closed = False  # the page is being closed: nothing more is claimed
        self.loaded: list[Loaded] = resp.loaded if resp.loaded is not None else []
        self.traffic: Traffic | None = None
        self.moved: str | None = None  # where a script sent the page (its redirect)
        self.routes: set[Route] = set()  # requests the tab is waiting on
        self._claims = 0  # claimed loads still in flight
        self._claims_done = asyncio.Event()
        self._claims_done.set()

    async def _route(self, route: Route, request: Request) -> None:
        self.routes.add(route)
        try:
            await self._decide(route, request)
        except Exception:  # the tab closed meanwhile, or a surprise: the request goes no further
            with contextlib.suppress(Exception):
                await route.abort("blockedbyclient")
        finally:
            self.routes.discard(route)

    async def refuse_pending(self) -> None:
        """Abort the requests still waiting for an answer, before the tab closes: closing
        releases Chromium's interception, and a request still paused there would then go out
        on its own, unrouted (a second, unrecorded request to the server)."""
        for route in list(self.routes):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(route.abort("blockedbyclient"), 5)

    async def _decide(self, route: Route, request: Request) -> None:
        frame = None
        if request.is_navigation_request():
            frame = request.frame
            if frame.parent_frame is None:
                if not self.document_served:
                    self.document_served = True  # the page's own document: the answer we have
                    self.phase("loading")  # its requisites and scripts now, until `load`
                    resp = self.resp
                    await self._fulfill(route, resp.status, resp.headers.items(), resp.body)
                else:  # a script moved the page: its redirect, recorded, not followed here
                    if self.moved is None and not self.closed:
                        self.moved = canonical(request.url)
                    # 204: Chromium stays on the page (an abort would put its error page there)
                    await route.fulfill(status=204, body=b"")
                return
            if not _same_origin(request.url, self.url):  # another site's frame: its own URL, checked apart
                await route.abort("blockedbyclient")
                return
        url = canonical(request.url)
        if url is None:  # not http(s): nothing of the crawl's
            await route.continue_()
            return
        if not await self.rules.allow(url):
            await route.abort("blockedbyclient")
            return
        answers = self.answers
        fut = answers.shared(url)
        if fut is not None:  # this browser has it, or is loading it for another tab
            kept = await fut
            if kept is not None:
                await self._fulfill(route, kept.status, kept.headers, kept.body)
                return
            # that load failed: this one goes on as for any URL seen before
        kind = request.resource_type
        if self.closed:
            await route.abort("blockedbyclient")
        elif await self.rules.claim(url):
            loaded = Loaded(url, "E" if frame is not None else LETTERS.get(kind, "O"), self.url, False)
            share = answers.share(url) if kind in SHAREABLE else None
            self.claimed.append((loaded, share))
            self.loaded.append(loaded)
            self._claims += 1
            self._claims_done.clear()
            try:
                await self._forward(route, request, loaded, share)
            finally:
                self._claims -= 1
                if not self._claims:
                    self._claims_done.set()
        elif kind in SKIPPABLE:
            await route.abort("blockedbyclient")
        else:
            await self._forward(route, request, None, None)

    async def _forward(self, route: Route, request: Request, loaded: Loaded | None,
                       fut: asyncio.Future[Kept | None] | None) -> None:
        """Send the tab's request from here, redirects off, and hand the tab the last answer.
        Chromium routes no redirect's target, so each hop is followed here: its target passes
        the rules first (refused: the tab's request is aborted, the target never asked for)
        and, when the first URL was claimed, is claimed too, as its redirect."""
        browser, answers, target = self.browser, self.answers, request.url
        tabs = [(h["name"], h["value"]) for h in await request.headers_array()]
        for _ in range(MAX_HOPS):
            try:
                sent = await self._headers(target, tabs)
                answer = await route.fetch(url=target, max_redirects=0, timeout=browser.timeout * 1000,
                                           headers=dict(sent) if sent is not tabs else None)
                pairs = [(h["name"], h["value"]) for h in answer.headers_array]
                body = b"" if 300 <= answer.status < 400 else await answer.body()
            except Exception as exc:
                if loaded is not None and loaded.error is None:
                    loaded.error = f"the browser's request failed: {first_line(exc)}"
                if fut is not None:
                    answers.kept(loaded.url if loaded else "", fut, None)
                await route.abort("failed")
                return
            if self.closed:  # settled meanwhile: its Record already says why
                await route.abort("blockedbyclient")
                return
            if loaded is not None:
                r = loaded.response = _response(answer.status, answer.status_text, pairs, sent, body,
                                                browser.max_bytes)
                if fut is not None:  # only a whole 2xx is served again: an error or a cut body is asked anew
                    whole = 200 <= r.status < 300 and not r.truncated
                    answers.kept(loaded.url, fut, Kept(r.status, pairs, r.body) if whole else None)
            location = answer.headers.get("location") if 300 <= answer.status < 400 else None
            if not location:
                await self._fulfill(route, answer.status, pairs, body)
                return
            target = urljoin(target, location)
            url = canonical(target)
            if url is None or not await self.rules.allow(url) or self.closed:
                await route.abort("blockedbyclient")
                return
            before, loaded, fut = loaded, None, None
            if before is not None and await self.rules.claim(url):
                loaded = Loaded(url, before.letter, before.url, True)
                self.claimed.append((loaded, None))
                self.loaded.append(loaded)
            elif request.resource_type in SKIPPABLE:
                await route.abort("blockedbyclient")
                return
        await route.abort("failed")  # a redirect loop

    async def _fulfill(self, route: Route, status: int, headers: Any, body: bytes) -> None:
        if self.traffic is not None:
            self.traffic.bytes += len(body)
        await route.fulfill(status=status, headers=_served(headers), body=body)

    async def _headers(self, url: str, tabs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The headers a request to `url` goes with: the tab's (Playwright adds the browser's
        cookies), or, for a host --header's credentials are for, the tab's with them added
        and the browser's cookies merged into one Cookie header."""
        creds = self.browser.credentials(url)
        context = self.browser.context
        if not creds or context is None:
            return tabs
        out = [(n, v) for n, v in tabs if n.lower() not in _CREDENTIALS]
        out += [(n, v) for n, v in creds if n.lower() != "cookie"]
        cookies = [v for n, v in creds if n.lower() == "cookie"]
        cookies += [f"{c['name']}={c['value']}" for c in await context.cookies(url)]
        if cookies:
            out.append(("Cookie", "; ".join(cookies)))
        return out

    def settle(self, why: str) -> None:
        """Every URL this tab claimed ends with an answer or a reason."""
        for loaded, fut in self.claimed:
            if loaded.response is None and loaded.error is None:
                loaded.error = why
            if fut is not None:
                self.answers.kept(loaded.url, fut, None)


def _nothing(_: str) -> None:
    pass


def _same_origin(url: str, other: str) -> bool:
    try:
        a, b = urlsplit(url), urlsplit(other)
        return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)
    except ValueError:
        return False


def _served(headers: Any) -> dict[str, str]:
    """Headers to hand the tab with a body already decoded: no encoding or length of the wire."""
    out: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if low not in _DROP:
            out[low] = f"{out[low]}, {value}" if low in out and low != "set-cookie" else value
    return out


def _response(status: int, reason: str, headers: list[tuple[str, str]], sent: list[tuple[str, str]], body: bytes,
              cap: int) -> Response:
    """A browser's answer in the crawl's form: the body cut at --max-bytes, its digest."""
    truncated = len(body) > cap
    if truncated:
        body = body[:cap]
    sha1 = new_hasher()
    sha1.update(body)
    hdrs = CIMultiDictProxy(CIMultiDict(headers))
    raw = hdrs.get("Content-Type")
    mime, _, params = (raw or "").partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"') or None
    return Response(status=status, reason=reason, headers=hdrs, body=body, truncated=truncated,
                    content_type=_raw_content_type(raw), mime=mime.strip().lower(), charset=charset,
                    request_headers=CIMultiDictProxy(CIMultiDict(sent)), digest=payload_digest(sha1))
