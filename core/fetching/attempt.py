"""One URL's attempt, once its host's turn came, and what a failure does to the URL and its host.

The worker pool (core/crawler.py) hands a URL here when its host was due. `cleared` decides
whether it goes out at all: a host name known not to resolve ends it, robots.txt may refuse it,
and an origin's first page queues its sitemaps. `fetch` makes the one request, through a
`Fetcher` (core/fetching/fetcher.py): aiohttp's, or with --browser, for an in-scope page, a
Chromium tab. What comes back goes on to core/processing.py.

A failure with tries left raises `Retry`: the URL goes back to its host's queue and no worker
waits. What the failure says decides who waits: 429, 503 and failures to reach the host (DNS,
refused, TLS, connect timeout) back the whole host off; a 500 or a slow or cut response is this
URL's, which alone waits its back-off. Every failure counts toward retiring the host (2 strikes
for one that never answered, core/queueing/hosts.py); a success resets the count.
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import aiohttp

from .. import errors
from ..config import CrawlConfig
from ..monitor.stats import Stats, WorkerState
from ..output.provenance import utc_iso
from ..output.records import Record
from ..parsing.urls import host_of, host_origin
from ..queueing.frontier import Item
from ..queueing.hosts import ANSWERED, RETIRED, Host, Hosts
from ..queueing.kinds import PAGE
from .budget import BodyBudget
from .fetch import Loaded, Response, backoff, retry_after, retryable
from .fetcher import Fetcher
from .resolver import CrawlResolver
from .robots import Robots
from .sitemaps import Sitemaps, is_sitemap

if TYPE_CHECKING:  # imported by the crawl only with --browser: a plain crawl pays none of it
    from .browser import BrowserFetcher

NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)
HOST_KINDS = frozenset(("dns", "connect", "tls"))  # the host could not be reached: it backs off


class Retry(Exception):
    """A failed try with tries left: the URL goes back to its host's queue, at once
    (its host backs off) or after its own back-off (`after` seconds)."""

    def __init__(self, tries: int, after: float) -> None:
        super().__init__(tries)
        self.tries, self.after = tries, after


class Attempt:
    """The crawl's requests and their hosts' accounting: in flight per host, strikes,
    back-offs, retiring, names that do not resolve. One per crawl, made by `crawl()` once
    the session is open; `lost` is told the URLs a cancelled tab had claimed, each still
    owed a Record (core/processing.py `Processing.lost`)."""

    __slots__ = ("config", "stats", "sched", "loop", "fetcher", "browser", "robots", "sitemaps", "resolver",
                 "bodies", "lost", "_fetching", "_exact_gaps")

    def __init__(self, config: CrawlConfig, stats: Stats, sched: Hosts, loop: asyncio.AbstractEventLoop,
                 fetcher: Fetcher, *, robots: Robots | None, sitemaps: Sitemaps | None,
                 resolver: CrawlResolver | None, bodies: BodyBudget,
                 lost: Callable[[Item, list[Loaded]], None]) -> None:
        self.config, self.stats, self.sched, self.loop = config, stats, sched, loop
        self.fetcher, self.robots, self.sitemaps = fetcher, robots, sitemaps
        # --browser: the site's pages go to a tab (core/fetching/browser.py); set by the crawl
        self.browser: BrowserFetcher | None = None
        self.resolver, self.bodies, self.lost = resolver, bodies, lost
        self._fetching: dict[str, int] = {}  # host -> its fetches in flight from this process
        # a request's gap counts from when its headers leave only when a delay is asked for
        # (else from just before): the hook costs a call per request
        self._exact_gaps = config.delay > 0 or config.delay_factor > 0

    async def cleared(self, ws: WorkerState, item: Item, record: Record, host: Host) -> bool:
        """May the URL go out? False: it ends here and its Record says why (a name that does
        not resolve, robots.txt). A robots.txt that got no answer raises Retry."""
        dead = self.dead_name(item.url, host)
        if dead is not None:  # robots.txt or an earlier URL found it out: no request, no retry
            self.name_failed(host)
            record.fail(dead)
            return False
        if self.sitemaps is not None and record.kind == PAGE:  # an origin's first URL queues its sitemaps
            await self.sitemaps.visit(item.url)
        robots = self.robots
        if robots is not None:
            self.stats.set_phase(ws, "robots")
            waited, asked = robots.pending(item.url), self.loop.time()
            allowed = (await robots.check(item.url))[0]
            if waited and host_origin(item.url) in robots.unanswered:
                # (Redis: robots.txt is fetched here, not as the host's first turn.) It got no
                # answer: the host's strike, and the URLs that waited for it go back untried.
                self.host_failed(host, "connect", asked, None, block=True, strike=True)
                raise Retry(item.tries, 0.0)
            if waited:
                self.sched.answered(host)
            if not allowed:
                self.stats.robots_blocked += 1
                record.fail(errors.BlockedByRobots("disallowed by robots.txt"))
                return False
        return True

    async def fetch(self, ws: WorkerState, item: Item, record: Record, host: Host) -> Response | None:
        """One attempt; the host was due, so it goes out at once. None: it failed for good
        and `record` says why; with tries left, Retry."""
        sched = self.sched
        if host.strikes and self._fetching.get(host.key):
            # A host that stopped answering gets one request at a time (core/queueing/hosts.py
            # _due); on Redis a batch popped before its strike arrived there must wait too.
            raise Retry(item.tries, self.config.backoff)
        loop = self.loop
        attempt = ws.tries = record.tries = item.tries + 1
        last = attempt >= self.config.max_tries
        started = loop.time()
        sched.started(host, started)
        self.stats.set_phase(ws, "sending")  # core/fetching/steps.py says "pool" or "connecting" when it must wait
        record.fetched_at = utc_iso()
        fetcher = self.fetcher
        browser = self.browser
        if browser is not None and record.kind == PAGE and not ws.check and not is_sitemap(item.discovery):
            fetcher = browser  # --browser: the site's pages in a tab
            # whose turns its tabs' requests wait for (core/fetching/tabturns.py)
            browser.turns.hosts, browser.turns.robots = sched, self.robots
        headers_in: list[bool] = []

        def reading() -> None:
            headers_in.append(True)
            self.stats.set_phase(ws, "reading")
        fetching = self._fetching
        fetching[host.key] = fetching.get(host.key, 0) + 1
        try:
            resp = await fetcher.fetch(item.url, reading,
                                       (lambda: sched.started(host, loop.time())) if self._exact_gaps else None,
                                       lambda phase: self.stats.set_phase(ws, phase))
        except NETWORK_ERRORS as exc:
            answered = bool(headers_in)  # the headers came: a cut or slow body is this URL's own
            self.free_slot(ws)
            dead = errors.unresolvable(exc)
            if dead is not None:  # a fact, not a failure to count: this URL ends now, untried again
                if not host.flags & ANSWERED:
                    self.name_failed(host)
                record.fail(dead)
                return None
            kind = errors.error_kind(exc)
            # No HTTP response at all (refused, reset, dropped, no headers in time): the host's
            # failure, which backs it off and counts toward retiring it. aiohttp retries a stale
            # keep-alive connection itself, so a healthy host never gets here for that.
            reach = not answered or kind in HOST_KINDS
            self.host_failed(host, kind, started, None, block=reach, strike=reach or kind == "timeout")
            if last or host.flags & RETIRED:
                record.fail(exc, network_error(exc, self.config.timeout))
                return None
            if browser is not None:  # what an earlier tab loaded waits for the next try
                browser.keep(item)
            self.stats.retries += 1
            raise Retry(attempt, 0.0 if reach else self._url_backoff(attempt)) from None
        except BaseException:  # a cancel under a tab: what it claimed is seen, so recorded now
            self._lose(item)
            self.free_slot(ws)
            raise
        finally:
            if fetching[host.key] <= 1:
                del fetching[host.key]
            else:
                fetching[host.key] -= 1
        self.free_slot(ws)
        if not retryable(resp.status):
            sched.succeeded(host, started, loop.time() - started)
            if (resp.error is not None and browser is not None and fetcher is browser and not last
                    and getattr(resp.error, "retryable", False)):
                # The server answered; the tab timed out, crashed or lost its browser: the page
                # is tried again (a new tab, or a new browser), as a network error would be
                self.bodies.give(resp.held)
                resp.held = 0
                browser.carry(item, resp)
                self.stats.retries += 1
                raise Retry(attempt, self._url_backoff(attempt))
            return resp
        sched.answered(host)  # a 429 or a 5xx: a live server, however unwell
        self.bodies.give(resp.held)  # an error page is not parsed: only a status, at most a Retry-After
        resp.held = 0
        host_wide = resp.status in (429, 503)
        wait = retry_after(resp.headers.get("Retry-After"), self.config.max_wait) if host_wide else None
        self.host_failed(host, str(resp.status), started, wait, block=host_wide, strike=False)
        if last or host.flags & RETIRED:
            return resp
        if browser is not None and fetcher is browser:  # what an earlier tab loaded waits for the next try
            browser.carry(item, resp)
        self.stats.retries += 1
        raise Retry(attempt, 0.0 if host_wide else self._url_backoff(attempt))

    def _lose(self, item: Item) -> None:
        if self.browser is not None:
            self.lost(item, self.browser.lost(item.url))

    def free_slot(self, ws: WorkerState) -> None:
        """The host's fetch slot goes back once: after the fetch, or when the URL ended
        without one (robots said no, a cancel, a surprise)."""
        host, ws.slot = ws.slot, None
        if host is not None:
            self.sched.finished(host)  # type: ignore[arg-type]  # WorkerState.slot holds a Host (core/monitor/stats.py)

    def host_failed(self, host: Host, why: str, started: float, retry_after: float | None, *,
                    block: bool, strike: bool) -> None:
        """Tell the host (core/queueing/hosts.py Hosts.failed); retired when it says so, its
        queued URLs come out at once, each for its HostRetired Record."""
        if self.sched.failed(host, why, started, self.loop.time(), retry_after, block=block, strike=strike):
            self.sched.retire(host, host.why)

    def _url_backoff(self, attempt: int) -> float:
        return backoff(self.config.backoff, attempt, self.config.max_wait)

    def dead_name(self, url: str, host: Host) -> errors.NameNotFound | None:
        """The URL's host name is known not to resolve (core/fetching/resolver.py): a fact about
        the host for the whole crawl, so its URLs fail at once, each with that reason. Only for
        a host that never answered; one that did (the site's own, always) is never retired for
        it (an expired cache or a resolver's bad minute), but each of its URLs whose name does not
        resolve still fails at once, without retry or strike (`fetch`)."""
        resolver = self.resolver
        if host.flags & ANSWERED or resolver is None or not resolver.dead:
            return None
        name = host_of(url)
        why = resolver.not_found(name)
        return errors.NameNotFound(name, why) if why else None

    def name_failed(self, host: Host) -> None:
        """A name that does not resolve retires its host at once (no strike count, no back-off:
        every queued URL of it comes out for its Record) when the name is the whole host; queued
        by registered domain, one dead subdomain must not take its siblings' pages."""
        if self.config.queue_by == "host":
            self.sched.retire(host, "dns")


def network_error(exc: BaseException, timeout: float) -> str:
    """A network failure's reason in words: the errno's words, how long was waited."""
    if isinstance(exc, TimeoutError) and not str(exc):
        return f"TimeoutError: no response within {timeout:g}s"
    text = errors.describe(exc)
    code = getattr(getattr(exc, "os_error", None), "errno", None) or getattr(exc, "errno", None)
    if isinstance(code, int) and code > 0:  # "Connect call failed" says less than the errno
        words = os.strerror(code)
        if words.lower() not in text.lower():
            text += f" ({words.lower()})"
    if errors.error_kind(exc) == "timeout" and "within" not in text:  # the reason says how long
        text += f" (no answer within {timeout:g}s)"
    return text
