"""`--browser`: a page in a headless Chromium tab, for sites whose pages scripts build.

Only in-scope pages come here (core/crawler.py decides); requisites the page did not load,
external checks, robots.txt and sitemaps stay on aiohttp. A page's life:

1. Its own request is the crawl's aiohttp attempt (`HttpFetcher`): redirects by hand, the
   body cap, the session's headers, cookies, proxy and resolver, retries and error kinds
   all stay as they are, and a URL that is no HTML (or no 2xx) is an ordinary Record of
   that one response, never opened in a tab.
2. An HTML 2xx is opened in a tab, its document served from that response (`route.fulfill`):
   the server sees one request for it. The tab waits for `load`, then for the network to
   be idle (bounded), and reads `page.content()`: the HTML the scripts made, for links.
3. Every request the tab makes passes the crawl's rules first (`Rules.allow`: --exclude,
   ignores, robots.txt): a refused one is aborted in the browser. A URL never seen is
   *claimed* (`Rules.claim`: marked seen), so aiohttp never fetches it; its answer comes
   back in `Response.loaded` for its own Record and WARC records. A URL seen before is not
   requested again: served from what this browser already loaded when it can be, else an
   image, font or media file is aborted (links never depend on them) and anything else
   goes out unrecorded (a page's scripts need it). What goes out is sent by the route itself
   (`route.fetch`, redirects off): Chromium routes no redirect's target, so each hop is
   followed there and passes the rules too; a claimed URL's target is claimed as its redirect.
   A load that failed, or no whole 2xx, is not served to other tabs: they ask again.
4. A hard limit (3 x --timeout) bounds the tab: a hung or crashed tab gives the page's
   Record its reason (`Response.error`), never a stalled worker. A browser that dies is
   launched again once; after a second death every page fails with the reason.

Chromium is the system's (`--browser-path`, else Debian's /usr/lib/chromium/chromium,
else Playwright's own if installed), headless, its own background traffic off, in a fresh
profile directory removed at the end; `close()` runs in the crawl's `finally`, so no
Chromium outlives the crawl.
"""
from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urljoin

from multidict import CIMultiDict, CIMultiDictProxy

from ..errors import CrawlError, UsageError
from ..output.provenance import new_hasher, payload_digest
from ..parsing.urls import canonical
from .fetch import Loaded, Response, _raw_content_type
from .fetcher import HttpFetcher

if TYPE_CHECKING:  # playwright is the optional extra crawltop[browser]: imported when a crawl asks
    from playwright.async_api import BrowserContext, Page, Playwright, Request, Route

DEFAULT_PATH = "/usr/lib/chromium/chromium"
# Chromium reads one --disable-features, the last, and Playwright passes its own list first:
# ours repeats Playwright's (1.5x) so that its automation settings hold, then adds ours.
DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "PaintHolding", "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect", "NetworkTimeServiceQuerying", "AimEnabled", "PreconnectToSearch",
    "OptimizationHints", "MediaRouter", "Translate",
)
FLAGS = (
    "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-domain-reliability", "--metrics-recording-only",
    "--no-default-browser-check", "--disable-features=" + ",".join(DISABLED_FEATURES),
    "--disable-client-side-phishing-detection", "--disable-dev-shm-usage",
)
MAX_HOPS = 10  # redirects a tab's request may follow (each one checked here)
IDLE_MAX = 10.0  # seconds a tab may wait for its network to go idle after `load`
SHARED_BYTES = 32 << 20  # answers kept to serve other tabs' requests for the same URL
# What a page's links never depend on: when seen before, not requested again
SKIPPABLE = frozenset(("image", "media", "font"))
# Kept to serve again: what a page's scripts and layout need to build it
SHAREABLE = frozenset(("script", "stylesheet", "fetch", "xhr", "font", "manifest", "other"))
# A requisite's hop letter by what loaded it (core/output/provenance.py hop): a fetch() or an
# XHR was made by a script, so it is the script's letter
LETTERS = {"image": "I", "stylesheet": "K", "script": "J", "media": "V", "font": "U", "texttrack": "V",
           "manifest": "K", "fetch": "J", "xhr": "J", "eventsource": "J", "websocket": "J"}
_DROP = ("content-encoding", "content-length", "transfer-encoding")
INSTALL_PLAYWRIGHT = "--browser needs Playwright: pip install 'crawltop[browser]'"
INSTALL_CHROMIUM = ("--browser needs Chromium: apt-get install chromium (or name one with --browser-path PATH); "
                    "crawltop never downloads a browser")


class BrowserFailure(CrawlError):
    """The browser could not finish a page: its tab crashed, or the browser is gone."""


class TabTimeout(BrowserFailure):
    """A tab still busy at the page's hard limit."""

    kind = "timeout"


class Rules(Protocol):
    """The crawl's rules for a browser's own requests (core/crawler.py implements them)."""

    async def allow(self, url: str) -> bool:
        """May the tab request this canonical URL? (--exclude, ignores, robots.txt; a URL
        refused here may get its skip Record from the crawl.)"""
        ...

    def claim(self, url: str) -> bool:
        """Mark the URL seen for this tab to record; False if seen before, or not to be
        recorded (--no-requisites, --max-pages)."""
        ...


def executable(path: str | None) -> str | None:
    """The Chromium to launch: `path`, else Debian's, else Playwright's own (None: none)."""
    if path:
        return path
    if os.access(DEFAULT_PATH, os.X_OK):
        return DEFAULT_PATH
    root = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or os.path.expanduser("~/.cache/ms-playwright")
    found = sorted(glob.glob(os.path.join(root, "chromium*", "chrome-linux*", "chrome")))
    return found[-1] if found else None


def check(path: str | None) -> str:
    """The executable to launch, or a UsageError saying what to install (exit 2)."""
    try:
        import playwright.async_api  # noqa: F401  (only whether the extra is installed)
    except ImportError:
        raise UsageError(INSTALL_PLAYWRIGHT) from None
    exe = executable(path)
    if exe is None:
        raise UsageError(INSTALL_CHROMIUM)
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise UsageError(f"--browser-path {exe}: not an executable file")
    return exe


class BrowserFetcher:
    """Pages in Chromium tabs, one tab per page being fetched (so at most -c), each closed
    after its page: no state leaks from one page into the next but the profile's cookies."""

    def __init__(self, http: HttpFetcher, rules: Rules, *, path: str | None, timeout: float, max_bytes: int,
                 user_agent: str) -> None:
        self.http, self.rules = http, rules
        self.path, self.timeout, self.max_bytes, self.agent = path, timeout, max_bytes, user_agent
        self.limit = 3 * timeout  # a tab's hard limit, as aiohttp's whole-response timeout
        self._pw: Playwright | None = None
        self._context: BrowserContext | None = None
        # profile directories, removed at close: a dead browser's children may write to its
        # own for a moment after it died, so it is not removed when the next one starts
        self._profiles: list[str] = []
        self._lock = asyncio.Lock()
        self._generation = 0  # which launch: a page that saw its browser die relaunches only that one
        self._relaunched = False
        self._gone: str | None = None  # why no browser is left
        self._closing = False
        # URLs this browser loaded (or is loading) for a page: other tabs are served from here
        self._shared: OrderedDict[str, asyncio.Future[_Kept | None]] = OrderedDict()
        self._shared_bytes = 0
        # each page's claimed loads until fetch() returns them: a page whose worker is
        # cancelled meanwhile leaves them here, for the crawl to record (`lost`)
        self._unfinished: dict[str, list[Loaded]] = {}

    async def start(self) -> None:
        """Launch Chromium; a missing extra or browser is a UsageError (exit 2)."""
        exe = check(self.path)
        from playwright.async_api import async_playwright

        self._pw = await async_playwright().start()
        try:
            await self._launch(exe)
        except Exception as exc:
            await self.close()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"--browser: Chromium {exe} did not start: {first}") from None

    async def _launch(self, exe: str | None = None) -> None:
        assert self._pw is not None
        profile = tempfile.mkdtemp(prefix="crawltop-chromium-")
        self._profiles.append(profile)
        context = await self._pw.chromium.launch_persistent_context(
            profile, executable_path=exe or executable(self.path), headless=True, args=list(FLAGS),
            chromium_sandbox=os.geteuid() != 0,  # --no-sandbox only as root, where the sandbox cannot run
            user_agent=self.agent, service_workers="block", accept_downloads=False)
        generation = self._generation
        context.on("close", lambda _: self._died(generation))
        for page in context.pages:  # the window a persistent profile opens with
            await page.close()
        self._context = context

    def _died(self, generation: int) -> None:
        if not self._closing and generation == self._generation:
            self._context = None

    async def close(self) -> None:
        """Close the browser and remove its profile; bounded, so a stuck Chromium cannot
        hold the crawl's end (stopping Playwright's driver then kills it)."""
        self._closing = True
        context, self._context = self._context, None
        try:
            if context is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(context.close(), 10)
        finally:
            pw, self._pw = self._pw, None
            if pw is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pw.stop(), 10)
            while self._profiles:
                shutil.rmtree(self._profiles.pop(), ignore_errors=True)

    async def fetch(self, url: str, reading: Callable[[], None], sent: Callable[[], None] | None,
                    phase: Callable[[str], None]) -> Response:
        resp = await self.http.fetch(url, reading, sent, phase)
        if not (resp.is_html and 200 <= resp.status < 300):
            return resp  # an ordinary Record of this answer: nothing for a tab to build
        phase("reading")
        resp.loaded = self._unfinished[url] = []
        await self._tabs(url, resp)  # raising (a cancel), its loads stay for `lost`
        del self._unfinished[url]
        return resp

    def lost(self, url: str) -> list[Loaded]:
        """What a page's tab claimed when its fetch() did not return (cancelled): each URL is
        seen and must still end in a Record, which the caller gives it."""
        return self._unfinished.pop(url, [])

    async def _tabs(self, url: str, resp: Response) -> None:
        for _ in range(2):  # once more on a relaunched browser if it died under this page
            if self._gone is not None:
                resp.error = BrowserFailure(self._gone)
                return
            generation = self._generation
            try:
                await self._render(url, resp)
                return
            except _Died:
                await self._relaunch(generation)
        resp.error = BrowserFailure(self._gone or "the browser died twice under this page")

    async def _relaunch(self, generation: int) -> None:
        """Once per crawl: the first page to see a launch die starts the next one."""
        async with self._lock:
            if generation != self._generation or self._gone is not None:
                return
            self._generation += 1
            if self._relaunched:
                self._gone = "the browser died twice: no page can be rendered"
                return
            self._relaunched = True
            try:
                await self._launch()
            except Exception as exc:
                self._gone = f"the browser died and did not start again: {exc}"

    async def _render(self, url: str, resp: Response) -> None:
        """Open the page in a tab; fills resp.dom and resp.loaded, or resp.error."""
        context = self._context
        if context is None:
            raise _Died
        tab = _Tab(self, url, resp)
        try:
            page = await context.new_page()
        except Exception as exc:
            if await self._dead(context):
                raise _Died from None
            resp.error = BrowserFailure(f"the browser could not open a tab: {_first_line(exc)}")
            return
        try:
            async with asyncio.timeout(self.limit):
                await tab.run(page)
        except TimeoutError:
            resp.error = TabTimeout(f"the page did not finish in the browser within {self.limit:g}s")
        except Exception as exc:
            if await self._dead(context):
                tab.settle("the browser died while the page loaded")
                raise _Died from None
            resp.error = BrowserFailure(f"the browser could not render the page: {_first_line(exc)}")
        finally:
            tab.closed = True  # no claim after this: the loads are about to be handed back
            with contextlib.suppress(Exception):
                await asyncio.wait_for(page.close(run_before_unload=False), 5)
            tab.settle("still loading when the page was read")

    async def _dead(self, context: BrowserContext) -> bool:
        """Did the browser die (not only a tab fail)? A call fails as soon as the process is
        gone, a moment before the context's close event says so: wait for it, briefly."""
        for _ in range(20):
            if self._context is not context:
                return True
            await asyncio.sleep(0.025)
        return False

    # -- what tabs share --------------------------------------------------------------------
    def shared(self, url: str) -> asyncio.Future[_Kept | None] | None:
        fut = self._shared.get(url)
        if fut is not None:
            self._shared.move_to_end(url)
        return fut

    def share(self, url: str) -> asyncio.Future[_Kept | None]:
        fut: asyncio.Future[_Kept | None] = asyncio.get_running_loop().create_future()
        self._shared[url] = fut
        return fut

    def kept(self, url: str, fut: asyncio.Future[_Kept | None], kept: _Kept | None) -> None:
        """The answer of a load other tabs may wait for. None (failed, or no complete 2xx)
        wakes them to request it themselves and forgets the URL: one bad load must not
        spoil the URL for every later tab."""
        if fut.done():
            return
        fut.set_result(kept)
        if kept is None:
            if self._shared.get(url) is fut:
                del self._shared[url]
            return
        self._shared_bytes += len(kept.body)
        while self._shared_bytes > SHARED_BYTES and self._shared:
            url, old = next(iter(self._shared.items()))
            if not old.done():
                break
            del self._shared[url]
            gone = old.result()
            self._shared_bytes -= len(gone.body) if gone is not None else 0


class _Died(Exception):
    """The browser itself went away under a page (not only its tab)."""


class _Kept:
    """An answer kept to serve another tab's request for the same URL."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class _Tab:
    """One page in one tab: its routes, the answers it claimed, its final HTML."""

    def __init__(self, browser: BrowserFetcher, url: str, resp: Response) -> None:
        self.browser, self.url, self.resp = browser, url, resp
        self.rules = browser.rules
        self.claimed: list[tuple[Loaded, asyncio.Future[_Kept | None] | None]] = []
        self.document_served = False
        self.closed = False  # the page is being closed: nothing more is claimed
        self.loaded: list[Loaded] = resp.loaded if resp.loaded is not None else []

    async def run(self, page: Page) -> None:
        await page.route("**/*", self._route)
        ms = self.browser.limit * 1000
        await page.goto(self.url, wait_until="load", timeout=ms)
        with contextlib.suppress(Exception):  # a page that never goes quiet (polling) is read as it is
            await page.wait_for_load_state("networkidle", timeout=min(self.browser.timeout, IDLE_MAX) * 1000)
        self.resp.dom = await page.content()

    async def _route(self, route: Route, request: Request) -> None:
        try:
            await self._decide(route, request)
        except Exception:  # the tab closed meanwhile, or a surprise: the request goes no further
            with contextlib.suppress(Exception):
                await route.abort("blockedbyclient")

    async def _decide(self, route: Route, request: Request) -> None:
        if request.is_navigation_request():
            if not self.document_served and request.frame.parent_frame is None:
                self.document_served = True  # the page's own document: the answer we have
                resp = self.resp
                await route.fulfill(status=resp.status, headers=_served(resp.headers.items()), body=resp.body)
            else:  # a script's navigation away, or a frame: the DOM's links and frames are
                await route.abort("blockedbyclient")  # followed as pages of their own
            return
        url = canonical(request.url)
        if url is None:  # not http(s): nothing of the crawl's
            await route.continue_()
            return
        if not await self.rules.allow(url):
            await route.abort("blockedbyclient")
            return
        browser = self.browser
        fut = browser.shared(url)
        if fut is not None:  # this browser has it, or is loading it for another tab
            kept = await fut
            if kept is not None:
                await route.fulfill(status=kept.status, headers=_served(kept.headers), body=kept.body)
                return
            # that load failed: this one goes on as for any URL seen before
        kind = request.resource_type
        if self.closed:
            await route.abort("blockedbyclient")
        elif self.rules.claim(url):
            loaded = Loaded(url, LETTERS.get(kind, "O"), self.url, False)
            share = browser.share(url) if kind in SHAREABLE else None
            self.claimed.append((loaded, share))
            self.loaded.append(loaded)
            await self._forward(route, request, loaded, share)
        elif kind in SKIPPABLE:
            await route.abort("blockedbyclient")
        else:
            await self._forward(route, request, None, None)

    async def _forward(self, route: Route, request: Request, loaded: Loaded | None,
                       fut: asyncio.Future[_Kept | None] | None) -> None:
        """Send the tab's request from here, redirects off, and hand the tab the last answer.
        Chromium routes no redirect's target, so each hop is followed here: its target passes
        the rules first (refused: the tab's request is aborted, the target never asked for)
        and, when the first URL was claimed, is claimed too, as its redirect."""
        browser, target = self.browser, request.url
        sent = [(h["name"], h["value"]) for h in await request.headers_array()]
        for _ in range(MAX_HOPS):
            try:
                answer = await route.fetch(url=target, max_redirects=0, timeout=browser.limit * 1000)
                pairs = [(h["name"], h["value"]) for h in answer.headers_array]
                body = b"" if 300 <= answer.status < 400 else await answer.body()
            except Exception as exc:
                if loaded is not None and loaded.error is None:
                    loaded.error = f"the browser's request failed: {_first_line(exc)}"
                if fut is not None:
                    browser.kept(loaded.url if loaded else "", fut, None)
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
                    browser.kept(loaded.url, fut, _Kept(r.status, pairs, r.body) if whole else None)
            location = answer.headers.get("location") if 300 <= answer.status < 400 else None
            if not location:
                await route.fulfill(status=answer.status, headers=_served(pairs), body=body)
                return
            target = urljoin(target, location)
            url = canonical(target)
            if url is None or not await self.rules.allow(url) or self.closed:
                await route.abort("blockedbyclient")
                return
            before, loaded, fut = loaded, None, None
            if before is not None and self.rules.claim(url):
                loaded = Loaded(url, before.letter, before.url, True)
                self.claimed.append((loaded, None))
                self.loaded.append(loaded)
            elif request.resource_type in SKIPPABLE:
                await route.abort("blockedbyclient")
                return
        await route.abort("failed")  # a redirect loop

    def settle(self, why: str) -> None:
        """Every URL this tab claimed ends with an answer or a reason."""
        for loaded, fut in self.claimed:
            if loaded.response is None and loaded.error is None:
                loaded.error = why
            if fut is not None:
                self.browser.kept(loaded.url, fut, None)


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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

