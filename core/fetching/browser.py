"""`--browser`: a page in a headless Chromium tab, for sites whose pages scripts build.

Only in-scope pages come here (core/fetching/attempt.py decides); requisites the page did not load,
external checks, robots.txt and sitemaps stay on aiohttp. A page's life:

1. Its own request is the crawl's aiohttp attempt (`HttpFetcher`): redirects by hand, the
   body cap, the session's headers, cookies, proxy and resolver, retries and error kinds
   all stay as they are, and a URL that is no HTML (or no 2xx) is an ordinary Record of
   that one response, never opened in a tab.
2. An HTML 2xx is opened in a tab, its document served from that response (`Fetch.fulfillRequest`):
   the server sees one request for it. When the page is done is core/fetching/pagedone.py's:
   `load`, the tab's own network idle, scrolling to the bottom in steps, idle again; then
   `page.content()` is the HTML the scripts made, for links, with those of same-origin
   frames added. Dialogs are dismissed, popups blocked, downloads never sent (their URL
   becomes a link of the page), and a script that moves the page to
   another URL is recorded as the page's redirect (`Response.moved`), not followed here.
3. Chromium's own network stack sends the tab's requests (--proxy included), each paused
   through DevTools `Fetch` (core/fetching/devtools.py) before it leaves and, when its
   answer is to be recorded or kept, once that answer's headers are in. It passes the
   crawl's rules first (`Rules.refusal`: --exclude, ignores, robots.txt): a refused one
   fails in the browser (blocked by client; one robots.txt refuses is claimed for its skip
   Record, as on aiohttp). A URL never seen is *claimed* (`Rules.claim`: marked seen), so
   aiohttp never fetches it; its answer comes back in `Response.loaded` for its own Record
   and WARC records. A URL seen before is not requested again: served from what this
   browser already loaded when it can be, else an image, font or media file is refused
   (links never depend on them) and anything else goes out unrecorded (a page's scripts
   need it), kept to serve this browser's later tabs. What goes out waits for its host's
   turn (core/fetching/tabturns.py; on Redis, there). A claimed answer is recorded with
   its method, its body streamed and cut at --max-bytes; a redirect is recorded and
   Chromium follows it, its target paused again: it passes the rules too, and a claimed
   URL's target is claimed as its redirect. A load that failed, or no whole 2xx, is not
   served to other tabs: they ask again.
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

Where each part lives: which Chromium and its flags, core/fetching/chromium.py; the one
browser's launches, restarts and relaunches, core/fetching/browserlife.py; one tab's life,
core/fetching/tab.py; the routes answering its requests, core/fetching/tabroutes.py, and
what tabs share, core/fetching/tabshare.py. Here: `BrowserFetcher`, which ties them to the
crawl's Fetcher interface (core/fetching/fetcher.py) and keeps, per page, what its tabs
loaded until the page's Record takes it. Other code imports the browser's names from here,
only when a crawl asks for --browser.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .browser_rules import Rules
from .browserlife import MAX_DEATHS, MEMORY, MEMORY_EVERY, PAGE_TIMEOUT, RESTART_PAGES, BrowserLife
from .chromium import DEFAULT_PATH, FLAGS, FLAGS_ENV, check, executable
from .fetch import Loaded, Response
from .fetcher import HttpFetcher
from .tab import BrowserFailure, BrowserGone, Died, Tab, TabTimeout
from .tabshare import SHARED_BYTES, Shared

if TYPE_CHECKING:
    from ..config import CrawlConfig
    from ..queueing.frontier import Item
    from .session import CrawlSession

__all__ = ["DEFAULT_PATH", "FLAGS", "FLAGS_ENV", "MAX_DEATHS", "MEMORY", "MEMORY_EVERY", "PAGE_TIMEOUT",
           "RESTART_PAGES", "SHARED_BYTES", "BrowserFailure", "BrowserFetcher", "BrowserGone", "Rules",
           "TabTimeout", "check", "executable"]


class BrowserFetcher(BrowserLife):
    """Pages in Chromium tabs, one tab per page being fetched (so at most -c), each closed
    after its page: no state leaks from one page into the next but the profile's cookies."""

    def __init__(self, http: HttpFetcher, rules: Rules, *, path: str | None, timeout: float, max_bytes: int,
                 user_agent: str, config: CrawlConfig | None = None, session: CrawlSession | None = None) -> None:
        super().__init__(path=path, timeout=timeout, max_bytes=max_bytes, user_agent=user_agent, config=config,
                         session=session)
        self.http, self.rules = http, rules
        self.turns.shared = rules.shared_hosts()  # on Redis a tab's turns are taken there
        # URLs this browser loaded (or is loading) for a page: other tabs are served from here
        self.answers = Shared()
        # each page's claimed loads until fetch() returns them: a page whose worker is
        # cancelled meanwhile leaves them here, for the crawl to record (`lost`)
        self._unfinished: dict[str, list[Loaded]] = {}
        # what a failed tab loaded for a page that will be tried again: recorded with its last try
        self._carried: dict[str, list[Loaded]] = {}
        self._carried_items: dict[str, Item] = {}  # their pages, for a stop that leaves them queued
        # each open tab's page URL -> what it is doing now (the monitors' phase, requests, bytes)
        self.tabs: dict[str, Tab] = {}

    async def fetch(self, url: str, reading: Callable[[], None], sent: Callable[[], None] | None,
                    phase: Callable[[str], None]) -> Response:
        carried = self._carried.pop(url, None)
        self._carried_items.pop(url, None)
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

    def carry(self, item: Item, resp: Response) -> None:
        """The page failed in its tab and will be tried again: what it loaded is seen (never
        loaded again), so it is kept to be recorded with the page's next try."""
        if resp.loaded:
            self._carried.setdefault(item.url, []).extend(resp.loaded)
            self._carried_items[item.url] = item
        resp.loaded = None

    def keep(self, item: Item) -> None:
        """The page's try failed before its tab answered and it will be tried again: what an
        earlier tab loaded for it waits for that try (`carry`), not recorded as cancelled."""
        if left := self._unfinished.pop(item.url, None):
            self._carried.setdefault(item.url, []).extend(left)
            self._carried_items[item.url] = item

    def leftovers(self) -> list[tuple[Item, list[Loaded]]]:
        """At the end: pages still waiting for a next try (kept in a state file, not drained)
        with what their failed tabs loaded, each URL to get its Record."""
        out = [(self._carried_items.pop(url), loads) for url, loads in self._carried.items()]
        self._carried.clear()
        return out

    def tab(self, url: str) -> tuple[int, int] | None:
        """The monitors' view of a page's open tab: its requests in flight, bytes served to it."""
        tab = self.tabs.get(url)
        traffic = tab.traffic if tab is not None else None
        return None if traffic is None else (len(traffic.inflight), traffic.bytes)

    def lost(self, url: str) -> list[Loaded]:
        """What a page's tab claimed when its fetch() did not return (cancelled): each URL is
        seen and must still end in a Record, which the caller gives it. So are the loads a
        failed try left for the page's next one (`carry`), when that try never comes (a stop)."""
        self._carried_items.pop(url, None)
        return self._unfinished.pop(url, []) + self._carried.pop(url, [])

    async def _tabs(self, url: str, resp: Response, phase: Callable[[str], None]) -> None:
        """The page in a tab; a browser that died under it is replaced and the page fails with
        `browser: restarted`, for the attempt to try it again (--max-tries)."""
        if self.gone is not None:
            resp.error = BrowserGone(self.gone)
            return
        generation = self.generation
        try:
            await self._render(url, resp, phase)
        except Died:
            await self.relaunch(generation)
            resp.error = BrowserFailure("browser: restarted (the browser died while the page loaded)")

    async def _render(self, url: str, resp: Response, phase: Callable[[str], None]) -> None:
        """A turn of the browser (it may restart first), then the page in a tab."""
        await self.turn()
        try:
            await Tab(self, self.answers, self.rules, url, resp, phase).open(self.tabs)
        finally:
            await self.turned()
