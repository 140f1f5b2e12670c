"""What is in the queue, kept as URLs are queued and taken, never by scanning it.

The queue view (`u`) and the trap warning read `QueueStats.view()`, O(rows shown) on any
frontier; the trap flags are `Trap`'s docstring.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from .topk import RankedCounter

EPOCH = 30.0  # seconds; growth is measured from the start of the previous epoch (30-60 s)
# A prefix is judged self-feeding only once it has been queued for an epoch: at first
# every section of a site grows from nothing, as a trap does.
TOP = 12
# Trap thresholds (documented in README "Steering the crawl").
SHARE_MIN = 0.2  # of the queue, for a prefix growing by GROWTH_MIN of itself a minute
SHARE_HOLD = 0.5  # of the queue, for a prefix that holds it without shrinking
QUEUE_MIN = 100  # queue size below which no share-based flag is raised
GROWTH_MIN = 0.1
OUTSIDE_MAX = 0.5  # new links per page outside the prefix, at most
PAGES_MIN = 10  # pages fetched under the prefix before it can be judged
VARIANTS_MIN = 50  # queued query variants of one path
ODD_MIN = 20  # queued deep/long/repeating URLs under one prefix
DEEP_SEGMENTS = 12
LONG_URL = 300
REPEATS = 3  # one segment this many times in a path


@dataclass(frozen=True, slots=True)
class PrefixView:
    prefix: str  # host/seg/ or host/seg/seg/ (no scheme)
    queued: int
    per_min: float  # growth of its queued count per minute (negative: shrinking)
    share: float  # of the whole queue
    pages: int  # pages fetched under it (this run)
    outside: float  # new links per fetched page that lie outside it
    age: float = 0.0  # seconds since it was first queued (this run)
    before: int = 0  # its queued count at the start of the growth window


@dataclass(frozen=True, slots=True)
class Trap:
    """A suspected crawler trap. `reason`:
    - `self-feeding`: a prefix whose pages bring almost no new links outside it while it
      holds a growing share of the queue (at least 20%, growing 10% a minute), or holds
      half of it and has not halved over the window (an endless calendar, a faceted
      search): a finite section that dominates the queue drains as it is crawled, a trap
      does not. Judged only for prefixes queued for at least one epoch;
    - `query variants`: one path queued with many different query strings;
    - `deep`: many queued URLs under one prefix with very deep or very long paths;
    - `repeats`: many queued URLs under one prefix whose path repeats a segment (/a/b/a/b/).
    """

    prefix: str  # what an ignore would target: host/seg/ (or a path for query variants)
    reason: str  # self-feeding | query variants | deep | repeats
    detail: str

    def line(self) -> str:
        return f"{self.reason}: {self.prefix} ({self.detail})"


@dataclass(frozen=True, slots=True)
class QueueView:
    queued: int
    next_urls: tuple[str, ...]
    prefixes: tuple[PrefixView, ...]
    traps: tuple[Trap, ...]


def suggest(prefix_or_url: str) -> str:
    """The ignore pattern to pre-fill from a prefix (`host/cal/`) or a URL: `^https?://host/cal/`."""
    text = prefix_or_url
    if "://" in text:
        text = text.split("://", 1)[1]
        text = text.split("?", 1)[0].split("#", 1)[0]
        host, _, path = text.partition("/")
        segs = [s for s in path.split("/")[:-1] if s][:2]  # directory segments only
        text = host + "/" + "".join(s + "/" for s in segs)
    return "^https?://" + re.escape(text)


def split_url(url: str) -> tuple[str, str | None, str | None, str, bool]:
    """(host/path-without-query, prefix1, prefix2, path, has_query) of an absolute URL."""
    s = url.find("//") + 2
    slash = url.find("/", s)
    q = url.find("?", s)
    if slash < 0 or (0 <= q < slash):
        return (url[s:q] if q >= 0 else url[s:]) + "/", None, None, "/", q >= 0
    end = q if q >= 0 else len(url)
    j = url.find("/", slash + 1, end)
    if j < 0:
        return url[s:end], None, None, url[slash:end], q >= 0
    k = url.find("/", j + 1, end)
    p1 = url[s : j + 1]
    return url[s:end], p1, (url[s : k + 1] if k >= 0 else None), url[slash:end], q >= 0


def _first_level(prefix: str) -> str:
    """host/cal/2031/ -> host/cal/ (the level pages are counted at)."""
    i = prefix.find("/")
    j = prefix.find("/", i + 1)
    return prefix[: j + 1] if j > 0 else prefix


def oddity(path: str) -> str | None:
    """'deep' or 'repeats' for a suspicious path, else None (cheap gate: few slashes)."""
    n = path.count("/")
    if n < REPEATS + 1:
        return None
    if n > DEEP_SEGMENTS:
        return "deep"
    segs = [s for s in path.split("/") if s]
    if len(segs) - len(set(segs)) >= REPEATS - 1:
        for s in set(segs):
            if segs.count(s) >= REPEATS:
                return "repeats"
    return None


class QueueStats:
    """Counters of the queue's contents by prefix; the crawler calls added/taken/fetched.

    Every counter moves by one per URL queued (`added`) or taken (`taken`), in O(1)
    (core/monitor/topk.py): the memory, SQLite and Redis stores are never asked for more than
    their size and head. A prefix is the host plus the first path segment (`host/cal/`) or
    the first two (`host/cal/2031/`), counted only for URLs that have that many directory
    segments. Counts start at zero when the process starts: a resumed crawl's carried-over
    queue is not counted until it is re-queued (a scan of it would cost seconds).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, epoch: float = EPOCH) -> None:
        self.clock = clock
        self.epoch = epoch  # tests shorten it
        self.p1: RankedCounter[str] = RankedCounter()
        self.p2: RankedCounter[str] = RankedCounter()
        self.variants: RankedCounter[str] = RankedCounter()  # path -> queued URLs with a query
        self.odd: RankedCounter[tuple[str, str]] = RankedCounter()  # (reason, prefix1) -> queued
        self._marks: dict[str, tuple[int, int, int, float]] = {}  # prefix -> (epoch, at prev, at cur, born)
        self._pages: dict[str, list[int]] = {}  # prefix1 -> [pages fetched, new links outside]
        self._start = clock()

    # -- written by the crawler (hot path: keep it lean) ---------------------------
    def _epoch(self) -> int:
        return int((self.clock() - self._start) // self.epoch)

    def _mark(self, prefix: str, count: int, epoch: int) -> None:
        """Remember the count at the start of this epoch and the one before (before a change)."""
        m = self._marks.get(prefix)
        if m is None:
            self._marks[prefix] = (epoch, 0, count, self.clock())
        elif m[0] != epoch:
            prev = m[2] if m[0] == epoch - 1 else count
            self._marks[prefix] = (epoch, prev, count, m[3])

    def added(self, url: str) -> str:
        """Count a queued URL; returns its first-level prefix."""
        bare, p1, p2, path, query = split_url(url)
        epoch = self._epoch()
        if p1 is None:
            p1 = bare[: bare.find("/") + 1]
        self._mark(p1, self.p1.get(p1), epoch)
        self.p1.incr(p1)
        if p2 is not None:
            self._mark(p2, self.p2.get(p2), epoch)
            self.p2.incr(p2)
        if query:
            self.variants.incr(bare)
        odd = oddity(path) or ("deep" if len(url) > LONG_URL else None)
        if odd:
            self.odd.incr((odd, p1))
        return p1

    def taken(self, url: str) -> None:
        bare, p1, p2, path, query = split_url(url)
        epoch = self._epoch()
        if p1 is None:
            p1 = bare[: bare.find("/") + 1]
        self._mark(p1, self.p1.get(p1), epoch)
        if not self.p1.decr(p1):
            self._marks.pop(p1, None)  # gone from the queue: memory follows the queue
        if p2 is not None:
            self._mark(p2, self.p2.get(p2), epoch)
            if not self.p2.decr(p2):
                self._marks.pop(p2, None)
        if query:
            self.variants.decr(bare)
        odd = oddity(path) or ("deep" if len(url) > LONG_URL else None)
        if odd:
            self.odd.decr((odd, p1))

    def fetched(self, url: str, new_links: int, new_inside: int) -> None:
        """A page under url's prefix found `new_links` new URLs, `new_inside` of them inside it."""
        _, p1, _, _, _ = split_url(url)
        if p1 is None:
            return
        row = self._pages.get(p1)
        if row is None:
            if len(self._pages) >= 100_000:  # endless prefixes: keep memory bounded
                self._pages.clear()
            row = self._pages[p1] = [0, 0]
        row[0] += 1
        row[1] += new_links - new_inside

    @staticmethod
    def prefix1(url: str) -> str | None:
        return split_url(url)[1]

    # -- read by the view -------------------------------------------------------------
    def _growth(self, prefix: str, count: int) -> tuple[float, float, int]:
        """(queued count change per minute since the start of the previous epoch, age in s,
        the count then)."""
        m = self._marks.get(prefix)
        now = self.clock() - self._start
        epoch = int(now // self.epoch)
        if m is None:
            return 0.0, 0.0, count
        age = self.clock() - m[3]
        if m[0] == epoch:
            base, since = m[1], (epoch - 1) * self.epoch
        elif m[0] == epoch - 1:
            base, since = m[2], m[0] * self.epoch
        else:
            return 0.0, age, count  # untouched for a whole epoch: no change
        span = max(1.0, now - max(0.0, since))
        return (count - base) * 60.0 / span, age, base

    def prefix_views(self, queued: int, k: int = TOP) -> list[PrefixView]:
        seen: dict[str, PrefixView] = {}
        for counter in (self.p1, self.p2):
            for prefix, n in counter.top(k):
                pages, outside = self._pages.get(_first_level(prefix), (0, 0))
                per_min, age, before = self._growth(prefix, n)
                seen[prefix] = PrefixView(prefix, n, per_min, n / queued if queued else 0.0,
                                          pages, outside / pages if pages else 0.0, age, before)
        rows = sorted(seen.values(), key=lambda v: (-v.queued, v.prefix))
        return rows[:k]

    def traps(self, queued: int, rows: list[PrefixView] | None = None) -> list[Trap]:
        out: list[Trap] = []
        rows = rows if rows is not None else self.prefix_views(queued)
        if queued >= QUEUE_MIN:
            for v in rows:
                if v.prefix.count("/") != 2:  # judge first-level prefixes only
                    continue
                growing = v.share >= SHARE_MIN and v.per_min >= GROWTH_MIN * v.queued
                holding = v.share >= SHARE_HOLD and 2 * v.queued >= v.before  # not drained by half
                old = v.age >= self.epoch
                if old and (growing or holding) and v.pages >= PAGES_MIN and v.outside <= OUTSIDE_MAX:
                    out.append(Trap(v.prefix, "self-feeding",
                                    f"{v.share:.0%} of the queue, {v.per_min:+.0f}/min, "
                                    f"{v.outside:.1f} new links elsewhere per page"))
        for path, n in self.variants.top(3):
            if n < VARIANTS_MIN:
                break
            out.append(Trap(path, "query variants", f"{n} queued query strings of one path"))
        for (reason, prefix), n in self.odd.top(3):
            if n < ODD_MIN:
                break
            what = "very deep or long URLs" if reason == "deep" else "URLs repeating a path segment"
            out.append(Trap(prefix, reason, f"{n} queued {what}"))
        return out

    def view(self, queued: int, next_urls: tuple[str, ...] = ()) -> QueueView:
        rows = self.prefix_views(queued)
        return QueueView(queued, next_urls, tuple(rows), tuple(self.traps(queued, rows)))
