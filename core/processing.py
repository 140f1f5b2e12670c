"""What one response becomes: its Record's fields, its WARC records, its links.

The way of a URL is a pipeline: the pool (core/crawler.py) takes it when its host is due,
the attempt (core/fetching/attempt.py) fetches it, this module makes of the answer what it
holds, and the pool emits the Record. Scrapy's scraper has this role.

One path for every response, whichever fetcher produced it: the attempt's own answer, and
each URL a browser tab loaded for a page (core/fetching/browser.py), which gets a Record of
its own as a requisite of the page, its WARC records and its links, as if aiohttp had
fetched it. The two differ only where the tab's answer is already final: a redirect the tab
followed is noted, not followed again, and a 5xx it got was one try, not a retried failure.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from . import errors
from .config import CrawlConfig
from .fetching.budget import BodyBudget
from .fetching.fetch import REDIRECTS, Loaded, Response, decode, retryable
from .fetching.sitemaps import Sitemaps, is_sitemap
from .monitor.stats import Stats, WorkerState
from .output.provenance import hop
from .output.records import Record, ResponseSink
from .parsing import malloc
from .parsing.cuts import CutPage
from .queueing.follow import Follow
from .queueing.frontier import Frontier, Item
from .queueing.hosts import Host, Hosts
from .queueing.kinds import EXTERNAL, PAGE, REQUISITE, is_stylesheet
from .queueing.parts import Lookup
from .queueing.scope import Scope

LARGE_BODY = 1 << 20  # after parsing a body this large, give its memory back (core/parsing/malloc.py)


class KeptOnCancel(asyncio.CancelledError):
    """A cancel that arrived once the URL's response was fetched and archived: its Record
    is emitted and the URL counts as done, then the worker stops as cancelled."""

    def __init__(self, record: Record) -> None:
        super().__init__()
        self.record = record


def new_record(item: Item, tries: int = 0) -> Record:
    return Record(url=item.url, depth=item.depth, tries=tries, via=item.via, discovery=item.discovery)


class Processing:
    """Made by the crawl once its sinks and sitemaps are known; what it changes in the crawl
    goes through what it was given: `admit` queues a redirect's target (core/crawler.py
    `_admit`), `emit` writes a Record, `fail` stops the crawl (the archive's disk)."""

    __slots__ = ("config", "stats", "frontier", "sched", "scope", "follow", "kinds", "links", "sinks", "bodies",
                 "sitemaps", "admit", "emit", "fail")

    def __init__(self, config: CrawlConfig, stats: Stats, frontier: Frontier, sched: Hosts, scope: Scope,
                 follow: Follow, *, sinks: list[ResponseSink], bodies: BodyBudget, sitemaps: Sitemaps | None,
                 admit: Callable[[str, int, int, str | None, str], bool], emit: Callable[[Record], None],
                 fail: Callable[[BaseException], None]) -> None:
        self.config, self.stats, self.frontier, self.sched, self.scope = config, stats, frontier, sched, scope
        self.follow, self.kinds, self.links = follow, follow.kinds, follow.links
        self.sinks, self.bodies, self.sitemaps = sinks, bodies, sitemaps
        self.admit, self.emit, self.fail = admit, emit, fail

    async def process(self, ws: WorkerState, item: Item, record: Record, resp: Response, host: Host,
                      since: float) -> None:
        """The attempt's answer (fetched from `since`, by the stats' clock) into `record`;
        returns once the archive holds its responses: the URL counts as done only then."""
        written: list[Awaitable[None]] = []
        loaded: list[Record] = []
        try:  # no await before the loads' Records: a cancel must not lose the URLs the tab claimed
            self._answer(item, record, resp, ws.host or "", (self.stats.clock() - since) * 1000, written)
            if resp.loaded is not None:  # the browser's: what the page loaded, each URL its Record
                self._loads(item, record, resp.loaded, written, loaded)
                if resp.error is not None:  # a hung or crashed tab: the page's Record says why, in words
                    record.fail(resp.error, str(resp.error))
                record.browser = resp.browser
                if resp.moved is not None:  # a script moved the page: its redirect, not followed
                    record.next_url = resp.moved
                if resp.dom is not None:  # its links are those of the HTML the scripts made
                    resp.body, resp.charset = resp.dom.encode("utf-8", "replace"), "utf-8"
                    resp.dom = None
            if self.sitemaps is not None and record.kind == PAGE:  # the origin answered: /sitemap.xml may be probed
                await self._probe_after(host, item.url)
            if resp.status in REDIRECTS:
                await self._redirect(item, resp, record)
            elif retryable(resp.status):
                record.fail(errors.HTTPStatusError(f"HTTP {resp.status} after {record.tries} tries"))
            elif self.sitemaps is not None and is_sitemap(item.discovery):
                self.stats.set_phase(ws, "parsing")
                await self.sitemaps.read(item, resp, record)
            else:
                self._links(ws, item, resp, record)
        except BaseException:  # cancelled (or a surprise) after the loads: their Records still go out
            for other in loaded:
                self.emit(other)
            raise
        finally:  # parsed (or not to be): its bytes no longer count (core/fetching/budget.py)
            self.bodies.give(resp.held)
        try:
            if written:  # the URL counts as done only once its records are in the file
                await self._written(written, record)
        finally:
            for other in loaded:  # after their archive records (or a stop's flush), as a page's own
                self.emit(other)

    def _answer(self, item: Item, record: Record, resp: Response, host: str, ms: float,
                written: list[Awaitable[None]]) -> None:
        """What every response gives its Record, the counters and the archive: status, size,
        digest, its kind now that it answered (core/queueing/kinds.py), its WARC records
        (built only when a sink keeps responses)."""
        record.status = resp.status
        record.content_type = resp.content_type
        record.size = len(resp.body)
        record.truncated = resp.truncated
        record.digest = resp.digest
        kind = record.kind = self.kinds.answered(record.kind, item.url, resp.status, resp.is_html)
        self.stats.page(host, resp.status, record.size, ms, kind)
        if resp.truncated:
            self.stats.truncated += 1
        # a tab's request keeps the page's method (core/fetching/tabanswer.py): a script's POST
        method = getattr(resp, "method", "GET")
        for sink in self.sinks:
            w = sink.response(item.url, resp.status, resp.reason, list(resp.headers.items()), resp.body,
                              list(resp.request_headers.items()), truncated=resp.truncated, method=method,
                              digest=resp.digest)
            if w is not None:
                written.append(w)

    def _links(self, ws: WorkerState | None, item: Item, resp: Response, record: Record) -> None:
        """The references an answer holds: a page's (an external page's for its fragments), a
        stylesheet's url()s."""
        kind = record.kind
        if resp.is_html and (kind == PAGE or (kind == EXTERNAL and self.kinds.fragments)):
            if ws is not None:
                self.stats.set_phase(ws, "parsing")
            self._parse(item, resp, record)
        elif self.kinds.requisites and is_stylesheet(resp.mime, item.discovery) and resp.status < 300:
            if ws is not None:
                self.stats.set_phase(ws, "parsing")
            self._parse(item, resp, record, css=True)

    def _loaded(self, page: Item, page_record: Record, ld: Loaded, written: list[Awaitable[None]]) -> Record:
        """A URL the page loaded in the browser (claimed for it, so never fetched again): a
        Record of its own, a requisite of the page (or what its answer makes it)."""
        item = self._load_item(page, ld)
        record = new_record(item, tries=1)
        record.kind, record.fetched_at = REQUISITE, page_record.fetched_at
        r = ld.response
        if r is None:
            failure = _browser_failure(ld.error or "no answer")
            if isinstance(failure, errors.BlockedByRobots):  # refused in the tab: never requested, as on aiohttp
                record.tries, record.fetched_at = 0, None
            record.fail(failure)
            return record
        self._answer(item, record, r, self.sched.key(ld.url), 0.0, written)
        if r.status in REDIRECTS:  # the browser followed it; its target, if new, is claimed too
            self.stats.redirects += 1
            location = r.headers.get("Location", "").strip()
            record.next_url = self.links.join(ld.url, location) if location else None
        else:
            self._links(None, item, r, record)
        return record

    async def settle(self, page: Item, page_record: Record, loads: list[Loaded]) -> None:
        """What an earlier, failed tab of the page loaded, when the page ended without another
        tab (its host retired, robots.txt said no, its last try failed before a tab): each
        URL its Record with the answer the tab had, archived as the page's own loads are."""
        written: list[Awaitable[None]] = []
        records: list[Record] = []
        self._loads(page, page_record, loads, written, records)
        try:
            if written:
                await self._written(written, page_record)
        finally:
            for record in records:
                self.emit(record)

    def _loads(self, page: Item, page_record: Record, loads: list[Loaded], written: list[Awaitable[None]],
               records: list[Record]) -> None:
        """Each load its Record, into `records` as it is made (a cancel keeps those made). A
        surprise in one load fails its Record, never the later loads': they were claimed,
        and nothing else would ever record them."""
        for ld in loads:
            try:
                records.append(self._loaded(page, page_record, ld, written))
            except Exception as exc:
                record = new_record(self._load_item(page, ld), tries=1)
                record.kind = REQUISITE
                record.fail(exc)
                records.append(record)

    def lost(self, page: Item, loads: list[Loaded]) -> None:
        """URLs a tab claimed for a page whose worker was cancelled: seen, so each gets its
        Record here (cancelled, as a stop's queued URLs), else it would have none."""
        for ld in loads:
            record = new_record(self._load_item(page, ld))
            record.kind = REQUISITE
            failure = _browser_failure(ld.error or "")
            if not isinstance(failure, errors.BlockedByRobots):  # a refusal stands: it was never to be fetched
                failure = errors.Cancelled("the page's worker stopped while the browser loaded this URL")
            record.fail(failure)
            self.emit(record)

    def _load_item(self, page: Item, ld: Loaded) -> Item:
        path = hop(page.discovery, ld.letter)
        return Item(ld.url, self.config.max_redirect, page.depth + 1, 0, ld.via,
                    hop(path, "R") if ld.redirected else path)

    async def _probe_after(self, host: Host, url: str) -> None:
        """The probe is one of the host's requests: its next turn, or, when it has no URL
        queued to take a turn with, now in this worker once the host is due."""
        sitemaps = self.sitemaps
        assert sitemaps is not None
        if not sitemaps.wants_probe(url):
            return
        if host.queued:
            self.sched.want_probe(host)
            return
        loop = asyncio.get_running_loop()
        wait = max(host.next_at, host.backoff_until) - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)  # only this host's last page waits, and only once
        self.sched.started(host, loop.time())
        await sitemaps.answered(url)

    async def _redirect(self, item: Item, resp: Response, record: Record) -> None:
        """A redirect by hand: its target passes scope and the seen set here, so a target
        already seen is a merge, and a seed that moved brings its new host into scope."""
        self.stats.redirects += 1
        location = resp.headers.get("Location", "").strip()
        target = self.links.join(item.url, location) if location else None
        if target is None:
            record.fail(errors.MissingLocation(f"HTTP {resp.status} without a usable Location header"))
            return
        record.next_url = target
        if isinstance(self.frontier, Lookup):  # a cluster asks Redis: merged anywhere?
            seen = await self.frontier.lookup(target)
        else:
            seen = self.frontier.seen(target)  # once: may be SQLite
        if not seen:
            self.stats.redirect(item.url, target, resp.status)
        if item.depth == 0 and not item.discovery.strip("R") and not self.scope.allows(target):
            self.scope.add_root(target)  # a seed that moved: its new host is a root's (seedsRedirectNewSeeds)
            self.sched.relane(target)
        if item.redirects_left <= 0:
            record.fail(errors.TooManyRedirects(f"more than {self.config.max_redirect} redirects"))
        elif not self.kinds.redirect_allowed(record.kind, target):  # its kind, set by _answer
            return
        elif seen:
            record.merged = True
            self.stats.merge(item.url, target, resp.status)
        else:
            self.admit(target, item.redirects_left - 1, item.depth, item.url, hop(item.discovery, "R"))

    def _parse(self, item: Item, resp: Response, record: Record, *, css: bool = False) -> None:
        """Decode and hand the text to core/queueing/follow.py; the body's memory goes first."""
        large = len(resp.body) >= LARGE_BODY
        text, record.encoding, slimmed = decode(resp, parts=not css)  # slimmed: ids not all known
        resp.body = b""  # sinks had it: free it before the tree (decode did if it slimmed it)
        if css:
            assert not isinstance(text, CutPage)
            self.follow.stylesheet(item, record, text if isinstance(text, str) else text.decode("utf-8", "replace"))
        else:
            self.follow.page(item, record, text, resp.headers.getall("X-Robots-Tag", ()), slimmed)
        del text
        if large:
            malloc.trim()

    async def _written(self, futures: list[Awaitable[None]], record: Record) -> None:
        """Wait for the archive to hold this response. Cancelled meanwhile (a stop), the wait
        finishes blocking (the records are already queued: a moment) and the Record is kept
        (`KeptOnCancel`), so the URL is not fetched, and archived, twice."""
        try:
            for w in futures:
                await w
        except asyncio.CancelledError:
            for sink in self.sinks:
                sink.flush()
            raise KeptOnCancel(record) from None
        except OSError as exc:  # the archive's disk: the crawl stops and says so
            self.fail(exc)
            raise


def _browser_failure(why: str) -> Exception:
    """A load's failure in words as its Record's error: a URL robots.txt refused in the tab is
    skipped as on the aiohttp path (core/fetching/browser_rules.py), anything else failed."""
    from .fetching.browser import BrowserFailure  # loaded already: only a --browser crawl gets here
    from .fetching.browser_rules import ROBOTS
    if why == ROBOTS:
        return errors.BlockedByRobots(why)
    return BrowserFailure(why)
