"""Live numbers for the interface, kept so that a snapshot costs O(workers + rows shown).

The engine mutates these as it works; the TUI and the headless progress line pull
`Stats.snapshot()` on a timer. Nothing here is ever proportional to pages crawled.
"""
from __future__ import annotations

import heapq
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import kind_of
from ..outcomes import CANCELLED, FAILED, OUTCOMES, SKIPPED, Tally, reason
from .summary import SPARK, Summary, browser_numbers

HISTORY_SECONDS = 120
RING = 500
TOP_HOSTS = 20
ERROR_URLS_MAX = 10_000

# A worker's phase (each means what it says): waiting for a due URL, paused,
# fetching robots.txt or probing a sitemap, then a fetch's steps (core/fetching/steps.py):
# waiting for a free connection, connecting (DNS, TCP, TLS), sending, waiting for the
# response's headers, reading the body; then parsing; backoff. With --browser a page then
# goes through its tab's (core/fetching/browser.py): navigating, loading (its requisites and
# scripts until `load`), network idle, scrolling, reading links.
BROWSER_PHASES = ("navigating", "loading", "network idle", "scrolling", "reading links")
PHASES = ("waiting", "paused", "robots", "sitemap", "pool", "connecting", "sending", "headers", "reading",
          "parsing", "backoff", *BROWSER_PHASES)


class BrowserGauge(Protocol):
    """The browser's numbers, read at each snapshot (core/fetching/browser.py BrowserFetcher)."""

    memory: int  # bytes: its processes' PSS when last read
    memory_limit: int  # --browser-memory (0: none)
    restarts: int  # restarts asked for (--browser-restart, --browser-memory)
    relaunches: int  # new browsers after one died

    def tab(self, url: str) -> tuple[int, int] | None:
        """The open tab of this page: (its requests in flight, bytes served to it so far)."""
        ...


@dataclass(slots=True)
class WorkerState:
    """One worker's live state; the crawler writes it, snapshots copy it."""

    id: int
    phase: str = "waiting"
    url: str | None = None
    host: str | None = None
    since: float = 0.0
    tries: int = 0
    retiring: bool = False
    slot: object | None = None  # the Host whose fetch slot this worker holds (core/crawler.py)
    check: bool = False  # a check worker (external links, other hosts' requisites), not a page worker


@dataclass(slots=True)
class HostStats:
    in_flight: int = 0
    done: int = 0
    errors: int = 0
    total_ms: float = 0.0
    delay: float = 0.0
    paused: bool = False  # pause_host(): its URLs wait
    parked: int = 0  # its URLs taken and set aside while paused


@dataclass(frozen=True, slots=True)
class WorkerView:
    id: int
    phase: str
    url: str | None
    host: str | None
    in_phase: float
    tries: int
    retiring: bool
    check: bool = False  # a check worker: external links and other hosts' requisites
    # --browser: the page's tab, while it has one: requests in flight, bytes so far (None: no tab)
    tab_requests: int | None = None
    tab_bytes: int = 0


@dataclass(frozen=True, slots=True)
class BrowserView:
    """--browser's numbers for the status line and `ctl status`."""

    memory: int  # bytes: Chromium's processes' PSS when last read (read about once a second)
    memory_limit: int  # --browser-memory: past it the browser is restarted (0: never)
    restarts: int  # new browsers: restarts asked for, and relaunches after one died


@dataclass(frozen=True, slots=True)
class HostView:
    """One host queue's row (core/queueing/hosts.py `Host`); the Redis store fills the first ones."""

    host: str
    in_flight: int
    done: int
    errors: int
    avg_ms: float  # server latency only, never politeness waits
    delay: float
    paused: bool = False
    parked: int = 0
    state: str = ""  # ready, fetching, waiting, backoff, paused, budget, retired, done
    queued: int = 0
    wait: float = 0.0  # seconds until it may fetch (waiting, backoff)
    source: str = ""  # what decided the delay: delay, robots, robots (capped), adaptive, live
    why: str = ""  # the back-off's reason: 429, 503, connect, dns, tls, timeout
    over: int = 0  # URLs refused over --max-pages-per-host
    failures: int = 0  # in a row, toward --host-max-failures (unreachable, timeouts)


class HostNumbers(Protocol):
    """What every host row has: a `HostStats`, a `Host` (core/queueing/hosts.py), a `ClusterHost`."""

    @property
    def in_flight(self) -> int: ...
    @property
    def done(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def total_ms(self) -> float: ...
    @property
    def delay(self) -> float: ...
    @property
    def paused(self) -> bool: ...
    @property
    def parked(self) -> int: ...


def as_paused(state: str, in_flight: int) -> str:
    """A host's state while the whole crawl is paused: nothing is taken, so a host that would
    fetch or wait is paused (one still finishing a fetch stays fetching until it ends)."""
    if state in ("ready", "waiting") or (state == "fetching" and not in_flight):
        return "paused"
    return state


def host_view(name: str, s: HostNumbers, now: float, crawl_paused: bool = False) -> HostView:
    """A row from a `Host` (scheduling stores) or a `HostStats` (the Redis store); the
    queue's fields (state, queued, wake ...) only a Host has: a HostStats reads empty.
    `crawl_paused`: the whole crawl is paused, and its hosts read so (as_paused)."""
    done = s.done
    state = getattr(s, "state", None)
    wake = getattr(s, "wake", None)
    text = state(now) if state else ""
    if crawl_paused and text:
        text = as_paused(text, s.in_flight)
    return HostView(
        name, s.in_flight, done, s.errors, s.total_ms / done if done else 0.0, s.delay, s.paused, s.parked,
        text, getattr(s, "queued", 0), wake(now) if wake else 0.0,
        getattr(s, "source", ""), getattr(s, "why", ""), getattr(s, "over", 0), getattr(s, "strikes", 0))


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    seq: int
    at: float
    url: str
    kind: str  # the reason in words (core/outcomes.py reason): "connection refused"
    message: str  # the error's own message, after its class name
    tries: int
    via: str | None = None  # the page that linked to the URL (or redirected to it)
    error_kind: str = ""  # its code (core/errors.py KINDS)


@dataclass(frozen=True, slots=True)
class MergeEvent:
    seq: int
    at: float
    source: str
    target: str
    status: int | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    state: str
    elapsed: float
    records: int
    pages: int
    bytes: int
    queued: int
    seen: int
    in_flight: int
    concurrency: int
    busy: int
    idle: int
    errors: int
    retries: int
    redirects: int
    merges: int
    robots_blocked: int
    truncated: int
    rate_now: float
    rate_avg: float
    statuses: dict[int, int]
    errors_by_kind: dict[str, int]
    workers: tuple[WorkerView, ...]
    hosts: tuple[HostView, ...]
    recent_errors: tuple[ErrorEvent, ...]
    recent_merges: tuple[MergeEvent, ...]
    history_pages: tuple[int, ...]
    history_queue: tuple[int, ...]
    history_errors: tuple[int, ...]
    resumed_from: int = 0
    recent_redirects: tuple[MergeEvent, ...] = ()
    ignored: int = 0
    notice: str = ""  # a condition the operator must see, e.g. "REDIS DOWN: retrying"
    # Hosts by state (core/queueing/hosts.py STATES), and, when no worker has a due URL, when the
    # earliest host comes due (seconds): the screen says why the pool is idle.
    host_counts: dict[str, int] = field(default_factory=dict)
    next_due: float | None = None
    hosts_over_budget: int = 0  # URLs refused over --max-pages-per-host, all hosts
    sitemap_probes: int = 0  # guessed /sitemap.xml probes sent (core/fetching/sitemaps.py), found or not
    sitemap_found: int = 0  # of which looked like a sitemap and were queued
    requisites: int = 0  # responses to requisites, beside `pages` (core/queueing/kinds.py)
    externals: int = 0  # responses to external links checked once
    # What became of each record (core/outcomes.py): fetched, redirected, failed, skipped,
    # cancelled; and the fetched ones by status class. `errors` is outcomes["failed"].
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    fetched_classes: dict[str, int] = field(default_factory=dict)
    # The check workers (core/crawler.py): busy now, and how many there are; `busy`, `idle`
    # and `concurrency` count the page workers only.
    checks_busy: int = 0
    checks: int = 0
    browser: BrowserView | None = None  # --browser only

    @property
    def failed(self) -> int:
        return self.outcomes.get(FAILED, 0)

    @property
    def skipped(self) -> int:
        return self.outcomes.get(SKIPPED, 0)

    @property
    def cancelled(self) -> int:
        return self.outcomes.get(CANCELLED, 0)


@dataclass
class Stats:
    clock: Callable[[], float] = time.monotonic
    queue_size: Callable[[], int] = lambda: 0
    seen_size: Callable[[], int] = lambda: 0
    state: str = "RUNNING"
    target_concurrency: int = 0
    target_checks: int = 0
    records: int = 0
    pages: int = 0
    requisites: int = 0  # requisites fetched (images, stylesheets, scripts...)
    externals: int = 0  # external links checked
    bytes: int = 0
    errors: int = 0
    retries: int = 0
    redirects: int = 0
    merges: int = 0
    robots_blocked: int = 0
    truncated: int = 0
    resumed_from: int = 0
    ignored: int = 0  # queued URLs dropped by an ignore pattern (each has its record)
    notice: str = ""  # set by a cluster member while Redis is away (core/cluster/member.py)
    sitemap_probes: int = 0
    sitemap_found: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    tally: Tally = field(default_factory=Tally)  # outcomes of the records emitted (core/outcomes.py)
    errors_by_kind: Counter[str] = field(default_factory=Counter)
    error_urls: Counter[str] = field(default_factory=Counter)
    workers: dict[int, WorkerState] = field(default_factory=dict)
    hosts: dict[str, HostStats] = field(default_factory=dict)
    # A scheduling store shares its Host objects (core/queueing/hosts.py): these read it.
    make_host: Callable[[str], HostStats] | None = None
    host_counts: Callable[[], dict[str, int]] = dict
    next_due: Callable[[], float | None] = lambda: None
    over_budget: Callable[[], int] = lambda: 0
    browser: BrowserGauge | None = None  # --browser: set by the crawl once its browser started
    recent_errors: deque[ErrorEvent] = field(default_factory=lambda: deque(maxlen=RING))
    recent_merges: deque[MergeEvent] = field(default_factory=lambda: deque(maxlen=RING))
    recent_redirects: deque[MergeEvent] = field(default_factory=lambda: deque(maxlen=RING))
    started: float = 0.0
    finished: float | None = None
    _hist_pages: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY_SECONDS))
    _hist_queue: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY_SECONDS))
    _hist_errors: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY_SECONDS))
    _sec: int = 0
    _sec_pages: int = 0
    _sec_errors: int = 0

    def __post_init__(self) -> None:
        self.started = self.clock()

    # -- written by the engine -------------------------------------------------
    def host(self, name: str) -> HostStats:
        hs = self.hosts.get(name)
        if hs is None:
            hs = self.make_host(name) if self.make_host else HostStats()
            self.hosts[name] = hs
        return hs

    def set_phase(self, ws: WorkerState, phase: str) -> None:
        ws.phase = phase
        ws.since = self.clock()

    def page(self, host: str, status: int | None, size: int, ms: float, kind: str = "page") -> None:
        """A response. "pages" are pages (core/queueing/kinds.py); requisites and external
        checks are counted beside them, so the rate says what the crawl is for."""
        self._roll()
        if kind == "page":
            self.pages += 1
            self._sec_pages += 1
        elif kind == "requisite":
            self.requisites += 1
        else:
            self.externals += 1
        self.bytes += size
        if status is not None:
            self.statuses[status] += 1
        hs = self.host(host)
        hs.done += 1
        hs.total_ms += ms

    def outcome(self, status: int | None, error_kind: str | None, error: str | None) -> str:
        """Count one emitted record's outcome; the caller reports a failed one with error()."""
        return self.tally.add(status, error_kind, error)

    def error(self, url: str, host: str, error: str, tries: int, via: str | None = None,
              kind: str | None = None) -> None:
        """A failed URL (outcome failed): counted by its error_kind, shown with its reason in
        words (core/outcomes.py reason) and the error's own message."""
        self._roll()
        kind = kind or "other"
        self.errors += 1
        self._sec_errors += 1
        self.errors_by_kind[kind] += 1
        self.error_urls[url] += max(1, tries)
        if len(self.error_urls) > ERROR_URLS_MAX:  # keep the worst; memory stays bounded
            self.error_urls = Counter(dict(self.error_urls.most_common(ERROR_URLS_MAX // 10)))
        self.host(host).errors += 1
        name = kind_of(error)
        msg = error[len(name) + 2 :] if error.startswith(name + ": ") else ""
        self.recent_errors.append(ErrorEvent(self.errors, self._elapsed(), url, reason(kind, error), msg or error,
                                             tries, via, kind))

    def merge(self, source: str, target: str, status: int | None) -> None:
        self.merges += 1
        self.recent_merges.append(MergeEvent(self.merges, self._elapsed(), source, target, status))

    def redirect(self, source: str, target: str, status: int | None) -> None:
        """A redirect that was not a merge (queued, out of scope, or over the limit)."""
        self.recent_redirects.append(MergeEvent(self.redirects, self._elapsed(), source, target, status))

    def finish(self) -> None:
        self.finished = self.clock()
        self.state = "DONE"

    # -- read by the interface -------------------------------------------------
    def _elapsed(self) -> float:
        return (self.finished or self.clock()) - self.started

    def _roll(self) -> None:
        """Close the one-second buckets that ended since the last call."""
        sec = int(self._elapsed())
        if sec <= self._sec:
            return
        queued = self.queue_size()
        for _ in range(min(sec - self._sec, HISTORY_SECONDS)):
            self._hist_pages.append(self._sec_pages)
            self._hist_errors.append(self._sec_errors)
            self._hist_queue.append(queued)
            self._sec_pages = self._sec_errors = 0
        self._sec = sec

    def _rate_now(self, elapsed: float) -> float:
        """Pages/s over the last five seconds, the second under way included: true from the
        first second (not 0.0/s with 64 pages done), steady after."""
        full = list(self._hist_pages)[-4:]
        span = len(full) + max(0.0, elapsed - self._sec)
        if span < 0.2:  # too short a window to say anything
            return 0.0 if not self.pages else self.pages / max(elapsed, 0.2)
        return (sum(full) + self._sec_pages) / span

    def top_error_urls(self, n: int = 10) -> list[tuple[str, int]]:
        """The failed URLs that cost the most tries (each URL has one record)."""
        return self.error_urls.most_common(n)

    def summary(self) -> Summary:
        """The dashboard's row (core/monitor/summary.py): O(1), no worker or host rows."""
        self._roll()
        elapsed = self._elapsed()
        hist = self._hist_pages  # the last SPARK seconds, read from the right end of the deque
        spark = tuple(hist[i] for i in range(max(0, len(hist) - SPARK), len(hist)))
        return Summary(state=self.state, elapsed=elapsed, pages=self.pages, records=self.records,
                       queued=self.queue_size(), seen=self.seen_size(), rate_now=self._rate_now(elapsed),
                       rate_avg=self.pages / elapsed if elapsed > 0 else 0.0,
                       concurrency=self.target_concurrency, requisites=self.requisites,
                       externals=self.externals, outcomes=dict(self.tally.counts),
                       fetched_classes=dict(self.tally.classes), host_counts=dict(self.host_counts()),
                       spark=spark, notice=self.notice, browser=browser_numbers(self.browser_view()))

    def browser_view(self) -> BrowserView | None:
        """--browser's numbers now (None without it): the snapshot's and the summary's."""
        gauge = self.browser
        return None if gauge is None else BrowserView(gauge.memory, gauge.memory_limit,
                                                      gauge.restarts + gauge.relaunches)

    def snapshot(self) -> Snapshot:
        self._roll()
        now = self.clock()
        elapsed = self._elapsed()
        # every page worker, and the check workers that are at work (idle ones are only counted)
        gauge = self.browser
        workers = tuple(
            WorkerView(w.id, w.phase, w.url, w.host, max(0.0, now - w.since), w.tries, w.retiring, w.check)
            if gauge is None or w.phase not in BROWSER_PHASES else _tab_view(w, now, gauge)
            for w in self.workers.values() if not w.check or w.phase not in ("waiting", "paused")
        )
        checks_busy = sum(w.check for w in workers)
        pages = len(workers) - checks_busy
        busy = sum(1 for w in workers if not w.check and w.phase not in ("waiting", "paused"))
        rate_now = self._rate_now(elapsed)
        top = heapq.nlargest(TOP_HOSTS, self.hosts.items(), key=_busiest)
        mono = time.monotonic()
        paused = self.state in ("PAUSED", "STOPPING")
        hosts = tuple(host_view(h, s, mono, paused) for h, s in top)
        return Snapshot(
            state=self.state,
            elapsed=elapsed,
            records=self.records,
            pages=self.pages,
            bytes=self.bytes,
            queued=self.queue_size(),
            seen=self.seen_size(),
            in_flight=busy + checks_busy,
            concurrency=self.target_concurrency,
            busy=busy,
            idle=pages - busy,
            errors=self.errors,
            retries=self.retries,
            redirects=self.redirects,
            merges=self.merges,
            robots_blocked=self.robots_blocked,
            truncated=self.truncated,
            rate_now=rate_now,
            rate_avg=self.pages / elapsed if elapsed > 0 else 0.0,
            statuses=dict(self.statuses),
            errors_by_kind=dict(self.errors_by_kind),
            workers=workers,
            hosts=hosts,
            recent_errors=tuple(self.recent_errors),
            recent_merges=tuple(self.recent_merges),
            recent_redirects=tuple(self.recent_redirects),
            history_pages=tuple(self._hist_pages),
            history_queue=tuple(self._hist_queue),
            history_errors=tuple(self._hist_errors),
            resumed_from=self.resumed_from,
            ignored=self.ignored,
            notice=self.notice,
            host_counts=self.host_counts(),
            next_due=self.next_due() if not busy + checks_busy else None,
            hosts_over_budget=self.over_budget(),
            sitemap_probes=self.sitemap_probes,
            sitemap_found=self.sitemap_found,
            requisites=self.requisites,
            externals=self.externals,
            outcomes=dict(self.tally.counts),
            fetched_classes=dict(self.tally.classes),
            checks_busy=checks_busy,
            checks=self.target_checks,
            browser=self.browser_view(),
        )


def _busiest(kv: tuple[str, HostStats]) -> tuple[bool, int, bool, int]:
    """The side panel's order: paused, busy, with work queued, most done."""
    s = kv[1]
    return (s.paused, s.in_flight, bool(getattr(s, "queued", 0)), s.done)


def _tab_view(w: WorkerState, now: float, gauge: BrowserGauge) -> WorkerView:
    """A page worker in a browser phase, with its tab's requests in flight and bytes."""
    tab = gauge.tab(w.url) if w.url else None
    return WorkerView(w.id, w.phase, w.url, w.host, max(0.0, now - w.since), w.tries, w.retiring, w.check,
                      tab[0] if tab else None, tab[1] if tab else 0)
