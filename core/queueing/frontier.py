"""The frontier: what is queued and what was ever seen.

Workers only see this small interface, so a SQLite store (crash-safe resume) or a
Redis store (many machines) can stand in for the in-memory one without touching them.
"""
from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from .hosts import CHECKS, PAGES, Hosts
from .item import Item


def split_by(urls: list[str], seen: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """(never seen, seen before), asking `seen` once a URL: a store whose answer may change
    meanwhile (a writer committing) still puts every URL in exactly one list."""
    new: list[str] = []
    old: list[str] = []
    for u in urls:
        (old if seen(u) else new).append(u)
    return new, old


class Frontier(Protocol):
    def add(self, item: Item) -> bool:
        """Queue a URL never seen before; False (and nothing queued) if it was seen."""
    def requeue(self, item: Item, after: float = 0.0) -> None:
        """Put back a URL that was taken but not finished (cancelled worker, a retry):
        first in its host's queue, or in `after` seconds (a store with `hosts`)."""
    async def pop(self, lane: int = 0) -> Item:
        """The next URL whose host is due, of the lane: the site's pages (0) or the checks of
        other hosts (1) (core/queueing/hosts.py PAGES, CHECKS)."""
    def done(self, item: Item) -> None:
        """The item's Record is written; join() counts it finished."""
    def seen(self, url: str) -> bool: ...
    def split_seen(self, urls: list[str]) -> tuple[list[str], list[str]]:
        """(never seen, seen before): a page's links in one pass, as `seen` says of each."""
    def mark_seen(self, url: str) -> bool:
        """Mark seen without queueing (e.g. a URL we record but never fetch)."""
    async def claim(self, url: str) -> bool:
        """Mark seen without queueing, exactly: True for one caller only, whichever process
        of the crawl asks (a browser tab's load, recorded from the tab's answer)."""
    async def join(self) -> None: ...
    def drain(self) -> list[Item]:
        """Take every queued item at stop. A persistent store returns [] and keeps them."""
    async def remove_matching(self, predicate: Callable[[str], bool]) -> list[Item]:
        """Take every queued (not in flight) item whose URL satisfies `predicate` off the
        queue and return them (live ignores). They stay seen and stay unfinished: the
        caller writes each one's Record and then calls done(item), as for a popped item.
        Async because a store may have to scan rows on disk or on a server; it must not
        block the loop meanwhile. Order of the remaining items is kept."""
    def peek(self, n: int) -> list[Item]:
        """Up to n items that pop() would give next, without taking them (the queue view).
        Cheap: a store reads only its head."""
    @property
    def size(self) -> int: ...
    @property
    def seen_count(self) -> int: ...


class _Lane:
    """The workers of one lane waiting for a due host, and the one timer for its earliest wake."""

    __slots__ = ("getters", "timer", "timer_at")

    def __init__(self) -> None:
        self.getters: deque[asyncio.Future[None]] = deque()
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = math.inf


class DueWaiters:
    """pop() for a store whose queues are a `Hosts` (core/queueing/hosts.py): the first due URL
    of the lane (the site's pages, or checks of other hosts), else sleep until the lane's
    earliest host comes due or new work arrives. No polling: the Hosts calls `notify(at, lane)`
    whenever a host enters a ready heap, and one timer a lane stands for its earliest wake."""

    hosts: Hosts
    clock: Callable[[], float]

    def _waiters_init(self) -> None:
        # The time every decision here reads: time.monotonic, the default loop's clock, on which
        # the timers are set. The fake-clock tests (tests/engine/test_schedule.py) set their own
        # and take only what is due by it, or what a new URL wakes: they never wait on a timer.
        self.clock = time.monotonic
        self._lanes = (_Lane(), _Lane())
        self.hosts.notify = self._notify

    def _notify(self, at: float, lane: int) -> None:
        w = self._lanes[lane]
        if not w.getters:
            return
        if at <= self.clock():
            self._wake_one(w)
        elif at < w.timer_at:
            self._arm(asyncio.get_running_loop(), w, at)

    def _arm(self, loop: asyncio.AbstractEventLoop, w: _Lane, at: float) -> None:
        if w.timer is not None:
            w.timer.cancel()
        w.timer_at = at
        w.timer = loop.call_at(at, self._ring, w)

    def _ring(self, w: _Lane) -> None:
        w.timer, w.timer_at = None, math.inf
        self._wake_one(w)

    @staticmethod
    def _wake_one(w: _Lane) -> None:
        while w.getters:
            g = w.getters.popleft()
            if not g.done():
                g.set_result(None)
                return

    async def _next_due(self, lane: int = PAGES) -> Item:
        while True:
            got = self._take(lane)
            if got is not None:
                return got
            await self._wait_due(asyncio.get_running_loop(), lane)

    def _take(self, lane: int = PAGES) -> Item | None:
        """The first due URL, by `clock` (time.monotonic: the default loop's clock, as in
        next_wake_in; uvloop's is in whole ms, at most ~1 ms behind it): asyncio.get_running_loop()
        is a getpid() syscall on 3.11, 0.7% of a small page's CPU when every pop asked for it."""
        now = self.clock()
        got = self.hosts.take(now, lane)
        if got is None:
            return None
        w = self._lanes[lane]
        if w.getters:  # others wait: pass the turn on, or keep the timer on the earliest
            wake = self.hosts.next_wake(lane)
            if wake is not None:
                if wake <= now:
                    self._wake_one(w)
                elif wake < w.timer_at:
                    self._arm(asyncio.get_running_loop(), w, wake)
        return got[0]

    async def _wait_due(self, loop: asyncio.AbstractEventLoop, lane: int = PAGES) -> None:
        """Until a host of the lane may be due: the earliest wake, or a host entering its heap."""
        w = self._lanes[lane]
        wake = self.hosts.next_wake(lane)
        if wake is not None and wake < w.timer_at:
            self._arm(loop, w, wake)
        getter = loop.create_future()
        w.getters.append(getter)
        try:
            await getter
        except BaseException:
            getter.cancel()
            try:
                w.getters.remove(getter)
            except ValueError:  # it was woken: hand the wake to another
                self._wake_one(w)
            raise

    def next_wake_in(self) -> float | None:
        """Seconds until the earliest host comes due (None: nothing could)."""
        wakes = [w for w in (self.hosts.next_wake(PAGES), self.hosts.next_wake(CHECKS)) if w is not None]
        if not wakes:
            return None
        return max(0.0, min(wakes) - self.clock())  # the loop's clock, readable off the loop too


class MemoryFrontier(DueWaiters):
    """Per-host queues, a ready heap and a seen set: the default store."""

    def __init__(self) -> None:
        self.hosts = Hosts()
        self._seen: set[str] = set()
        self._unfinished = 0
        self._joined = asyncio.Event()
        self._joined.set()
        self._waiters_init()

    def add(self, item: Item) -> bool:
        if item.url in self._seen:
            return False
        self._seen.add(item.url)
        if not self.hosts.admit(item):
            return False
        self._more()
        return True

    def _more(self) -> None:
        self._unfinished += 1
        self._joined.clear()

    def requeue(self, item: Item, after: float = 0.0) -> None:
        if after > 0:
            self.hosts.defer(item, self.clock() + after)
        else:
            self.hosts.put(self.hosts.of(item.url), item, front=True)
        self._more()

    async def pop(self, lane: int = PAGES) -> Item:
        return await self._next_due(lane)

    def done(self, item: Item) -> None:
        if self._unfinished <= 0:
            raise ValueError("done() called more times than there were items")
        self._unfinished -= 1
        if not self._unfinished:
            self._joined.set()

    def seen(self, url: str) -> bool:
        return url in self._seen

    def split_seen(self, urls: list[str]) -> tuple[list[str], list[str]]:
        """Most links of a page were seen before: a set test in a comprehension each, where a
        call per link through the crawler's admission cost ~0.4 µs (docs/benchmarks/speed.md,
        "Where the cycles went")."""
        seen = self._seen
        old = [u for u in urls if u in seen]
        if not old:
            return urls, old
        if len(old) == len(urls):
            return [], old
        return [u for u in urls if u not in seen], old

    def mark_seen(self, url: str) -> bool:
        if url in self._seen:
            return False
        self._seen.add(url)
        return True

    async def claim(self, url: str) -> bool:
        """One process: mark_seen is exact already."""
        return self.mark_seen(url)

    async def join(self) -> None:
        await self._joined.wait()

    def drain(self) -> list[Item]:
        return self.hosts.drain()

    async def remove_matching(self, predicate: Callable[[str], bool]) -> list[Item]:
        return self.hosts.remove_if(predicate)

    def peek(self, n: int) -> list[Item]:
        return self.hosts.peek(n)

    @property
    def size(self) -> int:
        return self.hosts.size

    @property
    def seen_count(self) -> int:
        return len(self._seen)
