"""The worker-pool crawler of "A Web Crawler With asyncio Coroutines", grown up.

One frontier of (url, redirects_left, depth) items, drained by N worker tasks;
crawl() waits on join() and then cancels the workers. Redirects are followed by
hand, so every hop passes scope and robots and can be recorded as a merge. The
control surface (pause, resume, set_concurrency, cancel_worker, stop, and the steering
of core/steering/steer.py: ignores, seeds, host pause and delay) is plain methods, safe to call
from the same loop at any time: core/surface.py's `Engine` and `Steer`.
"""
from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp

from .. import __version__
from . import errors
from .config import CrawlConfig
from .fetching.budget import BodyBudget
from .fetching.fetch import REDIRECTS, Loaded, Response, backoff, decode, retry_after, retryable
from .fetching.fetcher import Fetcher, HttpFetcher
from .fetching.robots import Robots
from .fetching.session import CrawlSession
from .fetching.sitemaps import Sitemaps, is_sitemap
from .monitor.queueview import QueueStats, QueueView
from .monitor.stats import HostView, Stats, WorkerState
from .outcomes import FAILED
from .output.provenance import hop, utc_iso
from .output.records import JsonlSink, Record, Redacting, ResponseSink, Sink
from .parsing import malloc
from .parsing.cuts import CutPage
from .parsing.urls import canonical, host_of, host_origin, netloc_of
from .queueing.follow import Follow
from .queueing.frontier import Frontier, Item, MemoryFrontier
from .queueing.hosts import (
    ANSWERED,
    CHECKS,
    NEEDS_PROBE,
    NEEDS_ROBOTS,
    PAGES,
    RETIRED,
    STEP_PENDING,
    Host,
    Hosts,
    Politeness,
)
from .queueing.kinds import EXTERNAL, PAGE, REQUISITE, is_stylesheet
from .queueing.parts import Failing, Lookup, Scheduled
from .queueing.scope import Scope
from .steering.ignores import IgnoreResult, Ignores, IgnoreSetView, IgnoreView
from .steering.steer import SeedResult, Steering
from .surface import Parts

if TYPE_CHECKING:  # imported by crawl() only with --browser: a plain crawl pays none of it
    from .fetching.browser import BrowserFetcher

VERSION = __version__
NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)
HOST_KINDS = frozenset(("dns", "connect", "tls"))  # the host could not be reached: it backs off
LARGE_BODY = 1 << 20  # after parsing a body this large, give its memory back (core/parsing/malloc.py)


class Crawler:
    def __init__(
        self,
        config: CrawlConfig,
        *,
        frontier: Frontier | None = None,
        sinks: Sequence[Sink] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        roots = [canonical(r) for r in config.roots]
        bad = [r for r, c in zip(config.roots, roots, strict=True) if c is None]
        if bad or not roots:
            raise errors.UsageError(f"not an http(s) URL with a host: {bad[0] if bad else '(none)'}")
        self.config = config
        self.roots: list[str] = [r for r in roots if r]
        store: Frontier = frontier if frontier is not None else MemoryFrontier()
        # Every store schedules by host: core/queueing/hosts.py, or in Redis core/cluster/hosts.py.
        if not isinstance(store, Scheduled):
            raise TypeError("a frontier must schedule by host: .hosts and next_wake_in() "
                            "(core/queueing/parts.py Scheduled)")
        self.frontier = store
        self.sinks: list[Sink] = list(sinks)
        if config.output:
            self.sinks.append(JsonlSink(config.output))
        self._response_sinks: list[ResponseSink] = []
        self.scope = Scope(tuple(self.roots), config.scope, config.include, config.exclude)
        self.agent = config.user_agent or f"crawltop/{VERSION} (+https://example.invalid/crawltop)"
        self.stats = Stats(clock=clock)
        self.stats.queue_size = lambda: self.frontier.size
        self.stats.seen_size = lambda: self.frontier.seen_count
        sched = store.hosts
        self._sched: Hosts = sched
        self._host_key: Callable[[str], str] = netloc_of
        self._bodies = BodyBudget()  # bytes of large bodies read or parsed at once (core/fetching/budget.py)
        self._exact_gaps = config.delay > 0 or config.delay_factor > 0
        # the crawl's loop, kept by crawl(): asyncio.get_running_loop() is a getpid() syscall
        # on 3.11, and the fetch path asked for it on every page (1% of a small page's CPU)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._share_hosts(sched)
        self._target = config.concurrency
        self.stats.target_concurrency = config.concurrency
        self._tasks: dict[int, asyncio.Task[None]] = {}  # the page workers (-c, + and -)
        # The check workers: external links and other hosts' requisites, a pool of their own
        # (--checks), so a dead host's timeouts never hold a worker the site's pages need.
        # Without external checks or requisites only a stray URL (a redirect off the site) is one.
        checks = config.checks if config.external or config.requisites else 1
        self._check_target = self.stats.target_checks = max(1, checks)
        self._check_tasks: dict[int, asyncio.Task[None]] = {}
        self._retired: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None
        self._held: dict[int, Item] = {}
        self._fetching: dict[str, int] = {}  # host -> its fetches in flight from this process
        self._next_id = 0
        self._unpaused = asyncio.Event()
        self._stopping = asyncio.Event()
        self._limit: asyncio.TimerHandle | None = None  # --max-time's stop
        self._session: aiohttp.ClientSession | None = None
        self._fetcher: Fetcher | None = None  # every URL's attempt (core/fetching/fetcher.py)
        self._browser: BrowserFetcher | None = None  # --browser: the site's pages (core/fetching/browser.py)
        self._robots: Robots | None = None
        self._sitemaps: Sitemaps | None = None
        if not config.start_paused:
            self._unpaused.set()
        else:
            self.stats.state = "PAUSED"
        self.steering = Steering(frontier=store, sched=sched, stats=self.stats, scope=self.scope, roots=self.roots,
                                 config=config, admit=self._admit, emit=self._emit)
        # what a page adds to the crawl, by kind (core/queueing/follow.py)
        self.follow = Follow(config, self.scope, self.agent, self._queue, store.split_seen, self.queue_stats,
                             self.stats)
        self.kinds, self.links = self.follow.kinds, self.follow.links

    def _share_hosts(self, sched: Hosts) -> None:
        c = self.config
        sched.configure(Politeness(
            delay=c.delay, per_host=c.per_host, max_crawl_delay=c.max_crawl_delay, delay_factor=c.delay_factor,
            max_failures=c.host_max_failures, budget=c.max_pages_per_host, queue_by=c.queue_by,
            robots=c.robots, backoff=c.backoff, max_backoff=c.max_wait, one_until_answered=True))
        self._host_key = sched.key
        scope = self.scope
        sched.sort_into_lanes(lambda url: not scope.on_site(url))
        self.stats.hosts = sched.hosts  # type: ignore[assignment]  # Host rows are HostStats and more
        self.stats.make_host = sched.host  # type: ignore[assignment]  # as above: a Host is a HostStats and more
        self.stats.over_budget = lambda: sched.over_budget
        counts: list[Any] = [-2.0, {}, ""]

        def host_counts() -> dict[str, int]:  # O(hosts): at most once a second, and at the end
            now = time.monotonic()
            if now - counts[0] >= 1.0 or counts[2] != self.stats.state:
                raw = sched.counts(now)
                if self.stats.state in ("PAUSED", "STOPPING"):  # the whole crawl paused: so are its hosts
                    moved = raw.pop("ready", 0) + raw.pop("waiting", 0)
                    raw["paused"] = raw.get("paused", 0) + moved
                counts[:] = [now, {k: v for k, v in raw.items() if v}, self.stats.state]
            return counts[1]
        self.stats.host_counts = host_counts
        store = self.frontier
        self.stats.next_due = lambda: store.next_wake_in() if store.size else None

    # -- control surface --------------------------------------------------------
    @property
    def parts(self) -> Parts:
        return Parts(steer=self.steering)

    @property
    def paused(self) -> bool:
        return not self._unpaused.is_set()

    @property
    def concurrency(self) -> int:
        return self._target

    def pause(self) -> None:
        if self.stats.state == "RUNNING":
            self._unpaused.clear()
            self.stats.state = "PAUSED"

    def resume(self) -> None:
        if self.stats.state == "PAUSED":
            self._unpaused.set()
            self.stats.state = "RUNNING"

    def set_concurrency(self, n: int) -> None:
        """Grow at once; shrink by cancelling idle workers, then retiring busy ones."""
        self._target = self.stats.target_concurrency = max(0, min(n, 10_000))
        if self._session is None or self._stopping.is_set() or self.stats.state == "DONE":
            return
        while len(self._tasks) < self._target:
            self._spawn()
        surplus = len(self._tasks) - self._target
        for wid in sorted(self._tasks, reverse=True):
            if surplus <= 0:
                break
            if wid not in self._held:
                self._retire(wid)
                surplus -= 1
        for ws in self.stats.workers.values():
            ws.retiring = False
        for wid in sorted((w for w in self._held if w in self._tasks), reverse=True)[:surplus]:
            self.stats.workers[wid].retiring = True

    def cancel_worker(self, worker_id: int) -> bool:
        """The chapter's task.cancel(): the URL goes back on the frontier, the pool shrinks
        (a check worker's pool too, down to one: checks must go on)."""
        if worker_id in self._check_tasks and not self._check_tasks[worker_id].done():
            if len(self._check_tasks) <= 1:
                return False
            self._check_target = self.stats.target_checks = len(self._check_tasks) - 1
            self._retire(worker_id)
            return True
        if worker_id not in self._tasks or self._tasks[worker_id].done():
            return False
        self._target = self.stats.target_concurrency = max(0, self._target - 1)
        self._retire(worker_id)
        return True

    def _retire(self, worker_id: int) -> None:
        """Cancel a worker and stop counting it at once, so no other worker retires for it."""
        task = (self._check_tasks if worker_id in self._check_tasks else self._tasks).pop(worker_id)
        task.cancel()
        self._retired.add(task)  # still awaited at the end: its URL must be put back first
        task.add_done_callback(self._retired.discard)
        self.stats.workers.pop(worker_id, None)

    def stop(self) -> None:
        if self.stats.state != "DONE":
            self.stats.state = "STOPPING"
            self._stopping.set()

    # -- steering (core/steering/steer.py), on the one control surface ------------------------
    @property
    def ignore_rules(self) -> Ignores:
        return self.steering.ignore_rules

    @property
    def queue_stats(self) -> QueueStats:
        return self.steering.queue_stats

    async def add_ignore(self, pattern: str) -> IgnoreResult:
        return await self.steering.add_ignore(pattern)

    def remove_ignore(self, pattern: str) -> bool:
        return self.steering.remove_ignore(pattern)

    def ignores(self) -> tuple[IgnoreView, ...]:
        return self.steering.ignores()

    async def set_ignore_set(self, name: str, on: bool) -> IgnoreResult:
        return await self.steering.set_ignore_set(name, on)

    def ignore_sets(self) -> tuple[IgnoreSetView, ...]:
        return self.steering.ignore_sets()

    def add_seed(self, url: str) -> SeedResult:
        return self.steering.add_seed(url)

    def pause_host(self, host: str) -> bool:
        return self.steering.pause_host(host)

    def resume_host(self, host: str) -> int:
        return self.steering.resume_host(host)

    def paused_hosts(self) -> dict[str, int]:
        return self.steering.paused_hosts()

    def set_host_delay(self, host: str, seconds: float) -> None:
        self.steering.set_host_delay(host, seconds)

    def host_table(self, sort: str = "queued", state: str | None = None,
                   limit: int | None = None) -> list[HostView]:
        return self.steering.host_table(sort, state, limit)

    def queue_view(self, n: int = 10) -> QueueView:
        return self.steering.queue_view(n)

    # -- the crawl --------------------------------------------------------------
    async def crawl(self) -> None:
        malloc.pin_mmap_threshold()  # large pages' memory goes back to the system when freed
        self._loop = asyncio.get_running_loop()
        timeout = aiohttp.ClientTimeout(
            total=self.config.timeout * 3, sock_connect=self.config.timeout, sock_read=self.config.timeout
        )
        # Headers, proxy and cookie jar live in core/fetching/session.py; its
        # connector and request class give every fetch its worker's phases
        # (core/fetching/steps.py); a request's gap counts from when its headers leave only
        # when a delay is asked for (else from just before).
        self._http = CrawlSession(self.config, self.agent, self.roots)
        self._session = self._http.open(timeout)
        token = self.agent.split("/", 1)[0].split(" ", 1)[0] or "crawltop"
        self._robots = Robots(self._session, token, self.config.timeout) if self.config.robots else None
        if self.config.sitemaps:
            self._sitemaps = Sitemaps(robots=self._robots, scope=self.scope, admit=self._admit,
                                      max_redirect=self.config.max_redirect, max_depth=self.config.max_depth,
                                      session=self._session, stats=self.stats, timeout=self.config.timeout)
        # Sinks may be added after construction (the CLI adds a WARC sink for a state file).
        self._response_sinks = [s for s in self.sinks if isinstance(s, ResponseSink)]
        for keeper in self._response_sinks:  # --header values are secrets: never in an archive
            if isinstance(keeper, Redacting):
                keeper.redact_headers(self._http.header_names)
        if isinstance(self.frontier, Failing):  # a store whose writer thread can fail
            loop = asyncio.get_running_loop()

            def failed(exc: BaseException) -> None:  # called from the store's own thread
                loop.call_soon_threadsafe(self._fail, exc)
            self.frontier.on_error = failed
        self._fetcher = HttpFetcher(self._session, self.config.max_bytes, self._bodies)
        try:
            if self.config.browser:  # a missing extra or Chromium: UsageError, before any URL
                from .fetching.browser import BrowserFetcher
                self._browser = BrowserFetcher(self._fetcher, _BrowserRules(self), path=self.config.browser_path,
                                               timeout=self.config.timeout, max_bytes=self.config.max_bytes,
                                               user_agent=self.agent)
                await self._browser.start()
            for root in self.roots:
                self._admit(root, self.config.max_redirect, 0)
            self.set_concurrency(self._target)
            while len(self._check_tasks) < self._check_target:
                self._spawn(check=True)
            if self.config.max_time:  # --max-time: a clean stop, as q
                self._limit = asyncio.get_running_loop().call_later(self.config.max_time, self.stop)
            join = asyncio.ensure_future(self.frontier.join())
            stop = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait((join, stop), return_when=asyncio.FIRST_COMPLETED)
            join.cancel()
            stop.cancel()
            await self._cancel_workers()
            for item in self.frontier.drain():
                record = _record(item, tries=item.tries)
                record.fail(errors.Cancelled("crawl stopped before this URL was fetched"))
                self._emit(record)
                self.frontier.done(item)
        finally:
            if self._limit is not None:
                self._limit.cancel()
            try:
                await self._cancel_workers()
                if self._browser is not None:  # no Chromium outlives the crawl
                    await self._browser.close()
                if self._robots is not None:
                    self._robots.close()
                await self._http.close()  # saves the cookie jar, closes the session
            finally:
                self.ignore_rules.changed()  # save the patterns' final counts with the state
                for sink in self.sinks:
                    try:
                        sink.close()
                    except Exception as exc:  # one failing sink must not cost the others their tail
                        self._failure = self._failure or exc
                self.stats.finish()
        if self._failure is not None:
            raise self._failure

    async def _cancel_workers(self) -> None:
        tasks = [*self._tasks.values(), *self._check_tasks.values(), *self._retired]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, check: bool = False) -> None:
        self._next_id += 1
        wid = self._next_id
        ws = self.stats.workers[wid] = WorkerState(wid, since=self.stats.clock(), check=check)
        pool = self._check_tasks if check else self._tasks
        pool[wid] = asyncio.get_running_loop().create_task(self._work(ws), name=f"worker-{wid}")

    async def _work(self, ws: WorkerState) -> None:
        pool, lane = (self._check_tasks, CHECKS) if ws.check else (self._tasks, PAGES)
        try:
            while len(pool) <= (self._check_target if ws.check else self._target):
                await self._wait_unpaused(ws)
                self.stats.set_phase(ws, "waiting")
                item = await self.frontier.pop(lane)
                host = self._sched.of(item.url)
                if self.paused and not host.flags & RETIRED:
                    # paused while we waited: the URL goes back rather than be held through
                    # the pause (in a cluster, another process may fetch it meanwhile)
                    self._sched.untake(host, item)
                    continue
                self.queue_stats.taken(item.url)
                if host.flags & STEP_PENDING:  # robots.txt or the probe first
                    await self._prerequisite(ws, host, item)
                    continue
                self._held[ws.id] = item
                try:
                    await self._handle(ws, item, host)
                finally:
                    del self._held[ws.id]
                    self.frontier.done(item)
        finally:
            pool.pop(ws.id, None)
            self.stats.workers.pop(ws.id, None)

    async def _prerequisite(self, ws: WorkerState, host: Host, item: Item) -> None:
        """robots.txt as the host's first request, and its /sitemap.xml probe after its
        first answer: each takes the host's turn and delay, so no other worker waits for
        it and the gap holds; the URL goes back first in its host's queue."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        self._sched.started(host, started)
        ws.url, ws.host = item.url, host.key
        crawl_delay: float | None = None
        try:
            if host.flags & NEEDS_ROBOTS:
                host.flags &= ~NEEDS_ROBOTS
                self.stats.set_phase(ws, "robots")
                if self._robots is not None:
                    crawl_delay = (await self._robots.check(item.url))[1]
                    if self._robots.unanswered and host_origin(item.url) in self._robots.unanswered:
                        # no response at all: the host's first strike (it gets one request at
                        # a time until it answers: a dead host costs a few connections, not -c)
                        if self._dead_name(item.url, host) is not None:
                            self._name_failed(host)
                        else:
                            self._host_failed(host, "connect", started, None, block=True, strike=True)
                    else:
                        self._sched.answered(host)
            elif host.flags & NEEDS_PROBE:
                host.flags &= ~NEEDS_PROBE
                self.stats.set_phase(ws, "sitemap")
                if self._sitemaps is not None:
                    await self._sitemaps.answered(item.url)
        except Exception:  # a surprise must not cost a worker; the page's own check retries it
            pass
        finally:
            ws.url = ws.host = None
            if crawl_delay is not None:
                self._sched.set_crawl_delay(host, crawl_delay, started)
            self._sched.untake(host, item)
            self.queue_stats.added(item.url)

    async def _wait_unpaused(self, ws: WorkerState) -> None:
        """A loop, not one wait: pause, resume, pause in one tick must still hold us."""
        while self.paused:
            self.stats.set_phase(ws, "paused")
            await self._unpaused.wait()

    async def _handle(self, ws: WorkerState, item: Item, host: Host) -> None:
        """Turn one item into exactly one Record, whatever happens (or, for a retry,
        put it back in its host's queue: a worker never sleeps holding a URL)."""
        ws.url, ws.tries = item.url, item.tries
        ws.host = host.key
        if not host.flags & RETIRED:
            ws.slot = host  # take() gave us its slot: freed after the fetch, or below whatever happens
        started = self.stats.clock()
        try:
            if host.flags & RETIRED:  # taken only for its Record
                record = _record(item, tries=item.tries)
                record.fail(self._dead_name(item.url, host) or errors.HostRetired(
                    f"host {host.key} retired after {host.strikes} failures in a row (last: {host.last_error})"))
            else:
                record = await self._process(ws, item, host)
        except _Retry as retry:
            self.frontier.requeue(item._replace(tries=retry.tries), retry.after)
            self.queue_stats.added(item.url)
            return
        except _KeptOnCancel as kept:  # fetched and archived: it ends here, with its Record
            kept.record.elapsed_ms = round((self.stats.clock() - started) * 1000, 1)
            self._emit(kept.record)
            raise
        except asyncio.CancelledError:
            # Cancelled (cancel_worker or stop): the URL goes back, with the try it was on spent.
            self.frontier.requeue(item._replace(tries=ws.tries))
            self.queue_stats.added(item.url)
            raise
        except Exception as exc:  # a bug or a surprise must not kill the worker or hang join()
            record = _record(item, tries=ws.tries)
            record.fail(exc)
        finally:
            self._free_slot(ws)
            ws.url = ws.host = None
        record.elapsed_ms = round((self.stats.clock() - started) * 1000, 1)
        self._emit(record)

    def _emit(self, record: Record) -> None:
        self.stats.records += 1
        self.follow.recorded(record)
        # One vocabulary (core/outcomes.py): only a failed URL is an error; robots, ignored and
        # cancelled records are counted apart.
        if self.stats.outcome(record.status, record.error_kind, record.error) == FAILED and record.error:
            self.stats.error(record.url, self._host_key(record.url), record.error, record.tries, record.via,
                             record.error_kind)
        for sink in self.sinks:
            try:
                sink.write(record)
            except Exception as exc:  # a full disk: stop cleanly and say so, never hang join()
                self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self._failure = self._failure or exc
        self.stop()

    def _admit(self, url: str, redirects_left: int, depth: int, via: str | None = None, discovery: str = "") -> bool:
        """Queue a URL never seen before, within --max-pages and not ignored."""
        return bool(self._queue(url, redirects_left, depth, via, discovery))

    def _queue(self, url: str, redirects_left: int, depth: int, via: str | None, discovery: str) -> str | None:
        """_admit, returning the URL's queue-view prefix; None when it was seen before, ""
        when it was refused (--max-pages, an ignore): a refused one was never queued, so no
        Record will come for the referrers to wait for (core/queueing/follow.py)."""
        if self.config.max_pages is not None and self.frontier.seen_count >= self.config.max_pages:
            return ""
        # Ignores (the `global` set is on by default) are asked only of links never seen: most
        # links are seen already, and for those this is one lookup instead of an Item and add().
        if self.ignore_rules:
            if self.frontier.seen(url):
                return None
            if self.steering.stopped(url):
                return ""
        if not self.frontier.add(Item(url, redirects_left, depth, 0, via, discovery)):
            return None
        return self.queue_stats.added(url)

    def _dead_name(self, url: str, host: Host) -> errors.NameNotFound | None:
        """The URL's host name is known not to resolve (core/fetching/resolver.py): a fact about
        the host for the whole crawl, so its URLs fail at once, each with that reason. Only for
        a host that never answered; one that did (the site's own, always) is never retired for
        it (an expired cache or a resolver's bad minute), but each of its URLs whose name does not
        resolve still fails at once, without retry or strike (`_fetch_scheduled`)."""
        resolver = self._http.resolver
        if host.flags & ANSWERED or resolver is None or not resolver.dead:
            return None
        name = host_of(url)
        why = resolver.not_found(name)
        return errors.NameNotFound(name, why) if why else None

    def _name_failed(self, host: Host) -> None:
        """A name that does not resolve retires its host at once (no strike count, no back-off:
        every queued URL of it comes out for its Record) when the name is the whole host; queued
        by registered domain, one dead subdomain must not take its siblings' pages."""
        if self.config.queue_by == "host":
            self._sched.retire(host, "dns")

    async def _process(self, ws: WorkerState, item: Item, host: Host) -> Record:
        record = _record(item)
        kind = record.kind = self.kinds.kind_of(item.url, item.discovery)
        dead = self._dead_name(item.url, host)
        if dead is not None:  # robots.txt or an earlier URL found it out: no request, no retry
            self._name_failed(host)
            record.fail(dead)
            return record
        if self._sitemaps is not None and kind == PAGE:  # an origin's first URL queues its sitemaps
            await self._sitemaps.visit(item.url)
        if self._robots is not None:
            self.stats.set_phase(ws, "robots")
            waited, asked = self._robots.pending(item.url), asyncio.get_running_loop().time()
            allowed = (await self._robots.check(item.url))[0]
            if waited and host_origin(item.url) in self._robots.unanswered:
                # (Redis: robots.txt is fetched here, not as the host's first turn.) It got no
                # answer: the host's strike, and the URLs that waited for it go back untried.
                self._host_failed(host, "connect", asked, None, block=True, strike=True)
                raise _Retry(item.tries, 0.0)
            if waited:
                self._sched.answered(host)
            if not allowed:
                self.stats.robots_blocked += 1
                record.fail(errors.BlockedByRobots("disallowed by robots.txt"))
                return record
        started = self.stats.clock()
        try:
            resp = await self._fetch_scheduled(ws, item, record, host)
        except BaseException:  # a cancel under a tab: what it claimed is seen, so recorded now
            if self._browser is not None:
                self._lost(item, self._browser.lost(item.url))
            raise
        if resp is None:
            return record
        loaded: list[Record] = []
        try:  # no await before `_loaded`: a cancel must not lose the URLs the tab claimed
            record.status = resp.status
            record.content_type = resp.content_type
            record.size = len(resp.body)
            record.truncated = resp.truncated
            record.digest = resp.digest
            kind = record.kind = self.kinds.answered(kind, item.url, resp.status, resp.is_html)
            self.stats.page(ws.host or "", resp.status, record.size, (self.stats.clock() - started) * 1000, kind)
            if resp.truncated:
                self.stats.truncated += 1
            written = [w for sink in self._response_sinks  # WARC: built only when someone keeps responses
                       if (w := sink.response(item.url, resp.status, resp.reason, list(resp.headers.items()),
                                              resp.body, list(resp.request_headers.items()),
                                              truncated=resp.truncated, digest=resp.digest)) is not None]
            if resp.loaded is not None:  # the browser's: what the page loaded, each URL its Record
                loaded = self._loaded(item, record, resp.loaded, written)
                if resp.error is not None:  # a hung or crashed tab: the page's Record says why
                    record.fail(resp.error)
                if resp.dom is not None:  # its links are those of the HTML the scripts made
                    resp.body, resp.charset = resp.dom.encode("utf-8", "replace"), "utf-8"
                    resp.dom = None
            if self._sitemaps is not None and kind == PAGE:  # the origin answered: its /sitemap.xml may be probed
                await self._probe_after(host, item.url)
            if resp.status in REDIRECTS:
                await self._redirect(item, resp, record)
            elif retryable(resp.status):
                record.fail(errors.HTTPStatusError(f"HTTP {resp.status} after {record.tries} tries"))
            elif self._sitemaps is not None and is_sitemap(item.discovery):
                self.stats.set_phase(ws, "parsing")
                await self._sitemaps.read(item, resp, record)
            elif resp.is_html and (kind == PAGE or (kind == EXTERNAL and self.kinds.fragments)):
                self.stats.set_phase(ws, "parsing")
                self._parse(item, resp, record)
            elif self.kinds.requisites and is_stylesheet(resp.mime, item.discovery) and resp.status < 300:
                self.stats.set_phase(ws, "parsing")
                self._parse(item, resp, record, css=True)
        except BaseException:  # cancelled (or a surprise) after `_loaded`: its Records still go out
            for other in loaded:
                self._emit(other)
            raise
        finally:  # parsed (or not to be): its bytes no longer count (core/fetching/budget.py)
            self._bodies.give(resp.held)
        try:
            if written:  # the URL counts as done only once its records are in the file
                await self._written(written, record)
        finally:
            for other in loaded:  # after their archive records (or a stop's flush), as a page's own
                self._emit(other)
        return record

    def _loaded(self, page: Item, record: Record, loads: list[Loaded], written: list[Awaitable[None]]) -> list[Record]:
        """The URLs a page loaded in the browser (claimed for it, so never fetched again):
        each a Record of its own, a requisite of the page (or what the browser's answer
        makes it), its response in the WARC; a stylesheet is read for its url()s and an
        in-scope HTML answer for its links, as if aiohttp had fetched them."""
        out: list[Record] = []
        for ld in loads:
            item = self._load_item(page, ld)
            path = item.discovery
            other = _record(item, tries=1)
            other.kind, other.fetched_at = REQUISITE, record.fetched_at
            out.append(other)
            r = ld.response
            if r is None:
                other.fail(self._browser_failure(ld.error or "no answer"))
                continue
            other.status, other.content_type, other.size = r.status, r.content_type, len(r.body)
            other.truncated, other.digest = r.truncated, r.digest
            other.kind = self.kinds.answered(REQUISITE, ld.url, r.status, r.is_html)
            self.stats.page(self._host_key(ld.url), r.status, other.size, 0.0, other.kind)
            written += [w for sink in self._response_sinks
                        if (w := sink.response(ld.url, r.status, r.reason, list(r.headers.items()), r.body,
                                               list(r.request_headers.items()), truncated=r.truncated,
                                               digest=r.digest)) is not None]
            if r.status in REDIRECTS:  # the browser followed it; its target, if new, is claimed too
                self.stats.redirects += 1
                location = r.headers.get("Location", "").strip()
                other.next_url = self.links.join(ld.url, location) if location else None
            elif r.is_html and other.kind == PAGE:
                self._parse(item, r, other)
            elif self.kinds.requisites and is_stylesheet(r.mime, path) and r.status < 300:
                self._parse(item, r, other, css=True)
        return out

    @staticmethod
    def _browser_failure(why: str) -> Exception:
        from .fetching.browser import BrowserFailure  # loaded already: only a --browser crawl gets here
        return BrowserFailure(why)

    def _load_item(self, page: Item, ld: Loaded) -> Item:
        path = hop(page.discovery, ld.letter)
        return Item(ld.url, self.config.max_redirect, page.depth + 1, 0, ld.via,
                    hop(path, "R") if ld.redirected else path)

    def _lost(self, page: Item, loads: list[Loaded]) -> None:
        """URLs a tab claimed for a page whose worker was cancelled: seen, so each gets its
        Record here (cancelled, as a stop's queued URLs), else it would have none."""
        for ld in loads:
            record = _record(self._load_item(page, ld))
            record.kind = REQUISITE
            record.fail(errors.Cancelled("the page's worker stopped while the browser loaded this URL"))
            self._emit(record)

    async def _written(self, futures: list[Awaitable[None]], record: Record) -> None:
        """Wait for the archive to hold this response. Cancelled meanwhile (a stop), the wait
        finishes blocking (the records are already queued: a moment) and the Record is kept
        (`_KeptOnCancel`), so the URL is not fetched, and archived, twice."""
        try:
            for w in futures:
                await w
        except asyncio.CancelledError:
            for sink in self._response_sinks:
                sink.flush()
            raise _KeptOnCancel(record) from None
        except OSError as exc:  # the archive's disk: the crawl stops and says so
            self._fail(exc)
            raise

    async def _fetch_scheduled(self, ws: WorkerState, item: Item, record: Record, host: Host) -> Response | None:
        """One attempt; the host was due, so it goes out at once. A failure with tries
        left raises _Retry: the URL goes back to its host's queue, no worker waits.
        What the failure says decides who waits: 429, 503 and failures to reach the
        host (DNS, refused, TLS, connect timeout) back the whole host off; a 500 or a
        slow or cut response is this URL's, which alone waits its back-off. Every
        failure counts toward retiring the host; a success resets the count."""
        sched = self._sched
        assert sched is not None
        if host.strikes and self._fetching.get(host.key):
            # A host that stopped answering gets one request at a time (core/queueing/hosts.py
            # _due); on Redis a batch popped before its strike arrived there must wait too.
            raise _Retry(item.tries, self.config.backoff)
        loop = self._loop
        assert loop is not None  # crawl() keeps it before any worker starts
        attempt = ws.tries = record.tries = item.tries + 1
        last = attempt >= self.config.max_tries
        started = loop.time()
        sched.started(host, started)
        self.stats.set_phase(ws, "sending")  # core/fetching/steps.py says "pool" or "connecting" when it must wait
        record.fetched_at = utc_iso()
        fetcher = self._fetcher
        assert fetcher is not None  # crawl() made it before any worker started
        if self._browser is not None and record.kind == PAGE and not ws.check and not is_sitemap(item.discovery):
            fetcher = self._browser  # --browser: the site's pages in a tab
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
            self._free_slot(ws)
            dead = errors.unresolvable(exc)
            if dead is not None:  # a fact, not a failure to count: this URL ends now, untried again
                if not host.flags & ANSWERED:
                    self._name_failed(host)
                record.fail(dead)
                return None
            kind = errors.error_kind(exc)
            # No HTTP response at all (refused, reset, dropped, no headers in time): the host's
            # failure, which backs it off and counts toward retiring it. aiohttp retries a stale
            # keep-alive connection itself, so a healthy host never gets here for that.
            reach = not answered or kind in HOST_KINDS
            self._host_failed(host, kind, started, None, block=reach, strike=reach or kind == "timeout")
            if last or host.flags & RETIRED:
                record.fail(exc, _network_error(exc, self.config.timeout))
                return None
            self.stats.retries += 1
            raise _Retry(attempt, 0.0 if reach else self._url_backoff(attempt)) from None
        except BaseException:
            self._free_slot(ws)
            raise
        finally:
            if fetching[host.key] <= 1:
                del fetching[host.key]
            else:
                fetching[host.key] -= 1
        self._free_slot(ws)
        if not retryable(resp.status):
            sched.succeeded(host, started, loop.time() - started)
            return resp
        sched.answered(host)  # a 429 or a 5xx: a live server, however unwell
        self._bodies.give(resp.held)  # an error page is not parsed: only a status, at most a Retry-After
        resp.held = 0
        host_wide = resp.status in (429, 503)
        wait = retry_after(resp.headers.get("Retry-After"), self.config.max_wait) if host_wide else None
        self._host_failed(host, str(resp.status), started, wait, block=host_wide, strike=False)
        if last or host.flags & RETIRED:
            return resp
        self.stats.retries += 1
        raise _Retry(attempt, 0.0 if host_wide else self._url_backoff(attempt))

    async def _probe_after(self, host: Host, url: str) -> None:
        """The probe is one of the host's requests: its next turn, or, when it has no URL
        queued to take a turn with, now in this worker once the host is due."""
        assert self._sitemaps is not None
        if not self._sitemaps.wants_probe(url):
            return
        if host.queued:
            self._sched.want_probe(host)
            return
        loop = asyncio.get_running_loop()
        wait = max(host.next_at, host.backoff_until) - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)  # only this host's last page waits, and only once
        self._sched.started(host, loop.time())
        await self._sitemaps.answered(url)

    def _free_slot(self, ws: WorkerState) -> None:
        """The host's fetch slot goes back once: after the fetch, or when the URL ended
        without one (robots said no, a cancel, a surprise)."""
        host, ws.slot = ws.slot, None
        if host is not None:
            self._sched.finished(host)  # type: ignore[arg-type]  # WorkerState.slot holds a Host (core/monitor/stats.py)

    def _host_failed(self, host: Host, why: str, started: float, retry_after: float | None, *,
                     block: bool, strike: bool) -> None:
        """Tell the host (core/queueing/hosts.py Hosts.failed) and retire it when it says so."""
        now = asyncio.get_running_loop().time()
        if self._sched.failed(host, why, started, now, retry_after, block=block, strike=strike):
            self._retire_host(host)

    def _url_backoff(self, attempt: int) -> float:
        return backoff(self.config.backoff, attempt, self.config.max_wait)

    def _retire_host(self, host: Host) -> None:
        """Retired: its queued URLs come out at once, each for its HostRetired Record."""
        self._sched.retire(host, host.why)

    async def _redirect(self, item: Item, resp: Response, record: Record) -> None:
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
            self._sched.relane(target)
        if item.redirects_left <= 0:
            record.fail(errors.TooManyRedirects(f"more than {self.config.max_redirect} redirects"))
        elif not self.kinds.redirect_allowed(record.kind, target):  # its kind, set by _process
            return
        elif seen:
            record.merged = True
            self.stats.merge(item.url, target, resp.status)
        else:
            self._admit(target, item.redirects_left - 1, item.depth, item.url, hop(item.discovery, "R"))

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


class _BrowserRules:
    """The crawl's rules for the requests a browser tab makes (core/fetching/browser.py
    Rules): what a page may load, and claiming what it loads for one Record each."""

    __slots__ = ("crawler",)

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    async def allow(self, url: str) -> bool:
        """--exclude, the ignores (asked of URLs never seen, as for links) and robots.txt."""
        c = self.crawler
        if c.scope.excluded(url):
            return False
        if c.ignore_rules and not c.frontier.seen(url) and c.steering.stopped(url):
            return False
        if c._robots is not None and not (await c._robots.check(url))[0]:
            c.stats.robots_blocked += 1
            return False
        return True

    def claim(self, url: str) -> bool:
        c = self.crawler
        if not c.kinds.requisites:
            return False
        if c.config.max_pages is not None and c.frontier.seen_count >= c.config.max_pages:
            return False
        return c.frontier.mark_seen(url)


class _KeptOnCancel(asyncio.CancelledError):
    """A cancel that arrived once the URL's response was fetched and archived: its Record
    is emitted and the URL counts as done, then the worker stops as cancelled."""

    def __init__(self, record: Record) -> None:
        super().__init__()
        self.record = record


class _Retry(Exception):
    """A failed try with tries left: the URL goes back to its host's queue, at once
    (its host backs off) or after its own back-off (`after` seconds)."""

    def __init__(self, tries: int, after: float) -> None:
        super().__init__(tries)
        self.tries, self.after = tries, after


def _record(item: Item, tries: int = 0) -> Record:
    return Record(url=item.url, depth=item.depth, tries=tries, via=item.via, discovery=item.discovery)


def _network_error(exc: BaseException, timeout: float) -> str:
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
