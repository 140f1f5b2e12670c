"""The worker-pool crawler of "A Web Crawler With asyncio Coroutines", grown up.

One frontier of (url, redirects_left, depth) items, drained by N worker tasks;
crawl() waits on join() and then cancels the workers. The way of one item is a pipeline:
the pool takes it when its host is due (`_work`, `_handle` here), the attempt fetches it
(core/fetching/attempt.py), processing makes of the answer a Record, WARC records and links
(core/processing.py), and `_emit` writes the Record. The control surface (pause, resume,
set_concurrency, cancel_worker, stop) is plain methods, safe to call from the same loop at
any time: core/surface.py's `Engine`; the steering (ignores, seeds, host pause and delay) is
the `Steering` of core/steering/steer.py, declared in `parts`.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp

from .. import __version__
from . import errors
from .config import CrawlConfig
from .fetching.attempt import Attempt, Retry
from .fetching.budget import BodyBudget
from .fetching.fetcher import HttpFetcher
from .fetching.robots import Robots
from .fetching.session import CrawlSession
from .fetching.sitemaps import Sitemaps
from .monitor.stats import Stats, WorkerState
from .outcomes import FAILED
from .output.records import JsonlSink, Record, Redacting, ResponseSink, Sink
from .parsing import malloc
from .parsing.urls import canonical, host_origin, netloc_of
from .processing import KeptOnCancel, Processing, new_record
from .queueing.follow import Follow
from .queueing.frontier import Frontier, Item, MemoryFrontier
from .queueing.hosts import (
    CHECKS,
    NEEDS_PROBE,
    NEEDS_ROBOTS,
    PAGES,
    RETIRED,
    STEP_PENDING,
    Host,
    Hosts,
)
from .queueing.parts import Failing, Scheduled
from .queueing.politeness import Politeness
from .queueing.scope import Scope
from .steering.steer import Steering
from .surface import Parts

if TYPE_CHECKING:  # imported by crawl() only with --browser: a plain crawl pays none of it
    from .fetching.browser import BrowserFetcher

VERSION = __version__


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
        self.scope = Scope(tuple(self.roots), config.scope, config.include, config.exclude)
        self.agent = config.user_agent or f"crawltop/{VERSION} (+https://example.invalid/crawltop)"
        self.stats = Stats(clock=clock)
        self.stats.queue_size = lambda: self.frontier.size
        self.stats.seen_size = lambda: self.frontier.seen_count
        sched = store.hosts
        self._sched: Hosts = sched
        self._host_key: Callable[[str], str] = netloc_of
        self._bodies = BodyBudget()  # bytes of large bodies read or parsed at once (core/fetching/budget.py)
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
        self._next_id = 0
        self._unpaused = asyncio.Event()
        self._stopping = asyncio.Event()
        self._limit: asyncio.TimerHandle | None = None  # --max-time's stop
        self._session: aiohttp.ClientSession | None = None
        self._browser: BrowserFetcher | None = None  # --browser: the site's pages (core/fetching/browser.py)
        self._robots: Robots | None = None
        self._sitemaps: Sitemaps | None = None
        # The attempt and the processing, made by crawl() once the session and the sinks are
        # known (workers start only there): core/fetching/attempt.py, core/processing.py
        self._attempt: Attempt
        self._processing: Processing
        if not config.start_paused:
            self._unpaused.set()
        else:
            self.stats.state = "PAUSED"
        self.steering = Steering(frontier=store, sched=sched, stats=self.stats, scope=self.scope, roots=self.roots,
                                 config=config, admit=self._admit, emit=self._emit, ended=self._ended)
        # read on every link and every item: kept here, one attribute away
        self._ignores, self._queue_stats = self.steering.ignore_rules, self.steering.queue_stats
        # what a page adds to the crawl, by kind (core/queueing/follow.py)
        self.follow = Follow(config, self.scope, self.agent, self._queue, store.split_seen, self._queue_stats,
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
        """The steering (core/steering/steer.py): ignores, seeds, hosts, the queue view."""
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

    # -- the crawl --------------------------------------------------------------
    async def crawl(self) -> None:
        malloc.pin_mmap_threshold()  # large pages' memory goes back to the system when freed
        loop = asyncio.get_running_loop()
        timeout = aiohttp.ClientTimeout(
            total=self.config.timeout * 3, sock_connect=self.config.timeout, sock_read=self.config.timeout
        )
        # Headers, proxy and cookie jar live in core/fetching/session.py; its
        # connector and request class give every fetch its worker's phases
        # (core/fetching/steps.py).
        self._http = CrawlSession(self.config, self.agent, self.roots)
        self._session = self._http.open(timeout)
        token = self.agent.split("/", 1)[0].split(" ", 1)[0] or "crawltop"
        self._robots = Robots(self._session, token, self.config.timeout) if self.config.robots else None
        if self.config.sitemaps:
            self._sitemaps = Sitemaps(robots=self._robots, scope=self.scope, admit=self._admit,
                                      max_redirect=self.config.max_redirect, max_depth=self.config.max_depth,
                                      session=self._session, stats=self.stats, timeout=self.config.timeout)
        # Sinks may be added after construction (the CLI adds a WARC sink for a state file).
        keepers = [s for s in self.sinks if isinstance(s, ResponseSink)]
        for keeper in keepers:  # --header values are secrets: never in an archive
            if isinstance(keeper, Redacting):
                keeper.redact_headers(self._http.header_names)
        if isinstance(self.frontier, Failing):  # a store whose writer thread can fail

            def failed(exc: BaseException) -> None:  # called from the store's own thread
                loop.call_soon_threadsafe(self._fail, exc)
            self.frontier.on_error = failed
        self._processing = Processing(self.config, self.stats, self.frontier, self._sched, self.scope, self.follow,
                                      sinks=keepers, bodies=self._bodies, sitemaps=self._sitemaps,
                                      admit=self._admit, emit=self._emit, fail=self._fail)
        fetcher = HttpFetcher(self._session, self.config.max_bytes, self._bodies)
        self._attempt = Attempt(self.config, self.stats, self._sched, loop, fetcher, robots=self._robots,
                                sitemaps=self._sitemaps, resolver=self._http.resolver, bodies=self._bodies,
                                lost=self._processing.lost)
        try:
            if self.config.browser:  # a missing extra or Chromium: UsageError, before any URL
                from .fetching.browser import BrowserFetcher
                from .fetching.browser_rules import BrowserRules
                rules = BrowserRules(self.config, self.stats, self.frontier, self.scope, self.kinds, self.steering,
                                     self._robots)
                self._browser = self._attempt.browser = BrowserFetcher(
                    fetcher, rules, path=self.config.browser_path, timeout=self.config.timeout,
                    max_bytes=self.config.max_bytes, user_agent=self.agent, config=self.config, session=self._http)
                await self._browser.start()
                self.stats.browser = self._browser  # its memory, restarts and tabs, for the monitors
            for root in self.roots:
                self._admit(root, self.config.max_redirect, 0)
            self.set_concurrency(self._target)
            while len(self._check_tasks) < self._check_target:
                self._spawn(check=True)
            if self.config.max_time:  # --max-time: a clean stop, as q
                self._limit = loop.call_later(self.config.max_time, self.stop)
            join = asyncio.ensure_future(self.frontier.join())
            stop = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait((join, stop), return_when=asyncio.FIRST_COMPLETED)
            join.cancel()
            stop.cancel()
            await self._cancel_workers()
            for item in self.frontier.drain():
                record = new_record(item, tries=item.tries)
                record.fail(errors.Cancelled("crawl stopped before this URL was fetched"))
                self._emit(record)
                self._ended(item)
                self.frontier.done(item)
            if self._browser is not None:  # pages kept in a state file: what their failed tabs loaded
                for item, loads in self._browser.leftovers():
                    self._processing.lost(item, loads)
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
                self._ignores.changed()  # save the patterns' final counts with the state
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
                self._queue_stats.taken(item.url)
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
        attempt = self._attempt
        try:
            if host.flags & NEEDS_ROBOTS:
                host.flags &= ~NEEDS_ROBOTS
                self.stats.set_phase(ws, "robots")
                if self._robots is not None:
                    crawl_delay = (await self._robots.check(item.url))[1]
                    if self._robots.unanswered and host_origin(item.url) in self._robots.unanswered:
                        # no response at all: the host's first strike (it gets one request at
                        # a time until it answers: a dead host costs a few connections, not -c)
                        if attempt.dead_name(item.url, host) is not None:
                            attempt.name_failed(host)
                        else:
                            attempt.host_failed(host, "connect", started, None, block=True, strike=True)
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
            self._queue_stats.added(item.url)

    async def _wait_unpaused(self, ws: WorkerState) -> None:
        """A loop, not one wait: pause, resume, pause in one tick must still hold us."""
        while self.paused:
            self.stats.set_phase(ws, "paused")
            await self._unpaused.wait()

    async def _handle(self, ws: WorkerState, item: Item, host: Host) -> None:
        """Turn one item into exactly one Record, whatever happens (or, for a retry,
        put it back in its host's queue: a worker never sleeps holding a URL): the
        attempt (core/fetching/attempt.py), then what its answer becomes (core/processing.py)."""
        ws.url, ws.tries = item.url, item.tries
        ws.host = host.key
        if not host.flags & RETIRED:
            ws.slot = host  # take() gave us its slot: freed after the fetch, or below whatever happens
        started = self.stats.clock()
        attempt = self._attempt
        try:
            record = new_record(item)
            if host.flags & RETIRED:  # taken only for its Record
                record.tries = item.tries
                record.fail(attempt.dead_name(item.url, host) or errors.HostRetired(
                    f"host {host.key} retired after {host.strikes} failures in a row (last: {host.last_error})"))
            else:
                record.kind = self.kinds.kind_of(item.url, item.discovery)
                if await attempt.cleared(ws, item, record, host):  # else its Record says why
                    since = self.stats.clock()
                    resp = await attempt.fetch(ws, item, record, host)
                    if resp is not None:  # None: it failed for good, and its Record says why
                        await self._processing.process(ws, item, record, resp, host, since)
        except Retry as retry:
            self.frontier.requeue(item._replace(tries=retry.tries), retry.after)
            self._queue_stats.added(item.url)
            return
        except KeptOnCancel as kept:  # fetched and archived: it ends here, with its Record
            kept.record.elapsed_ms = round((self.stats.clock() - started) * 1000, 1)
            self._emit(kept.record)
            raise
        except asyncio.CancelledError:
            # Cancelled (cancel_worker or stop): the URL goes back, with the try it was on spent.
            self.frontier.requeue(item._replace(tries=ws.tries))
            self._queue_stats.added(item.url)
            raise
        except Exception as exc:  # a bug or a surprise must not kill the worker or hang join()
            record = new_record(item, tries=ws.tries)
            record.fail(exc)
        finally:
            attempt.free_slot(ws)
            ws.url = ws.host = None
        if self._browser is not None and (left := self._browser.lost(item.url)):
            try:  # what a failed tab of this page loaded, when no later tab took it over
                await self._processing.settle(item, record, left)
            except KeptOnCancel:  # archived and recorded; the page's own Record too, then the cancel goes on
                record.elapsed_ms = round((self.stats.clock() - started) * 1000, 1)
                self._emit(record)
                raise
            except Exception as exc:  # the archive's disk (the crawl stops), a surprise: said on the page
                record.fail(exc)
        record.elapsed_ms = round((self.stats.clock() - started) * 1000, 1)
        self._emit(record)

    def _ended(self, item: Item) -> None:
        """An item that ends without its next try (a stop, an ignore): what a failed tab of
        its page loaded is seen, so each URL gets its Record now."""
        if self._browser is not None and (loads := self._browser.lost(item.url)):
            self._processing.lost(item, loads)

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
        if self._ignores:
            if self.frontier.seen(url):
                return None
            if self.steering.stopped(url):
                return ""
        if not self.frontier.add(Item(url, redirects_left, depth, 0, via, discovery)):
            return None
        return self._queue_stats.added(url)
