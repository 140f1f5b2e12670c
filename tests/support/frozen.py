"""A frozen stand-in for `core.Crawler`, for snapshot tests and layout work only.

It is a `Monitor` with a `Steer` part (core/surface.py), as the app reads a crawl
(stats.snapshot(), stats.state, paused, concurrency, crawl(), pause(), ...), and always
returns the same deterministic Snapshot: a fixed clock, fixed numbers. Every behaviour
test runs a real Crawler.
"""
from __future__ import annotations

import asyncio
import dataclasses
import math
import types

from crawltop.core.cluster.procs import ProcessInfo, ProcessRow
from crawltop.core.monitor.queueview import PrefixView, QueueView, Trap
from crawltop.core.monitor.stats import TOP_HOSTS, ErrorEvent, HostView, MergeEvent, Snapshot, WorkerView
from crawltop.core.steering.ignores import IgnoreResult, Ignores, IgnoreSetView, IgnoreView
from crawltop.core.steering.steer import HOST_SORTS, SeedResult
from crawltop.core.surface import Parts

HOST = "127.0.0.1:8080"
ROOT = f"http://{HOST}"


def _history(n: int, base: float, amp: float, period: float, phase: float = 0.0) -> tuple[int, ...]:
    return tuple(max(0, int(base + amp * math.sin((i + phase) / period))) for i in range(n))


def sample_snapshot(state: str = "RUNNING") -> Snapshot:
    phases = ["reading", "reading", "connecting", "parsing", "waiting", "reading", "backoff", "reading", "robots",
              "reading"]
    paths = [
        "/docs/guide/install.html", "/blog/2024/05/asyncio-crawlers", "/api/v2/items?page=3&sort=asc",
        "/docs/reference/config", "", "/stall/forever", "/flaky/503", "/products/widgets/blue-widget-deluxe",
        "/robots.txt", "/search?q=%5Bbold%5D",
    ]
    times = [0.3, 0.8, 0.1, 0.05, 1.2, 42.0, 2.5, 0.6, 0.2, 0.4]
    paused = state == "PAUSED"
    workers = []
    for i, (phase, path, t) in enumerate(zip(phases, paths, times, strict=True), start=1):
        if paused and phase == "waiting":
            phase = "paused"
        if state == "DONE":
            phase, path = "waiting", ""
        workers.append(
            WorkerView(
                id=i, phase=phase, url=(ROOT + path) if path else None, host=HOST if path else None,
                in_phase=t, tries=2 if phase == "backoff" else (1 if path else 0), retiring=False,
            )
        )
    busy = sum(1 for w in workers if w.phase not in ("waiting", "paused"))
    # failed URLs only (core/outcomes.py): a 404 is a status, a robots.txt block is skipped
    errors = (
        ErrorEvent(1, 5.9, ROOT + "/flaky/500", "HTTP 500 after 4 tries", "HTTP 500 after 4 tries", 4,
                   ROOT + "/docs/", "http-status"),
        ErrorEvent(2, 8.1, ROOT + "/[bold]x[/bold]", "ClientResponseError", "[red]not markup[/red]", 1, None,
                   "other"),
        ErrorEvent(3, 9.4, ROOT + "/esc\x1b[31mred\x1b[0m", "timed out after 5 s", "read timed out\x07", 3, None,
                   "timeout"),
        ErrorEvent(4, 12.0, ROOT + "/loop/a", "too many redirects", "more than 10 redirects", 1, None,
                   "too-many-redirects"),
        ErrorEvent(5, 20.3, "http://other.example:9/down", "connection refused",
                   "Cannot connect to host other.example:9 (connection refused)", 4, ROOT + "/links/", "connect"),
    )
    merges = (
        MergeEvent(1, 4.0, ROOT + "/old-home", ROOT + "/", 301),
        MergeEvent(2, 6.5, ROOT + "/docs", ROOT + "/docs/", 301),
        MergeEvent(3, 9.0, ROOT + "/a/b/../c", ROOT + "/a/c", 308),
        MergeEvent(4, 15.2, ROOT + "/index.html", ROOT + "/", 302),
    )
    hosts = (
        HostView(HOST, busy, 1234, 6, 38.5, 0.0, state="fetching", queued=0 if state == "DONE" else 457),
        HostView("other.example:9", 0, 0, 1, 0.0, 0.0, state="backoff", queued=3, wait=12.5, why="connect",
                 failures=3),
    )
    done = state == "DONE"
    return Snapshot(
        state=state,
        elapsed=83.4,
        records=1318,
        pages=1234,
        bytes=18_734_221,
        queued=0 if done else 457,
        seen=1775 if not done else 1318,
        in_flight=0 if done else busy,
        concurrency=10,
        busy=0 if done else busy,
        idle=len(workers) - (0 if done else busy),
        errors=len(errors),
        retries=9,
        redirects=52,
        merges=len(merges),
        robots_blocked=3,
        truncated=1,
        rate_now=0.0 if paused or done else 16.4,
        rate_avg=14.8,
        statuses={200: 1150, 301: 48, 302: 4, 404: 27, 500: 5},
        errors_by_kind={"http-status": 1, "other": 1, "timeout": 1, "too-many-redirects": 1, "connect": 1},
        outcomes={"fetched": 1258, "redirected": 52, "failed": 5, "skipped": 3, "cancelled": 0},
        fetched_classes={"2xx": 1231, "4xx": 27},
        workers=tuple(workers),
        hosts=hosts,
        recent_errors=errors,
        recent_merges=merges,
        history_pages=_history(83, 14, 6, 7.0),
        history_queue=_history(83, 300, 200, 20.0, 10),
        history_errors=tuple(1 if i % 11 == 0 else 0 for i in range(83)),
        host_counts={"done": 1, "retired": 1} if done else {"fetching": 1, "backoff": 1},
    )


# (state, count, why) of the many-hosts sample: a polite crawl of 40 sites mid-way
HOST_MIX = (("fetching", 6, ""), ("ready", 2, ""), ("waiting", 20, ""), ("backoff", 1, "429"),
            ("backoff", 1, "503"), ("backoff", 1, "timeout"), ("paused", 1, ""), ("budget", 2, ""),
            ("retired", 2, "connect"), ("done", 4, ""))


def sample_hosts() -> tuple[HostView, ...]:
    """40 host queues in every state, fixed numbers (the queues view and the side panel)."""
    rows = []
    i = 0
    for state, n, why in HOST_MIX:
        for _ in range(n):
            i += 1
            name = f"www.site{i:02d}.example" if i % 3 else f"10.0.{i}.7:8080"
            queued = 0 if state in ("done", "budget", "retired") else (i * 37) % 400 + 3
            source = ("delay", "robots", "adaptive", "live", "robots (capped)")[i % 5]
            delay = {"delay": 1.0, "robots": 2.0, "adaptive": 0.35, "live": 0.5, "robots (capped)": 30.0}[source]
            wait = {"waiting": (i % 9) / 10 + 0.1, "backoff": 3.0 + i}.get(state, 0.0)
            rows.append(HostView(
                name, (1 if i % 4 else 2) if state == "fetching" else 0,
                (i * 53) % 900 + (50 if state == "done" else 0),
                (i * 7) % 13 if state != "done" else 0, 20.0 + (i * 31) % 400, delay,
                paused=state == "paused", parked=queued if state == "paused" else 0, state=state, queued=queued,
                wait=wait, source=source, why=why, over=(i * 11) % 300 if state == "budget" else 0,
                failures=5 if state == "retired" else (2 if state == "backoff" else 0)))
    return tuple(rows)


ADDED = 1_795_340_000.0  # a fixed wall-clock time for the ignores screen


def sample_ignores() -> tuple[IgnoreView, ...]:
    return (
        IgnoreView(r"^https?://127\.0\.0\.1:8080/calendar/", ADDED, 4_812, 1_377),
        IgnoreView(r"[?&]sessionid=", ADDED + 95, 0, 212),
        IgnoreView(r"\.(jpg|png|gif)$", ADDED + 300, 31, 8),
        IgnoreView("%25252525", ADDED - 60, 0, 3, "global"),
        IgnoreView("(repeated path segments)", ADDED - 60, 2, 41, "global"),
    )


def sample_queue_view(traps: bool = True) -> QueueView:
    cal = f"{HOST}/calendar/"
    prefixes = (
        PrefixView(cal, 3_210, 1_480.0, 0.7, 412, 0.0),
        PrefixView(f"{cal}2031/", 1_102, 610.0, 0.24, 0, 0.0),
        PrefixView(f"{HOST}/news/", 512, -40.0, 0.11, 190, 2.4),
        PrefixView(f"{HOST}/tech/", 301, -12.0, 0.066, 160, 1.9),
        PrefixView(f"{HOST}/search/", 120, 3.0, 0.026, 6, 0.5),
        PrefixView(f"{HOST}/about/", 4, 0.0, 0.001, 1, 0.0),
    )
    found = (
        Trap(cal, "self-feeding", "70% of the queue, +1480/min, 0.0 new links elsewhere per page"),
        Trap(f"{HOST}/search", "query variants", "120 queued query strings of one path"),
    )
    nxt = tuple(f"{ROOT}/calendar/2031/{m:02d}/" for m in range(1, 6)) + (f"{ROOT}/news/art-12/",
                                                                          f"{ROOT}/search?q=a&page=9")
    return QueueView(4_587, nxt, prefixes, found if traps else ())


class FrozenStats:
    def __init__(self, crawler: FrozenCrawler) -> None:
        self._crawler = crawler
        self.state = crawler.initial_state

    def snapshot(self) -> Snapshot:
        return self._crawler.make_snapshot(self.state)

    def top_error_urls(self, n: int = 10) -> list[tuple[str, int]]:
        return [(e.url, 4 - i % 3) for i, e in enumerate(self._crawler.make_snapshot("DONE").recent_errors)][:n]


class FrozenCrawler:
    """Same attributes and methods as core.Crawler; nothing moves."""

    def __init__(self, state: str = "RUNNING", *, finish: bool = False, traps: bool = False,
                 many_hosts: bool = False, idle: bool = False) -> None:
        self.initial_state = state
        self.traps = traps
        self.many_hosts = many_hosts or idle  # 40 host queues in every state
        self.idle = idle  # every host with work waits: no worker busy
        self.paused_host_names: set[str] = set()
        self.ignore_views = sample_ignores()
        self.finish = finish
        self.paused = state == "PAUSED"
        self.concurrency = 10
        self.cancelled: list[int] = []
        self.delays: dict[str, float] = {}
        self.stats = FrozenStats(self)
        self.config = types.SimpleNamespace(roots=(ROOT + "/",))
        self._stop = asyncio.Event()

    @property
    def parts(self) -> Parts:
        return Parts(steer=self)

    def make_snapshot(self, state: str) -> Snapshot:
        snap = sample_snapshot(state)
        if self.concurrency != snap.concurrency:
            snap = dataclasses.replace(snap, concurrency=self.concurrency)
        if self.many_hosts:
            rows = self.hosts()
            counts: dict[str, int] = {}
            for h in rows:
                counts[h.state] = counts.get(h.state, 0) + 1
            top = sorted(rows, key=lambda h: (h.paused, h.in_flight, bool(h.queued), h.done), reverse=True)
            snap = dataclasses.replace(snap, hosts=tuple(top[:TOP_HOSTS]), host_counts=counts,
                                       hosts_over_budget=sum(h.over for h in rows))
        if self.idle:
            workers = tuple(dataclasses.replace(w, phase="waiting", url=None, host=None, in_phase=0.4)
                            for w in snap.workers)
            snap = dataclasses.replace(snap, workers=workers, busy=0, in_flight=0, idle=len(workers),
                                       rate_now=0.0, next_due=0.3)
        return snap

    def hosts(self) -> tuple[HostView, ...]:
        rows = sample_hosts()
        if self.idle:  # every host with work waits out its delay
            rows = tuple(dataclasses.replace(h, state="waiting", in_flight=0, wait=0.3 + h.wait)
                         if h.state in ("fetching", "ready") else h for h in rows)
        return tuple(dataclasses.replace(h, paused=True, state="paused", parked=h.queued)
                     if h.host in self.paused_host_names else h for h in rows)

    def host_table(self, sort: str = "queued", state: str | None = None,
                   limit: int | None = None) -> list[HostView]:
        if sort not in HOST_SORTS:
            raise ValueError(f"sort by one of {', '.join(HOST_SORTS)}, not {sort!r}")
        rows = [h for h in (self.hosts() if self.many_hosts else self.make_snapshot(self.stats.state).hosts)
                if state is None or h.state == state]
        key, reverse = HOST_SORTS[sort]
        return sorted(rows, key=key, reverse=reverse)[:limit]

    def paused_hosts(self) -> dict[str, int]:
        return {h: 0 for h in self.paused_host_names}

    def pause_host(self, host: str) -> bool:
        self.paused_host_names.add(host)
        return True

    def resume_host(self, host: str) -> int:
        self.paused_host_names.discard(host)
        return 0

    def set_host_delay(self, host: str, seconds: float) -> None:
        self.delays[host] = seconds  # kept, never shown: the snapshot is fixed

    def add_seed(self, url: str) -> SeedResult:
        return SeedResult(False, url.strip(), "a frozen crawl takes no new URL")

    async def crawl(self) -> None:
        if not self.finish:
            await self._stop.wait()
        self.stats.state = "DONE"

    def pause(self) -> None:
        self.paused = True
        self.stats.state = "PAUSED"

    def resume(self) -> None:
        self.paused = False
        self.stats.state = "RUNNING"

    def set_concurrency(self, n: int) -> None:
        self.concurrency = n

    def cancel_worker(self, worker_id: int) -> bool:
        self.cancelled.append(worker_id)
        return True

    def queue_view(self, n: int = 10) -> QueueView:
        return sample_queue_view(self.traps)

    def ignores(self) -> tuple[IgnoreView, ...]:
        return self.ignore_views

    async def add_ignore(self, pattern: str) -> IgnoreResult:
        reason = Ignores.check(pattern)
        if reason is not None:
            return IgnoreResult(False, pattern, reason)
        self.ignore_views += (IgnoreView(pattern, ADDED + 600, 0, 0),)
        return IgnoreResult(True, pattern)

    def ignore_sets(self) -> tuple[IgnoreSetView, ...]:
        return (IgnoreSetView("global", "loops and junk", True, 16), IgnoreSetView("blogs", "calendars", False, 10))

    async def set_ignore_set(self, name: str, on: bool) -> IgnoreResult:
        return IgnoreResult(True, name)

    def remove_ignore(self, pattern: str) -> bool:
        before = len(self.ignore_views)
        self.ignore_views = tuple(v for v in self.ignore_views if v.pattern != pattern)
        return len(self.ignore_views) < before

    def stop(self) -> None:
        self.stats.state = "STOPPING"
        self._stop.set()


def sample_processes() -> list[ProcessRow]:
    """Three engines of a shared crawl: two live on two machines, one lost (kill -9)."""
    def row(proc: str, state: str, busy: int, pages: int, rate: float, age: float, lost: bool = False,
            leases: int = 10, left: float | None = None) -> ProcessRow:
        host, pid, _ = proc.split(":")
        return ProcessRow(proc, ProcessInfo(host, int(pid), state, 10, busy, pages, rate), age, lost, leases, left)

    return [
        row("crawler-a:4101:9f2e", "RUNNING", 10, 61_240, 412.0, 0.3),
        row("crawler-b:2250:11c0", "PAUSED", 0, 48_902, 0.0, 0.8, leases=0),
        row("crawler-c:3307:7a1d", "RUNNING", 7, 12_004, 0.0, 21.4, lost=True, leases=7, left=3.6),
    ]


class FrozenCluster(FrozenCrawler):
    """A shared crawl's monitor (core/cluster/view.py) with fixed rows. Its hosts come from
    Redis's HostStats: no queue states (the panel shows in flight, done, errors, latency)."""

    def make_snapshot(self, state: str) -> Snapshot:
        snap = super().make_snapshot(state)
        hosts = tuple(dataclasses.replace(h, state="", queued=0, wait=0.0, why="", failures=0) for h in snap.hosts)
        return dataclasses.replace(snap, hosts=hosts, host_counts={})

    @property
    def parts(self) -> Parts:
        return Parts(steer=self, cluster=self)

    def processes(self) -> list[ProcessRow]:
        return sample_processes()

    def nodes(self) -> list:
        """A plain Redis: no nodes rows (tests/cluster/test_cluster_nodes.py has a cluster's)."""
        return []

    def pause_process(self, proc: str) -> None:
        self.cancelled.append(hash(proc))

    def resume_process(self, proc: str) -> None:
        self.cancelled.append(hash(proc))

    def stop_process(self, proc: str) -> None:
        self.cancelled.append(hash(proc))


# -- the dashboard: a board with fixed rows ---------------------------------------------

class FrozenBoard:
    """core/dashboard/board.py Board's face with fixed rows: live, paused, ended four ways.
    For the dashboard's snapshot tests only; its behaviour tests watch real crawls."""

    def __init__(self) -> None:
        from crawltop.core.dashboard.board import Row
        from crawltop.core.monitor.summary import Summary

        def summary(state: str, pages: int, rate: float, queued: int, failed: int, elapsed: float,
                    hosts: dict[str, int], phase: float = 0.0, conc: int = 8) -> Summary:
            spark = _history(30, rate, rate / 3, 3.0, phase) if state in ("RUNNING", "PAUSED") else ()
            return Summary(state=state, elapsed=elapsed, pages=pages, records=pages + failed, queued=queued,
                           seen=pages + queued + failed, rate_now=rate, rate_avg=rate, concurrency=conc,
                           outcomes={"fetched": pages, "redirected": pages // 20, "failed": failed,
                                     "skipped": 3, "cancelled": 0},
                           fetched_classes={"2xx": pages - 40, "4xx": 40}, host_counts=hosts, spark=spark)

        t0 = 1_700_000_000.0
        self.rows = {r.name: r for r in (
            Row("docs", "https://docs.example.org/", 4101, t0, "detached", False,
                summary("RUNNING", 12_345, 41.0, 2_310, 12, 301.0, {"ready": 2, "fetching": 1, "waiting": 1,
                                                                     "backoff": 1})),
            Row("shop", "https://shop.example.com/catalogue/", 4102, t0, "tui", True,
                summary("PAUSED", 3_020, 0.0, 15_200, 4, 1_250.0, {"paused": 4}, conc=4)),
            Row("blog", "http://127.0.0.1:8080/", 4103, t0, "headless", False,
                summary("RUNNING", 96_000, 180.0, 48_113, 230, 3_700.0, {"ready": 12, "waiting": 30}, 1.5, 32)),
            Row("wiki", "https://wiki.example.net/", 4104, t0, summary=summary("DONE", 8_200, 0, 0, 7, 640.0, {}),
                how="done", ended=t0 + 640),
            Row("news", "https://news.example.com/", 4105, t0, summary=summary("DONE", 510, 0, 920, 0, 30.0, {}),
                how="stopped", by="crawltop ctl", ended=t0 + 30),
            Row("mirror", "https://mirror.example.org/pub/", 4106, t0,
                summary=summary("RUNNING", 77_000, 0, 12_000, 31, 5_400.0, {}), how="lost", ended=t0 + 5400),
        )}
        self.links = {name: None for name, row in self.rows.items() if row.live}  # the live ones answer
        self.lost_now: list[str] = []
        self.sent: list[tuple[str, str, dict]] = []
        self.redis_problem = ""

    def can_command(self, name: str) -> bool:
        return name in self.links

    async def tick(self, now: float | None = None, shown: set[str] | None = None) -> None:
        return None

    def look_now(self) -> None:
        return None

    def dismiss(self, name: str) -> bool:
        return self.rows.pop(name, None) is not None

    async def command(self, name: str, op: str, **args: object) -> object:
        self.sent.append((name, op, args))
        return None

    async def close(self) -> None:
        return None
