"""Scheduling by host: one queue per host and a ready order of hosts by next-allowed time.

Why (a polite crawl's speed is the sum over hosts) and how hosts take turns: `Hosts`;
what decides a host's delay, back-off and retirement: core/queueing/politeness.py, whose
pure functions `Hosts` applies to its hosts with the time it is given (`now`, `started`).
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any

from ..parsing.urls import netloc_of
from . import politeness as rules
from .hostkeys import key_function
from .item import Item
from .politeness import Politeness

# Host.flags
PAUSED = 1
RETIRED = 2
NEEDS_ROBOTS = 4  # robots.txt is the host's first request (Heritrix's prerequisite)
STEP_PENDING = 8  # a worker does the host's robots.txt or probe: the host is not due meanwhile
NEEDS_PROBE = 16  # its guessed /sitemap.xml is probed as one of its requests (core/fetching/sitemaps.py)
CHECK = 32  # not one of the site's hosts: its URLs are checks, taken by the check workers only
ANSWERED = 64  # it has sent an HTTP response (any status) at least once
UNSORTED = 128  # made from a key alone (a resume): its lane is read off its first queued URL

# The two lanes of work. A site's own pages must never wait behind link rot, so hosts out of
# scope (external links, off-site requisites) are taken by workers of their own.
PAGES, CHECKS = 0, 1

# States of a host, in the order the header counts them.
STATES = ("ready", "fetching", "waiting", "backoff", "paused", "budget", "retired", "done")


class Extra:
    """What few hosts need (a back-off, a Crawl-delay, a live delay, a budget overrun):
    kept apart, so a host that is only queued costs its core slots and nothing more."""

    __slots__ = ("source", "crawl_delay", "live_delay", "adaptive", "failures", "strikes", "backoff_until",
                 "why", "block_at", "over", "last_error")

    def __init__(self) -> None:
        self.source = ""  # what decided the delay: delay, robots, robots (capped), adaptive, live
        self.crawl_delay = 0.0
        self.live_delay: float | None = None
        self.adaptive = 0.0
        self.failures = 0  # back-offs in a row (the exponent)
        self.strikes = 0  # failures to reach the host in a row (retirement)
        self.backoff_until = 0.0
        self.why = ""  # the back-off's reason: 429, 503, connect, dns, tls, timeout
        self.block_at = 0.0  # when the current back-off began (in-flight failures escalate once)
        self.over = 0  # URLs refused: over --max-pages-per-host
        self.last_error = ""


_NONE = Extra()  # read-only defaults for hosts without their own


class HostRow:
    """What a host's row says, from its fields: shared by `Host` and the Redis store's
    `ClusterHost` (core/cluster/hosts.py), so one host reads the same in every store."""

    __slots__ = ()
    flags: int
    in_flight: int
    next_at: float
    queued: int
    backoff_until: float
    over: int

    @property
    def paused(self) -> bool:
        return bool(self.flags & PAUSED)

    @property
    def retired(self) -> bool:
        return bool(self.flags & RETIRED)

    @property
    def parked(self) -> int:
        """URLs held back by a pause (the hosts panel's ⏸N)."""
        return self.queued if self.flags & PAUSED else 0

    def state(self, now: float) -> str:
        if self.flags & RETIRED:
            return "retired"
        if self.flags & PAUSED:
            return "paused"
        if self.backoff_until > now:
            return "backoff"
        if self.in_flight:
            return "fetching"
        if not self.queued:
            return "budget" if self.over else "done"
        return "waiting" if self.next_at > now else "ready"

    def wake(self, now: float) -> float:
        """Seconds until it may start a request (0: now)."""
        return max(0.0, max(self.next_at, self.backoff_until) - now)


class Host(HostRow):
    """One host's queue and politeness state. Slots and a plain list: a million fit."""

    __slots__ = ("key", "q", "head", "heap_at", "next_at", "in_flight", "done", "errors", "total_ms",
                 "delay", "flags", "admitted", "x")

    def __init__(self, key: str, flags: int = 0) -> None:
        self.key = key
        self.q: list[Item] = []
        self.head = 0  # q[:head] are taken (compacted now and then)
        self.heap_at = -1.0  # the time of this host's live entry in the ready heap; -1: none
        self.next_at = 0.0  # next request may start then (monotonic seconds)
        self.in_flight = 0
        self.done = 0
        self.errors = 0
        self.total_ms = 0.0  # server latency only: politeness waits are never in it
        self.delay = 0.0
        self.flags = flags
        self.admitted = 0  # URLs queued for it ever (the budget counts these)
        self.x: Extra | None = None

    def __lt__(self, other: Host) -> bool:  # heap ties: by key, deterministic
        return self.key < other.key

    def extra(self) -> Extra:
        if self.x is None:
            self.x = Extra()
        return self.x

    @property
    def _e(self) -> Extra:
        return self.x or _NONE

    @property
    def source(self) -> str:
        return self.x.source if self.x is not None else rules.plain_source(self.delay)

    crawl_delay = property(lambda self: self._e.crawl_delay)
    live_delay = property(lambda self: self._e.live_delay)
    failures = property(lambda self: self._e.failures)
    strikes = property(lambda self: self._e.strikes)
    backoff_until = property(lambda self: self._e.backoff_until)
    why = property(lambda self: self._e.why)
    over = property(lambda self: self._e.over)
    last_error = property(lambda self: self._e.last_error)

    @property
    def queued(self) -> int:  # type: ignore[override]  # HostRow only reads it; a Host counts its queue
        return len(self.q) - self.head


class Hosts:
    """Per-host queues and the ready heap. Not thread-safe: the loop's thread only.

    The heap holds (time, host) for every host that has queued URLs and could fetch
    (not paused, under its cap, no robots fetch pending). Entries go stale instead of
    being removed: an entry counts only while its time equals the host's heap_at.

    A polite crawl of many sites is bound by each host's delay, not by the CPU, so the
    frontier hands a worker only a URL whose host is due (its delay passed, under its
    --per-host cap, not backing off, not paused): a worker never holds a URL while it waits
    for that URL's host (Mercator's back queues and heap; Heritrix's per-host work queues).
    Due hosts come out of the heap oldest-due first, so they take turns: a host with 100,000
    URLs does not starve one with 10. Waiting for the next due host is the store's
    (core/queueing/frontier.py `DueWaiters`). `Host` is also the row the live view reads, so
    one object per host is all it costs.
    """

    def __init__(self, policy: Politeness | None = None) -> None:
        self.policy = policy or Politeness()
        self.hosts: dict[str, Host] = {}
        self._heaps: tuple[list[tuple[float, Host]], list[tuple[float, Host]]] = ([], [])  # by lane
        self._later: list[tuple[float, int, Item]] = []  # URLs retried after a wait of their own
        self._later_seq = 0
        self.size = 0  # queued URLs, all hosts
        self.retired = 0
        self.over_budget = 0
        self._key: Callable[[str], str] = netloc_of
        self.notify: Callable[[float, int], None] = lambda at, lane: None  # a host entered a lane's heap
        self.changed: Callable[[Host], None] = lambda h: None  # a state worth keeping changed (SQLite)
        self.classify: Callable[[str], bool] = lambda url: False  # URL -> its host is a check host
        self.jitter: Callable[[], float] = rules.random_jitter  # a back-off's factor (1 in the fake-clock tests)

    def sort_into_lanes(self, classify: Callable[[str], bool]) -> None:
        """Set the rule that puts a host in the check lane (True) or the pages lane, and
        apply it to the hosts made so far (a store restored before the crawl began)."""
        self.classify = classify
        for h in self.hosts.values():
            h.flags |= UNSORTED
            if h.queued:
                self._sort(h, h.q[h.head].url)

    def relane(self, url: str) -> None:
        """The scope grew (a seed added, a root redirected): the URL's host may be the site's now."""
        h = self.hosts.get(self._key(url))
        if h is not None:
            self._sort(h, url)

    def _sort(self, h: Host, url: str) -> None:
        check = CHECK if self.classify(url) else 0
        moved = h.flags & CHECK != check
        h.flags = (h.flags & ~(CHECK | UNSORTED)) | check
        if moved:
            h.heap_at = -1.0  # its entry, if any, is in the other lane's heap: stale there
            self._schedule(h)

    def configure(self, policy: Politeness) -> None:
        """The crawl's rules, set when it starts (a store may be opened before)."""
        self.policy = policy
        self._key = key_function(policy.queue_by)
        for h in self.hosts.values():  # restored from a state file: robots.txt comes first again
            if policy.robots and not h.in_flight:
                h.flags |= NEEDS_ROBOTS
            self.recompute(h)

    def key(self, url: str) -> str:
        return self._key(url)

    def host(self, key: str, flags: int = UNSORTED) -> Host:
        """The host of a key, made on first use; `flags`: its lane (CHECK, 0), or UNSORTED when
        no URL of it is at hand to tell."""
        h = self.hosts.get(key)
        if h is None:
            h = self.hosts[key] = Host(key, (NEEDS_ROBOTS if self.policy.robots else 0) | flags)
            self.recompute(h)  # due at once (0.0, shared: a float per host would cost 24 bytes)
        return h

    def of(self, url: str) -> Host:
        key = self._key(url)
        h = self.hosts.get(key)
        return h if h is not None else self.host(key, CHECK if self.classify(url) else 0)

    # -- queueing -----------------------------------------------------------------------
    def admit(self, item: Item) -> bool:
        """Queue a new URL unless its host is over budget (then count it there)."""
        h = self.within_budget(item.url)
        if h is None:
            return False
        self.put(h, item)
        return True

    def within_budget(self, url: str) -> Host | None:
        """The URL's host, its budget charged; None (and counted) when over budget."""
        h = self.of(url)
        budget = self.policy.budget
        if budget is not None and h.admitted >= budget:
            h.extra().over += 1
            self.over_budget += 1
            self.changed(h)
            return None
        h.admitted += 1
        if budget is not None:
            self.changed(h)  # a resume must not admit past the budget
        return h

    def put(self, h: Host, item: Item, front: bool = False) -> None:
        if h.flags & UNSORTED:
            self._sort(h, item.url)
        if front and h.head:
            h.head -= 1
            h.q[h.head] = item
        elif front:
            h.q.insert(0, item)
        else:
            h.q.append(item)
        self.size += 1
        self._schedule(h)

    def defer(self, item: Item, at: float) -> None:
        """Queue a URL again, but not before `at` (a URL-level retry: a 500 or a read
        timeout says nothing of the host, so the host's other URLs go on meanwhile)."""
        self._later_seq += 1
        heapq.heappush(self._later, (at, self._later_seq, item))
        self.size += 1
        self.notify(at, CHECKS if self.of(item.url).flags & CHECK else PAGES)

    def take(self, now: float, lane: int = PAGES) -> tuple[Item, Host] | None:
        """The next URL of the first due host of the lane; that host is then in flight and
        its next-allowed time moves on by its delay."""
        later = self._later
        while later and later[0][0] <= now:
            item = heapq.heappop(later)[2]
            self.size -= 1
            self.put(self.of(item.url), item, front=True)
        heap = self._heaps[lane]
        check = CHECK if lane else 0
        while heap:
            at, h = heap[0]
            if at != h.heap_at or h.flags & CHECK != check:
                heapq.heappop(heap)  # stale
                continue
            if at > now:
                return None
            heapq.heappop(heap)
            h.heap_at = -1.0
            due = self._due(h)
            if due is None:
                continue  # paused, capped or emptied since
            if due > at:  # its time moved on (a request went out, a back-off began): back in line
                h.heap_at = due
                heapq.heappush(heap, (due, h))
                continue
            item = h.q[h.head]
            h.q[h.head] = None  # type: ignore[call-overload]  # the list no longer keeps it alive
            h.head += 1
            if h.head == len(h.q):
                h.q.clear()
                h.head = 0
            elif h.head >= 64 and h.head * 2 >= len(h.q):
                del h.q[: h.head]
                h.head = 0
            self.size -= 1
            if not h.flags & RETIRED:  # a retired host's URLs only go to their Records
                h.in_flight += 1
                h.next_at = now + h.delay
                if h.flags & (NEEDS_ROBOTS | NEEDS_PROBE):  # the worker does that step first
                    h.flags |= STEP_PENDING
            self._schedule(h)
            return item, h
        return None

    def next_wake(self, lane: int = PAGES) -> float | None:
        """When the earliest host of the lane comes due; None if none could (nothing queued,
        or all paused, capped or waiting for their robots.txt). A deferred retry counts for
        both lanes: take() of either puts it back in its host's queue."""
        heap = self._heaps[lane]
        check = CHECK if lane else 0
        while heap and (heap[0][0] != heap[0][1].heap_at or heap[0][1].flags & CHECK != check):
            heapq.heappop(heap)
        wake = heap[0][0] if heap else None
        if self._later and (wake is None or self._later[0][0] < wake):
            return self._later[0][0]
        return wake

    def _due(self, h: Host) -> float | None:
        """When the host may next be taken; None while it cannot be (nothing queued,
        paused, at its cap, its robots.txt pending)."""
        if not h.queued or h.flags & (PAUSED | STEP_PENDING):
            return None
        if h.flags & RETIRED:
            return 0.0
        x = h.x
        cap = rules.cap_of(self.policy, x.strikes if x is not None else 0, bool(h.flags & ANSWERED))
        if cap is not None and h.in_flight >= cap:
            return None
        return h.next_at if x is None else rules.due_at(h.next_at, x.backoff_until)

    def _schedule(self, h: Host) -> None:
        """Put the host in the ready heap at its due time, unless it is there earlier
        already (entries are moved later lazily, by take(), so a request's start or a
        back-off costs no push). A host that cannot be taken loses its entry."""
        at = self._due(h)
        if at is None:
            h.heap_at = -1.0
            return
        if h.heap_at < 0 or at < h.heap_at:  # a later time waits: take() moves the entry then
            h.heap_at = at
            lane = CHECKS if h.flags & CHECK else PAGES
            heapq.heappush(self._heaps[lane], (at, h))
            self.notify(at, lane)

    # -- a fetch's life -----------------------------------------------------------------
    def started(self, h: Host, now: float) -> None:
        """A request to the host goes out now: the gap counts from here."""
        at = rules.gap_after(now, h.delay, h.next_at)
        if at != h.next_at:  # (no delay: nothing to move)
            h.next_at = at
            if h.heap_at >= 0:
                self._schedule(h)

    def finished(self, h: Host) -> None:
        """One of its fetches (or its robots.txt) is over: a slot frees up."""
        if h.flags & STEP_PENDING:
            h.flags &= ~STEP_PENDING
        h.in_flight = max(0, h.in_flight - 1)
        self._schedule(h)
        self.changed(h)

    def want_probe(self, h: Host) -> None:
        """Its next turn goes to its /sitemap.xml probe (a request like any other)."""
        h.flags |= NEEDS_PROBE

    def untake(self, h: Host, item: Item) -> None:
        """A taken URL goes back to the front of its host's queue, its slot freed."""
        self.put(h, item, front=True)
        self.finished(h)

    def set_crawl_delay(self, h: Host, seconds: float, started: float) -> None:
        """robots.txt said so: its fetch was the host's request, the gap counts from it."""
        if seconds > 0 or h.x is not None:
            h.extra().crawl_delay = max(0.0, seconds)
        self.recompute(h)
        self.changed(h)
        h.next_at = max(h.next_at, started + h.delay)

    def answered(self, h: Host) -> None:
        """An HTTP response came from it (any status, robots.txt's too): it is a live server,
        so it may take its full share of connections and is retired only by --host-max-failures."""
        if not h.flags & ANSWERED:
            h.flags |= ANSWERED
            self._schedule(h)

    def succeeded(self, h: Host, started: float, latency: float) -> None:
        """A response that is not a failure: the next back-off starts small again. A
        block in force still holds (a Retry-After is a promise), and a request that
        was in flight when it began says nothing about the host since."""
        self.answered(h)
        if self.policy.delay_factor > 0:
            h.extra().adaptive = rules.adaptive_delay(self.policy, latency)
            self.recompute(h)
        x = h.x
        if x is not None and (x.failures or x.strikes) and rules.is_news(started, x.block_at):
            x.failures = x.strikes = 0
            x.why = ""

    def failed(self, h: Host, why: str, started: float, now: float, retry_after: float | None = None,
               block: bool = True, strike: bool = True) -> bool:
        """A failed request. `block`: the whole host backs off (429, 503, unreachable);
        `strike`: it counts toward retiring the host (unreachable, timeouts: a rate
        limit or a broken page does not). True when the host should now be retired.

        A request that started before the current back-off began says nothing new about
        the host: a backlog of failures must not inflate the delay or retire it."""
        x = h.extra()
        x.last_error = why
        if not rules.is_news(started, x.block_at):
            return False
        if strike:
            x.strikes += 1
        if block:
            x.failures += 1
            x.backoff_until = rules.backoff_until(self.policy, x.failures, now, x.backoff_until, retry_after,
                                                  self.jitter())
            x.block_at = now
            x.why = why
            self._schedule(h)
        self.changed(h)
        return rules.retires(self.policy, x.strikes, bool(h.flags & ANSWERED))

    def retire(self, h: Host, why: str) -> int:
        """No more requests to it; its queued URLs come due at once for their Records."""
        if h.flags & RETIRED:
            return 0
        h.flags |= RETIRED
        if why:
            h.extra().last_error = why
        self.retired += 1
        self._schedule(h)
        self.changed(h)
        return h.queued

    # -- steering -----------------------------------------------------------------------
    def pause(self, key: str) -> bool:
        h = self.host(key)
        if h.flags & PAUSED:
            return False
        h.flags |= PAUSED
        self._schedule(h)
        self.changed(h)
        return True

    def resume(self, key: str) -> int:
        h = self.hosts.get(key)
        if h is None or not h.flags & PAUSED:
            return -1
        h.flags &= ~PAUSED
        self._schedule(h)
        self.changed(h)
        return h.queued

    def paused(self) -> dict[str, int]:
        return {k: h.queued for k, h in self.hosts.items() if h.flags & PAUSED}

    def set_live_delay(self, key: str, seconds: float | None) -> Host:
        h = self.host(key)
        h.extra().live_delay = seconds
        self.recompute(h)
        self.changed(h)
        return h

    def recompute(self, h: Host) -> None:
        """The delay is the largest of its sources (politeness.py delay_of); the source is
        kept to be shown. A host without its own numbers has the crawl's delay."""
        x = h.x
        delay = self.policy.delay
        if x is not None:
            delay, x.source = rules.delay_of(self.policy, x.crawl_delay, x.adaptive, x.live_delay)
        h.next_at = rules.moved_by_delay(h.next_at, h.delay, delay)
        h.delay = delay
        self._schedule(h)

    # -- reading ------------------------------------------------------------------------
    def remove_if(self, predicate: Callable[[str], bool]) -> list[Item]:
        removed: list[Item] = []
        for h in self.hosts.values():
            if not h.queued:
                continue
            kept: list[Item] = []
            for item in h.q[h.head:]:
                (removed if predicate(item.url) else kept).append(item)
            if len(kept) != h.queued:
                h.q, h.head = kept, 0
                self._schedule(h)
        later = [e for e in self._later if not predicate(e[2].url)]
        if len(later) != len(self._later):
            removed += [e[2] for e in self._later if predicate(e[2].url)]
            self._later = later
            heapq.heapify(later)
        self.size -= len(removed)
        return removed

    def drain(self) -> list[Item]:
        items: list[Item] = []
        for h in self.hosts.values():
            items += h.q[h.head:]
            h.q, h.head, h.heap_at = [], 0, -1.0
        items += [e[2] for e in sorted(self._later)]
        for heap in self._heaps:
            heap.clear()
        self._later.clear()
        self.size = 0
        return items

    def peek(self, n: int) -> list[Item]:
        """About what pop() gives next: the hosts due soonest, taking turns; pages first."""
        out = self._peek(PAGES, n)
        return out + self._peek(CHECKS, n - len(out)) if len(out) < n else out

    def _peek(self, lane: int, n: int) -> list[Item]:
        heap = self._heaps[lane]
        check = CHECK if lane else 0
        hosts: list[Host] = []
        todo = [(heap[0][0], 0)] if heap else []  # walk the heap's top: O(n log n), not a scan
        while todo and len(hosts) < n:
            _, i = heapq.heappop(todo)
            at, h = heap[i]
            if at == h.heap_at and h.queued and h.flags & CHECK == check:
                hosts.append(h)
            for c in (2 * i + 1, 2 * i + 2):
                if c < len(heap):
                    heapq.heappush(todo, (heap[c][0], c))
        out: list[Item] = []
        for i in range(n):
            for h in hosts:
                if h.head + i < len(h.q):
                    out.append(h.q[h.head + i])
                    if len(out) == n:
                        return out
        return out

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts.values())

    def counts(self, now: float) -> dict[str, int]:
        """Hosts by state (O(hosts): the caller reads it at most once a second)."""
        out = dict.fromkeys(STATES, 0)
        for h in self.hosts.values():
            out[h.state(now)] += 1
        return out

    def saved(self, h: Host, wall_minus_mono: float) -> dict[str, Any] | None:
        """What a resumed crawl must keep of a host (None: nothing beyond defaults)."""
        d: dict[str, Any] = {}
        x = h.x
        if x is not None:
            if x.live_delay is not None:
                d["live"] = x.live_delay
            if x.crawl_delay:
                d["crawl"] = x.crawl_delay
            if x.failures or x.strikes:
                d["failures"], d["strikes"], d["why"] = x.failures, x.strikes, x.why
            if x.backoff_until:
                d["until"] = x.backoff_until + wall_minus_mono  # wall clock: monotonic restarts
            if x.over:
                d["over"] = x.over
        if h.admitted:
            d["admitted"] = h.admitted
        if h.flags & (PAUSED | RETIRED | ANSWERED):
            d["flags"] = h.flags & (PAUSED | RETIRED | ANSWERED)
        if h.done or h.errors:
            d["done"], d["errors"], d["ms"] = h.done, h.errors, round(h.total_ms, 1)
        return d or None

    def restore(self, key: str, d: dict[str, Any], wall_minus_mono: float) -> None:
        h = self.host(key)
        x = h.extra()
        x.live_delay = _num(d.get("live"))
        x.crawl_delay = _num(d.get("crawl")) or 0.0
        x.failures = int(_num(d.get("failures")) or 0)
        x.strikes = int(_num(d.get("strikes")) or 0)
        x.why = str(d.get("why") or "")[:16]
        until = _num(d.get("until"))
        if until:
            x.backoff_until = until - wall_minus_mono
        x.over = int(_num(d.get("over")) or 0)
        h.admitted = int(_num(d.get("admitted")) or 0)
        h.done, h.errors = int(_num(d.get("done")) or 0), int(_num(d.get("errors")) or 0)
        h.total_ms = _num(d.get("ms")) or 0.0
        flags = int(_num(d.get("flags")) or 0) & (PAUSED | RETIRED | ANSWERED)
        if flags & RETIRED and not h.flags & RETIRED:
            self.retired += 1
        self.over_budget += x.over
        h.flags |= flags
        self.recompute(h)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
