"""Steering a running crawl: live ignores, seeds, per-host pause and delay, and the queue view.

The `Crawler` holds a `Steering` (`crawler.steering`) and declares it as its steering part
(core/surface.py `Parts.steer`), so the TUI, `ctl` and tests call one surface (`Steer`), kept out
of core/crawler.py.
"""
from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .. import errors
from ..config import CrawlConfig
from ..monitor.queueview import QueueStats, QueueView
from ..monitor.stats import HostView, Stats, as_paused, host_view
from ..output.records import Record
from ..parsing.urls import canonical
from ..queueing.frontier import Frontier, Item
from ..queueing.hosts import STATES, Host, Hosts
from ..queueing.parts import Settings
from ..queueing.patterns import PatternSet
from ..queueing.scope import Scope
from .ignore_sets import NAMES, REPEATS, load, repeated_segments
from .ignores import SETTING, IgnoreResult, Ignores, IgnoreSetView, IgnoreView

SEEDS = "seeds"  # settings key: seeds added while running (their hosts join the scope)
SETS = "ignore_sets"  # settings key: the ignore sets on (a live toggle; resume keeps it)
MAX_DELAY = 3600.0
# host_table sorts: (key, descending)
HOST_SORTS: dict[str, tuple[Callable[[HostView], Any], bool]] = {
    "queued": (lambda r: (r.queued, r.in_flight, r.host), True),
    "errors": (lambda r: (r.errors, r.failures, r.host), True),
    "latency": (lambda r: (r.avg_ms, r.host), True),
    "wake": (lambda r: (r.wait, r.host), False),
    "done": (lambda r: (r.done, r.host), True),
    "host": (lambda r: r.host, False),
}
# The same orders on a Host itself (core/queueing/hosts.py), so a limited table builds few views.
HOST_KEYS: dict[str, tuple[Callable[[Host, float], Any], bool]] = {
    "queued": (lambda h, now: (h.queued, h.in_flight, h.key), True),
    "errors": (lambda h, now: (h.errors, h.strikes, h.key), True),
    "latency": (lambda h, now: (h.total_ms / h.done if h.done else 0.0, h.key), True),
    "wake": (lambda h, now: (h.wake(now), h.key), False),
    "done": (lambda h, now: (h.done, h.key), True),
    "host": (lambda h, now: h.key, False),
}


@dataclass(frozen=True, slots=True)
class SeedResult:
    ok: bool
    url: str
    error: str | None = None


class Steering:
    """The crawl's steering: what it acts on is given, not reached for through `self`.
    `admit` queues a URL as the crawler does (scope, --max-pages, ignores); `emit`
    writes a Record through the crawler's sinks.

    A paused host is simply never due (core/queueing/hosts.py): its URLs wait in its queue and
    stay unfinished for `join()` (the crawl is not over while a host is paused, as with a
    global pause); a stop gives each its Cancelled record (memory) or keeps it queued (--state).
    With a frontier that has settings (core/queueing/parts.py `Settings`: the SQLite store),
    ignores and added seeds are saved there and restored by the next run (`resume`).
    """

    def __init__(self, *, frontier: Frontier, sched: Hosts, stats: Stats, scope: Scope, roots: list[str],
                 config: CrawlConfig, admit: Callable[[str, int, int, str | None, str], bool],
                 emit: Callable[[Record], None], ended: Callable[[Item], None] = lambda item: None) -> None:
        self.frontier, self._sched, self.stats, self.scope = frontier, sched, stats, scope
        self.roots, self.config, self._admit, self._emit = roots, config, admit, emit
        # an item taken off the queue for good: what it still holds (a failed tab's loads) ends too
        self._ended = ended
        self.ignore_rules = Ignores()
        self.queue_stats = QueueStats(clock=stats.clock)
        self._settings = frontier if isinstance(frontier, Settings) else None
        if self._settings is not None and isinstance(self._settings.settings, dict):
            settings = self._settings.settings
            self.ignore_rules.load(settings.get(SETTING))
            for seed in settings.get(SEEDS) or ():
                if isinstance(seed, str) and canonical(seed) == seed:
                    scope.add_root(seed)
                    sched.relane(seed)  # its host is the site's now: the pages lane
            self.ignore_rules.on_change = lambda rules: self._save(SETTING, rules)
        self.ignore_rules.sync_sets(config.ignore_sets)

    def _save(self, key: str, value: Any) -> None:
        if self._settings is not None:
            self._settings.set_setting(key, value)

    # -- ignores ---------------------------------------------------------------------
    async def add_ignore(self, pattern: str) -> IgnoreResult:
        """Check the pattern (RE2), stop later links at once, then take the matching
        queued (and parked) URLs off the queue, each with its one Ignored record."""
        reason = Ignores.check(pattern)
        if reason is not None:
            return IgnoreResult(False, pattern, reason)
        if pattern in self.ignore_rules:
            return IgnoreResult(False, pattern, f"already an ignore pattern: {pattern}")
        rule = self.ignore_rules.add(pattern)
        one = PatternSet([pattern])
        removed = await self.frontier.remove_matching(one.search)
        for item in removed:
            self.queue_stats.taken(item.url)
        for item in removed:
            record = Record(url=item.url, depth=item.depth, tries=item.tries, via=item.via, discovery=item.discovery)
            record.fail(errors.Ignored(pattern))
            self._emit(record)
            self._ended(item)
            self.frontier.done(item)
        rule.dropped += len(removed)
        self.stats.ignored += len(removed)
        self.ignore_rules.changed()
        return IgnoreResult(True, pattern, None, len(removed))

    async def set_ignore_set(self, name: str, on: bool) -> IgnoreResult:
        """Turn a curated set on (its patterns stop later links at once, then its matching
        queued URLs come off the queue, each with its Record naming the set) or off."""
        if name not in NAMES:
            return IgnoreResult(False, name, f"no ignore set {name!r}: the sets are {', '.join(NAMES)}")
        if not on:
            if not self.ignore_rules.disable_set(name):
                return IgnoreResult(False, name, f"the ignore set {name} is not on")
            self._save(SETS, self.ignore_rules.enabled_sets())
            return IgnoreResult(True, name)
        rules = self.ignore_rules.enable_set(name)
        if not rules:
            return IgnoreResult(False, name, f"the ignore set {name} is already on")
        self._save(SETS, self.ignore_rules.enabled_sets())
        mine = PatternSet([r.pattern for r in rules if r.pattern != REPEATS])
        repeats = any(r.pattern == REPEATS for r in rules)
        removed = await self.frontier.remove_matching(
            lambda url: mine.search(url) or (repeats and repeated_segments(url)))
        for item in removed:
            self.queue_stats.taken(item.url)
        for item in removed:
            rule = self.ignore_rules.match(item.url) or rules[0]
            rule.dropped += 1
            record = Record(url=item.url, depth=item.depth, tries=item.tries, via=item.via, discovery=item.discovery)
            record.fail(errors.Ignored(rule.reason()))
            self._emit(record)
            self._ended(item)
            self.frontier.done(item)
        self.stats.ignored += len(removed)
        self.ignore_rules.changed()
        return IgnoreResult(True, name, None, len(removed))

    def ignore_sets(self) -> tuple[IgnoreSetView, ...]:
        on = set(self.ignore_rules.enabled_sets())
        return tuple(IgnoreSetView(n, load(n).description, n in on, len(load(n).patterns) + load(n).repeats)
                     for n in NAMES)

    def remove_ignore(self, pattern: str) -> bool:
        """Later links matching it are admitted again (URLs it dropped stay dropped)."""
        return self.ignore_rules.remove(pattern)

    def ignores(self) -> tuple[IgnoreView, ...]:
        return self.ignore_rules.views()

    def stopped(self, url: str) -> bool:
        """An ignore matches this link (the caller asks only of links never seen): count it
        and keep it out."""
        rule = self.ignore_rules.match(url)
        if rule is None:
            return False
        rule.stopped += 1
        return True

    # -- seeds -----------------------------------------------------------------------
    def add_seed(self, url: str) -> SeedResult:
        """Queue a new root: a canonical http(s) URL, not seen, not ignored. Its host
        joins the scope, as the roots' hosts do."""
        text = url.strip()
        c = canonical(text) if text else None
        if c is None:
            return SeedResult(False, text, f"not an http(s) URL with a host: {text or '(empty)'}")
        if self.stats.state in ("STOPPING", "DONE"):
            return SeedResult(False, c, "the crawl is over")
        rule = self.ignore_rules.match(c)
        if rule is not None:
            return SeedResult(False, c, f"matches the ignore pattern {rule.pattern}")
        if self.frontier.seen(c):
            return SeedResult(False, c, "already seen by this crawl")
        self.scope.add_root(c)
        self._sched.relane(c)
        if not self._admit(c, self.config.max_redirect, 0, None, ""):
            return SeedResult(False, c, "--max-pages reached: nothing more is queued")
        if c not in self.roots:
            self.roots.append(c)
        if self._settings is not None:
            saved = list(self._settings.settings.get(SEEDS) or ())
            self._settings.set_setting(SEEDS, [*saved, c])
        return SeedResult(True, c)

    # -- hosts -----------------------------------------------------------------------
    def pause_host(self, host: str) -> bool:
        """Its URLs wait in its queue; other hosts go on (every worker, every process)."""
        host = host.strip().lower()
        return bool(host) and bool(self._sched.pause(host))

    def resume_host(self, host: str) -> int:
        """Its URLs are due again; returns how many wait."""
        return max(0, self._sched.resume(host.strip().lower()))

    def paused_hosts(self) -> dict[str, int]:
        return self._sched.paused()

    def set_host_delay(self, host: str, seconds: float) -> None:
        """A live delay for this host: the gap between two of its fetches is at least
        this (and at least --delay, Crawl-delay and its back-off: the largest wins)."""
        host = host.strip().lower()
        if not host:
            raise ValueError("no host given")
        if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and 0 <= seconds <= MAX_DELAY):
            raise ValueError(f"a delay is 0 to {MAX_DELAY:g} seconds, not {seconds!r}")
        self._sched.set_live_delay(host, float(seconds))

    def host_table(self, sort: str = "queued", state: str | None = None,
                   limit: int | None = None) -> list[HostView]:
        """The queues view and `ctl hosts`: every host's row, sorted and filtered.
        O(hosts log hosts): read on demand or at a low rate, never per page."""
        if sort not in HOST_SORTS:
            raise ValueError(f"sort by one of {', '.join(HOST_SORTS)}, not {sort!r}")
        if state is not None and state not in STATES:
            raise ValueError(f"a host state is one of {', '.join(STATES)}, not {state!r}")
        if limit is not None and limit < 0:
            raise ValueError(f"a limit is a number of rows, not {limit!r}")
        now = time.monotonic()
        paused = self.stats.state in ("PAUSED", "STOPPING")  # the whole crawl: its hosts read paused
        if limit is not None:
            # The views of the rows shown only: O(hosts) to choose, O(limit) to build.
            hosts: Iterable[Host] = self._sched.hosts.values()
            if state is not None:  # the state as shown: a paused crawl's hosts read paused
                hosts = [h for h in hosts
                         if (as_paused(h.state(now), h.in_flight) if paused else h.state(now)) == state]
            raw, reverse = HOST_KEYS[sort]
            pick = heapq.nlargest if reverse else heapq.nsmallest
            return [host_view(h.key, h, now, paused) for h in pick(limit, hosts, key=lambda h: raw(h, now))]
        rows = [host_view(k, h, now, paused) for k, h in self.stats.hosts.items()]
        if state is not None:
            rows = [r for r in rows if r.state == state]
        key, reverse = HOST_SORTS[sort]
        rows.sort(key=key, reverse=reverse)
        return rows[:limit] if limit is not None else rows

    # -- the queue view --------------------------------------------------------------
    def queue_view(self, n: int = 10) -> QueueView:
        """Next URLs, top prefixes with growth, trap flags: O(n + rows), never a queue scan."""
        head = tuple(i.url for i in self.frontier.peek(n))
        return self.queue_stats.view(self.frontier.size, head)

