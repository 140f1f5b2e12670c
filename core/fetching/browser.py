"""`--browser`: a page in a headless Chromium tab, for sites whose pages scripts build.

Only in-scope pages come here (core/fetching/attempt.py decides); requisites the page did not load,
external checks, robots.txt and sitemaps stay on aiohttp. A page's life:

1. Its own request is the crawl's aiohttp attempt (`HttpFetcher`): redirects by hand, the
   body cap, the session's headers, cookies, proxy and resolver, retries and error kinds
   all stay as they are, and a URL that is no HTML (or no 2xx) is an ordinary Record of
   that one response, never opened in a tab.
2. An HTML 2xx is opened in a tab, its document served from that response (`route.fulfill`):
   the server sees one request for it. When the page is done is core/fetching/pagedone.py's:
   `load`, the tab's own network idle, scrolling to the bottom in steps, idle again; then
   `page.content()` is the HTML the scripts made, for links, with those of same-origin
   frames added. Dialogs are dismissed, popups closed (their requests aborted), downloads
   cancelled (their URL becomes a link of the page), and a script that moves the page to
   another URL is recorded as the page's redirect (`Response.moved`), not followed here.
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
4. One hard limit (--page-timeout) bounds the tab: a hung tab, one that crashes (its `crash`
   event ends it at once) or a browser that dies under it gives the page its reason
   (`Response.error`: `browser: page timed out`, `browser: tab crashed`, `browser: restarted`),
   never a stalled worker; the attempt (core/fetching/attempt.py) tries the page again per
   --max-tries, in a new tab, what the failed tab loaded carried to the next try (`carry`).
   A dead browser is launched again, unless it died MAX_DEATHS times with no page between.
5. The browser is restarted after --browser-restart pages and when its processes' memory
   (PSS, core/fetching/browsermemory.py) passes --browser-memory: new tabs wait while the
   open ones finish, so no page is cut by a restart.
6. Client-side routes (`#/path`, `#!path`) are pages of their own while a browser crawl
   runs (core/parsing/urls.py `keep_routes`): the aiohttp request leaves the fragment out,
   the tab opens the URL with it, and the app's router shows that route.
7. Credentials keep the crawl's rule per request (core/fetching/session.py): `--header`'s
   Authorization and Cookie go with a tab's request only to the roots' hosts (or
   --header-host's), and the session's cookie jar (--cookies) by its cookies' domains.

Chromium is the system's (`--browser-path`, else Debian's /usr/lib/chromium/chromium,
else Playwright's own if installed), headless, its own background traffic off, in a fresh
profile directory removed at the end; `close()` runs in the crawl's `finally`, and a watchdog
(core/fetching/reaper.py) ends what is left when crawltop ends any other way (SIGKILL).
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
from urllib.parse import urljoin, urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

from ..errors import CrawlError, UsageError
from ..output.provenance import new_hasher, payload_digest
from ..parsing.urls import canonical, keep_routes
from . import browsermemory
from .fetch import Loaded, Response, _raw_content_type
from .fetcher import HttpFetcher
from .pagedone import IDLE_CAP, QUIET, Traffic, frame_links, scroll, with_links
from .reaper import Reaper
from .session import host_key

if TYPE_CHECKING:  # playwright is the optional extra crawltop[browser]: imported when a crawl asks
    from playwright.async_api import BrowserContext, Dialog, Download, Page, Playwright, Request, Route

    from ..config import CrawlConfig
    from .session import CrawlSession

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
    # no crash reporter: its handler leaves Chromium's process group and would outlive a killed crawl
    "--disable-breakpad", "--disable-crash-reporter",
)
# More Chromium flags, space-separated (e.g. --js-flags=--max-old-space-size=64): for a
# renderer's limits, and for tests that need a tab to crash
FLAGS_ENV = "CRAWLTOP_CHROMIUM_FLAGS"
MAX_DEATHS = 3  # browser deaths in a row (no page rendered between) before pages stop asking for one
MAX_HOPS = 10  # redirects a tab's request may follow (each one checked here)
PAGE_TIMEOUT = 30.0  # seconds: --page-timeout's default
RESTART_PAGES = 100  # --browser-restart's default: pages one browser renders
MEMORY = 1 << 30  # --browser-memory's default: the browser's PSS before it is restarted
MEMORY_EVERY = 1.0  # seconds between two reads of the browser's memory (a walk of /proc)
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
_CREDENTIALS = frozenset(("authorization", "cookie", "proxy-authorization"))
INSTALL_PLAYWRIGHT = "--browser needs Playwright: pip install 'crawltop[browser]'"
INSTALL_CHROMIUM = ("--browser needs Chromium: apt-get install chromium (or name one with --browser-path PATH); "
                    "crawltop never downloads a browser")


class BrowserFailure(CrawlError):
    """The browser could not finish a page: its tab crashed, or the browser is gone."""

    retryable = True  # another try, in a new tab or a new browser, may well render it


class BrowserGone(BrowserFailure):
    """No browser is left to render pages (it kept dying, or would not start): no try can help."""

    retryable = False


class TabTimeout(BrowserFailure):
    """A tab still busy at the page's hard limit."""

    kind = "timeout"


class Rules(Protocol):
    """The crawl's rules for a browser's own requests (core/fetching/browser_rules.py implements them)."""

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
                 user_agent: str, config: CrawlConfig | None = None, session: CrawlSession | None = None) -> None:
        self.http, self.rules, self.session = http, rules, session
        self.path, self.timeout, self.max_bytes, self.agent = path, timeout, max_bytes, user_agent
        # a tab's one hard limit, everything it does included
        self.limit = config.page_timeout if config is not None else PAGE_TIMEOUT
        # seconds of (almost) no traffic: the page is idle
        self.quiet = config.browser_quiet if config is not None else QUIET
        self.restart_pages = config.browser_restart if config is not None else RESTART_PAGES
        self.memory_limit = config.browser_memory if config is not None else MEMORY
        self.restarts = 0  # restarts asked for (pages, memory), not relaunches after a death
        self.relaunches = 0  # new browsers after one died
        self._deaths = 0  # deaths since a page was last rendered: a browser that cannot live is given up
        self.memory = 0  # bytes: the browser's PSS when last read
        self._rendered = 0  # pages since this browser started
        self._open = 0  # tabs open now
        self._due: str | None = None  # why a restart is due: new tabs wait for the open ones
        self._restarting = False
        self._turns = asyncio.Condition()
        self._memory_read = 0.0
        self._reading: asyncio.Future[int] | None = None  # a read of the memory under way
        self._pw: Playwright | None = None
        self._reaper: Reaper | None = None  # kills what is left of the browsers when crawltop ends
        self._context: BrowserContext | None = None
        # profile directories, removed at close: a dead browser's children may write to its
        # own for a moment after it died, so it is not removed when the next one starts
        self._profiles: list[str] = []
        self.profiles: list[str] = []  # every one this crawl made (its tests check none is left)
        self._lock = asyncio.Lock()
        self._generation = 0  # which launch: a page that saw its browser die relaunches only that one
        self._gone: str | None = None  # why no browser is left
        self._closing = False
        # URLs this browser loaded (or is loading) for a page: other tabs are served from here
        self._shared: OrderedDict[str, asyncio.Future[_Kept | None]] = OrderedDict()
        self._shared_bytes = 0
        # each page's claimed loads until fetch() returns them: a page whose worker is
        # cancelled meanwhile leaves them here, for the crawl to record (`lost`)
        self._unfinished: dict[str, list[Loaded]] = {}
        # what a failed tab loaded for a page that will be tried again: recorded with its last try
        self._carried: dict[str, list[Loaded]] = {}
        # each open tab's page URL -> what it is doing now (the monitors' phase, requests, bytes)
        self.tabs: dict[str, _Tab] = {}

    async def start(self) -> None:
        """Launch Chromium; a missing extra or browser is a UsageError (exit 2)."""
        exe = check(self.path)
        from playwright.async_api import async_playwright

        if os.path.isdir("/proc"):  # the watchdog finds Chromium's processes there
            self._reaper = Reaper()
        self._pw = await async_playwright().start()
        keep_routes(True)  # `#/path` and `#!path` are pages of their own in a browser crawl
        try:
            await self._launch(exe)
        except Exception as exc:
            await self.close()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"--browser: Chromium {exe} did not start: {first}") from None

    async def _launch(self, exe: str | None = None) -> None:
        assert self._pw is not None
        profile = tempfile.mkdtemp(prefix="crawltop-chromium-")
        if self._reaper is not None:
            self._reaper.watch(profile)
        self._profiles.append(profile)
        self.profiles.append(profile)
        context = await self._pw.chromium.launch_persistent_context(
            profile, executable_path=exe or executable(self.path), headless=True,
            chromium_sandbox=os.geteuid() != 0,  # --no-sandbox only as root, where the sandbox cannot run
            user_agent=self.agent, service_workers="block", accept_downloads=False,
            args=[*FLAGS, *os.environ.get(FLAGS_ENV, "").split()],
            # the crash handler, which Debian's Chromium starts whatever the flags say, runs
            # outside the browser's process group: its database in the profile names it as ours
            env={**os.environ, "BREAKPAD_DUMP_LOCATION": os.path.join(profile, "crashes")})
        generation = self._generation
        context.on("close", lambda _: self._died(generation))
        context.on("page", _popup)  # a page a script opened: its tab's route does not cover it
        # A tab's own route answers all of its requests; this one is left for pages nobody
        # asked for (popups): nothing they ask reaches the network
        await context.route("**/*", _refuse)
        for page in context.pages:  # the window a persistent profile opens with
            await page.close()
        await self._cookies(context)
        self._context = context

    async def _cookies(self, context: BrowserContext) -> None:
        """The session's jar (--cookies, a --state crawl's jar) in the browser's, by domain,
        as aiohttp sends them."""
        jar = self.session.jar if self.session is not None else None
        if jar is None:
            return
        cookies: list[Any] = []
        for morsel in jar:
            domain = morsel["domain"]
            if domain and morsel.value is not None:
                cookies.append({"name": morsel.key, "value": morsel.value, "domain": domain,
                                "path": morsel["path"] or "/", "secure": bool(morsel["secure"])})
        if cookies:
            with contextlib.suppress(Exception):  # one the browser refuses is not sent: as a browser would
                await context.add_cookies(cookies)

    def credentials(self, url: str) -> list[tuple[str, str]]:
        """--header's Authorization and Cookie for this URL: only its roots' hosts (or
        --header-host's) get them, as on aiohttp (core/fetching/session.py)."""
        session = self.session
        if session is None or not session.credentials:
            return []
        try:
            host = urlsplit(url).hostname
        except ValueError:
            return []
        return session.credentials if host_key(host) in session.credential_hosts else []

    def _died(self, generation: int) -> None:
        if not self._closing and generation == self._generation:
            self._context = None

    async def close(self) -> None:
        """Close the browser and remove its profile; bounded, so a stuck Chromium cannot
        hold the crawl's end (stopping Playwright's driver then kills it)."""
        self._closing = True
        keep_routes(False)
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
            reaper, self._reaper = self._reaper, None
            if reaper is not None:  # its pass (milliseconds) ends what a close left; it exits, waited for
                reaper.close()

    async def fetch(self, url: str, reading: Callable[[], None], sent: Callable[[], None] | None,
                    phase: Callable[[str], None]) -> Response:
        carried = self._carried.pop(url, None)
        try:
            resp = await self.http.fetch(url, reading, sent, phase)
        except BaseException:
            if carried:  # no answer this time: what the last tab loaded is recorded now (`lost`)
                self._unfinished[url] = carried
            raise
        if not (resp.is_html and 200 <= resp.status < 300):
            if carried:
                resp.loaded = carried
            return resp  # an ordinary Record of this answer: nothing for a tab to build
        phase("navigating")
        resp.loaded = self._unfinished[url] = carried or []
        await self._tabs(url, resp, phase)  # raising (a cancel), its loads stay for `lost`
        del self._unfinished[url]
        return resp

    def carry(self, url: str, resp: Response) -> None:
        """The page failed in its tab and will be tried again: what it loaded is seen (never
        loaded again), so it is kept to be recorded with the page's next try."""
        if resp.loaded:
            self._carried.setdefault(url, []).extend(resp.loaded)
        resp.loaded = None

    def keep(self, url: str) -> None:
        """The page's try failed before its tab answered and it will be tried again: what an
        earlier tab loaded for it waits for that try (`carry`), not recorded as cancelled."""
        if left := self._unfinished.pop(url, None):
            self._carried.setdefault(url, []).extend(left)

    def tab(self, url: str) -> tuple[int, int] | None:
        """The monitors' view of a page's open tab: its requests in flight, bytes served to it."""
        tab = self.tabs.get(url)
        traffic = tab.traffic if tab is not None else None
        return None if traffic is None else (len(traffic.inflight), traffic.bytes)

    def lost(self, url: str) -> list[Loaded]:
        """What a page's tab claimed when its fetch() did not return (cancelled): each URL is
        seen and must still end in a Record, which the caller gives it. So are the loads a
        failed try left for the page's next one (`carry`), when that try never comes (a stop)."""
        return self._unfinished.pop(url, []) + self._carried.pop(url, [])

    async def _tabs(self, url: str, resp: Response, phase: Callable[[str], None]) -> None:
        """The page in a tab; a browser that died under it is replaced and the page fails with
        `browser: restarted`, for the attempt to try it again (--max-tries)."""
        if self._gone is not None:
            resp.error = BrowserGone(self._gone)
            return
        generation = self._generation
        try:
            await self._render(url, resp, phase)
        except _Died:
            await self._relaunch(generation)
            resp.error = BrowserFailure("browser: restarted (the browser died while the page loaded)")

    async def _relaunch(self, generation: int) -> None:
        """The first page to see a launch die starts the next one; a browser that dies
        MAX_DEATHS times with no page rendered between is given up (pages fail with why)."""
        async with self._lock:
            if generation != self._generation or self._gone is not None:
                return
            self._generation += 1
            self._deaths += 1
            if self._deaths >= MAX_DEATHS:
                self._gone = f"browser: the browser died {self._deaths} times in a row: no page can be rendered"
                return
            self.relaunches += 1
            try:
                await self._launch()
            except Exception as exc:
                self._gone = f"browser: the browser died and did not start again: {_first_line(exc)}"

    async def _render(self, url: str, resp: Response, phase: Callable[[str], None]) -> None:
        """A turn of the browser (it may restart first), then the page in a tab."""
        await self._turn()
        try:
            await self._tab(url, resp, phase)
        finally:
            async with self._turns:
                self._open -= 1
                self._rendered += 1
                self._check()
                self._turns.notify_all()

    async def _turn(self) -> None:
        """Wait while a restart is due and tabs are open; the last to see them closed restarts.
        A read of the memory under way is waited for first (milliseconds): it may make one due."""
        reading = self._reading
        if reading is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(reading)
        async with self._turns:
            while self._due is not None or self._restarting:
                if self._open == 0 and not self._restarting:
                    self._restarting = True
                    break
                await self._turns.wait()
            else:
                self._open += 1
                return
        try:
            await self._restart()
        finally:
            async with self._turns:
                self._restarting, self._due = False, None
                self._open += 1
                self._turns.notify_all()

    def _check(self) -> None:
        """Is a restart due: enough pages, or too much memory? The memory is read at most once
        a second, in a thread: a walk of /proc costs milliseconds per hundred processes."""
        if self._due is not None:
            return
        if self.restart_pages and self._rendered >= self.restart_pages:
            self._due = "pages"
            return
        now = asyncio.get_running_loop().time()
        if self.memory_limit and self._profiles and self._reading is None and now - self._memory_read >= MEMORY_EVERY:
            self._memory_read = now
            reading = self._reading = asyncio.ensure_future(asyncio.to_thread(_memory, self._profiles[-1]))
            reading.add_done_callback(self._measured)

    def _measured(self, reading: asyncio.Future[int]) -> None:
        self._reading = None
        if reading.cancelled() or reading.exception() is not None:
            return
        self.memory = reading.result()
        if self.memory > self.memory_limit and self._due is None:
            self._due = "memory"

    async def _restart(self) -> None:
        """A new browser for the next pages; no tab is open. Its profile goes with it."""
        async with self._lock:
            if self._gone is not None:
                return
            self._generation += 1  # the old one's close is no death
            old, self._context = self._context, None
            if old is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(old.close(), 10)
            while len(self._profiles) > 1 or (old is not None and self._profiles):
                shutil.rmtree(self._profiles.pop(0), ignore_errors=True)
            self.restarts += 1
            self._rendered, self.memory, self._memory_read = 0, 0, 0.0
            try:
                await self._launch()
            except Exception as exc:
                self._gone = f"browser: restarted, and did not start again: {_first_line(exc)}"

    async def _tab(self, url: str, resp: Response, phase: Callable[[str], None]) -> None:
        """Open the page in a tab; fills resp.dom and resp.loaded, or resp.error. A tab that
        crashes ends at once (its `crash` event), not at the limit."""
        context = self._context
        if context is None:
            raise _Died
        tab = _Tab(self, url, resp, phase)
        try:
            page = await context.new_page()
        except Exception as exc:
            if await self._dead(context):
                raise _Died from None
            resp.error = BrowserFailure(f"browser: could not open a tab: {_first_line(exc)}")
            return
        crashed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        page.on("crash", lambda _: _settle(crashed))
        runner = asyncio.ensure_future(tab.run(page))
        self.tabs[url] = tab
        try:
            async with asyncio.timeout(self.limit):
                await asyncio.wait((runner, crashed), return_when=asyncio.FIRST_COMPLETED)
            if crashed.done():
                if await self._dead(context):  # every tab "crashes" when the browser is killed
                    tab.settle("the browser died while the page loaded")
                    raise _Died
                resp.error = BrowserFailure("browser: tab crashed")
            else:
                runner.result()
        except TimeoutError:
            if not tab.read:
                resp.error = TabTimeout(
                    f"browser: page timed out (not done within --page-timeout {self.limit:g}s)")
        except Exception as exc:
            if await self._dead(context):
                tab.settle("the browser died while the page loaded")
                raise _Died from None
            resp.error = BrowserFailure(f"browser: {_crash(exc)}")
        else:
            if resp.error is None:
                self._deaths = 0
        finally:
            self.tabs.pop(url, None)
            crashed.cancel()
            runner.cancel()
            await asyncio.wait((runner,), timeout=5)  # its calls end as the tab closes, at the latest
            if runner.done() and not runner.cancelled():
                runner.exception()  # retrieved: a crashed tab's pending call fails, and that is known
            resp.moved = tab.moved
            traffic = tab.traffic
            if traffic is not None:
                resp.browser = {"requests": traffic.made, "failed": traffic.failed, "bytes": traffic.bytes}
            tab.closed = True  # no claim after this: the loads are about to be handed back
            await tab.refuse_pending()
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

    def __init__(self, browser: BrowserFetcher, url: str, resp: Response,
                 phase: Callable[[str], None] | None = None) -> None:
        self.browser, self.url, self.resp = browser, url, resp
        self.phase = phase if phase is not None else _nothing
        self.rules = browser.rules
        self.claimed: list[tuple[Loaded, asyncio.Future[_Kept | None] | None]] = []
        self.document_served = False
        self.closed = False  # the page is being closed: nothing more is claimed
        self.loaded: list[Loaded] = resp.loaded if resp.loaded is not None else []
        self.traffic: Traffic | None = None
        self.moved: str | None = None  # where a script sent the page (its redirect)
        self.links: list[str] = []  # what the page offered but no tab loads: downloads
        self.routes: set[Route] = set()  # requests the tab is waiting on
        self.read = False  # the final DOM is in hand: a limit reached after it cuts no page
        self._claims = 0  # claimed loads still in flight
        self._claims_done = asyncio.Event()
        self._claims_done.set()

    async def run(self, page: Page) -> None:
        """`load`, idle, scroll, idle, then the final DOM (core/fetching/pagedone.py); the
        caller's hard limit bounds it all."""
        traffic = self.traffic = Traffic()
        traffic.watch(page)
        page.on("dialog", _dismiss)
        page.on("download", self._download)
        await page.route("**/*", self._route)
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
        self.resp.dom = with_links(dom, [*await frame_links(page), *self.links])
        self.read = True
        # idle allows one request in flight: what the tab claimed is given its time to end,
        # so its Record holds its answer rather than "still loading"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._claims_done.wait(), self.browser.timeout)

    async def _download(self, download: Download) -> None:
        """Not saved: its URL is a link of the page, fetched (and recorded) as any link."""
        self.links.append(download.url)
        with contextlib.suppress(Exception):
            await download.cancel()

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
        browser = self.browser
        fut = browser.shared(url)
        if fut is not None:  # this browser has it, or is loading it for another tab
            kept = await fut
            if kept is not None:
                await self._fulfill(route, kept.status, kept.headers, kept.body)
                return
            # that load failed: this one goes on as for any URL seen before
        kind = request.resource_type
        if self.closed:
            await route.abort("blockedbyclient")
        elif self.rules.claim(url):
            loaded = Loaded(url, "E" if frame is not None else LETTERS.get(kind, "O"), self.url, False)
            share = browser.share(url) if kind in SHAREABLE else None
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
                       fut: asyncio.Future[_Kept | None] | None) -> None:
        """Send the tab's request from here, redirects off, and hand the tab the last answer.
        Chromium routes no redirect's target, so each hop is followed here: its target passes
        the rules first (refused: the tab's request is aborted, the target never asked for)
        and, when the first URL was claimed, is claimed too, as its redirect."""
        browser, target = self.browser, request.url
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
                await self._fulfill(route, answer.status, pairs, body)
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

    async def _fulfill(self, route: Route, status: int, headers: Any, body: bytes) -> None:
        if self.traffic is not None:
            self.traffic.bytes += len(body)
        await route.fulfill(status=status, headers=_served(headers), body=body)

    async def _headers(self, url: str, tabs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The headers a request to `url` goes with: the tab's (Playwright adds the browser's
        cookies), or, for a host --header's credentials are for, the tab's with them added
        and the browser's cookies merged into one Cookie header."""
        creds = self.browser.credentials(url)
        context = self.browser._context
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
                self.browser.kept(loaded.url, fut, None)


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _nothing(_: str) -> None:
    pass


async def _dismiss(dialog: Dialog) -> None:
    """alert(), confirm(), prompt(), beforeunload: dismissed, so no script waits on a person."""
    with contextlib.suppress(Exception):
        await dialog.dismiss()


async def _popup(page: Page) -> None:
    """A window a script opened: closed (the context's route refused its requests)."""
    with contextlib.suppress(Exception):
        if await page.opener() is not None:  # not one of the crawl's own tabs
            await page.close(run_before_unload=False)


async def _refuse(route: Route) -> None:
    with contextlib.suppress(Exception):
        await route.abort("blockedbyclient")


def _same_origin(url: str, other: str) -> bool:
    try:
        a, b = urlsplit(url), urlsplit(other)
        return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)
    except ValueError:
        return False


def _crash(exc: BaseException) -> str:
    """A tab's failure in words: a crashed tab says so."""
    text = _first_line(exc)
    return "tab crashed" if "crash" in text.lower() else f"the page could not be rendered: {text}"


def _memory(profile: str) -> int:
    return browsermemory.pss(browsermemory.processes(profile))


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

