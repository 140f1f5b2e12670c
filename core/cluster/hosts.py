"""The Redis store's `hosts`: the crawler's scheduling calls, acting on the whole crawl.

Each outcome becomes a host event that rides in the next DONE batch (docs/scaling.md,
"The guarantees, and how"); see RedisHosts.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..parsing.urls import netloc_of
from ..queueing.hostkeys import key_function
from ..queueing.hosts import (
    ANSWERED,
    CHECK,
    CHECKS,
    NEEDS_PROBE,
    NEEDS_ROBOTS,
    PAGES,
    PAUSED,
    RETIRED,
    STATES,
    STEP_PENDING,
    HostRow,
)
from ..queueing.politeness import Politeness, plain_source, with_live
from .scripts import HOST_FIELDS

if TYPE_CHECKING:
    from ..queueing.item import Item

Event = tuple[str, str, float, int, int, str]  # kind, host, started (loop time), b, c, why


class Sender(Protocol):
    """What the hosts ask of their store (core/cluster/frontier.py RedisFrontier, which
    holds them: named by what it does, so the two modules do not import each other)."""

    def soon(self, within: float = ...) -> None: ...
    def requeue(self, item: Item, after: float = 0.0) -> None: ...
    def done(self, item: Item) -> None: ...
    def host_ctl(self, op: str, host: str, value: str = "") -> None: ...


class ClusterHost(HostRow):
    """One host's row for the view and the crawler: Redis's numbers, this process's flags.

    Rows come in pages with every heartbeat. The per-process flags exist because robots.txt
    is each process's first request to a host and its /sitemap.xml probe its next: each
    process keeps its own robots and sitemaps state.
    """

    __slots__ = ("key", "flags", "queued", "in_flight", "done", "errors", "total_ms", "delay", "source",
                 "failures", "strikes", "why", "over", "last_error", "next_at", "backoff_until", "live_delay",
                 "crawl_delay")

    def __init__(self, key: str, flags: int = 0) -> None:
        self.key = key
        self.flags = flags
        self.queued = self.in_flight = self.done = self.errors = self.failures = self.strikes = self.over = 0
        self.total_ms = self.delay = self.next_at = self.backoff_until = self.crawl_delay = 0.0
        self.source = self.why = self.last_error = ""
        self.live_delay: float | None = None


class RedisHosts:
    """Hosts as the crawler sees them, for a crawl whose hosts live in Redis.

    The same small surface as core/queueing/hosts.py's `Hosts` (`of`, `started`, `finished`,
    `succeeded`, `answered`, `failed`, `retire`, `untake`, `set_crawl_delay`, `pause`,
    `resume`, `set_live_delay`, `sort_into_lanes`, `relane`, `key`, `host`,
    `hosts`, `counts`), so core/crawler.py schedules the same way. Nothing here costs a
    round trip of its own, except steering (pause, resume, delay), which is rare.
    """

    def __init__(self, frontier: Sender) -> None:
        self._frontier = frontier
        self.policy = Politeness()
        self.hosts: dict[str, ClusterHost] = {}
        self.over_budget = 0
        self.retired = 0
        self.total = 0  # hosts in Redis, whole crawl
        self.events: list[Event] = []
        self._key: Callable[[str], str] = netloc_of
        # URL -> its host is a check host (out of scope): read by the frontier's add(), which
        # sends each new URL's lane; Redis keeps the lane of a host's first URL
        self.classify: Callable[[str], bool] = lambda url: False

    def configure(self, policy: Politeness) -> None:
        self.policy = policy
        self._key = key_function(policy.queue_by)

    def key(self, url: str) -> str:
        return self._key(url)

    def host(self, key: str) -> ClusterHost:
        h = self.hosts.get(key)
        if h is None:
            h = self.hosts[key] = ClusterHost(key, NEEDS_ROBOTS if self.policy.robots else 0)
            h.delay = self.policy.delay
        return h

    def of(self, url: str) -> ClusterHost:
        return self.host(self._key(url))

    # -- lanes: fixed in Redis when a host's first URL is queued -------------------------
    def sort_into_lanes(self, classify: Callable[[str], bool]) -> None:
        """The rule that puts a host in the checks lane (True) or the pages lane. Hosts
        already in Redis keep theirs: every process of a crawl has the same scope."""
        self.classify = classify

    def relane(self, url: str) -> None:
        """The scope grew (a seed that moved): the URL's host may be the site's now, for
        every process. An event of the next batch: rare, so it goes within GAP_FLUSH."""
        lane = CHECKS if self.classify(url) else PAGES
        self.events.append(("l", self._key(url), 0.0, lane, 0, ""))
        self._frontier.soon()

    def handed(self, key: str, delay_ms: int, lane: int = PAGES) -> ClusterHost:
        """POP gave us one of its URLs: its delay as Redis knows it, or -1: retired."""
        h = self.host(key)
        h.flags = (h.flags & ~CHECK) | (CHECK if lane == CHECKS else 0)
        if delay_ms < 0:
            h.flags |= RETIRED
        else:
            h.delay = delay_ms / 1000
            if h.flags & (NEEDS_ROBOTS | NEEDS_PROBE):  # this process's robots.txt or probe first
                h.flags |= STEP_PENDING
        return h

    # -- a fetch's life: events for the next DONE batch ---------------------------------
    def _event(self, kind: str, h: ClusterHost, started: float, b: int = 0, c: int = 0, why: str = "") -> None:
        self.events.append((kind, h.key, started, b, c, why))

    def started(self, h: ClusterHost, now: float) -> None:
        """A request went out: the host's gap counts from here, for every process. Sent
        with the next batch, or on its own within GAP_FLUSH, before the host is due again."""
        if h.delay > 0:
            self._event("g", h, now)
            self._frontier.soon(h.delay / 4)

    def finished(self, h: ClusterHost) -> None:
        """The in-flight count comes down in Redis when the URL's lease is released."""
        h.flags &= ~STEP_PENDING

    def want_probe(self, h: ClusterHost) -> None:
        """Its next URL this process takes goes to its /sitemap.xml probe first."""
        h.flags |= NEEDS_PROBE

    def untake(self, h: ClusterHost, item: Item) -> None:
        """robots.txt was the host's request: the URL goes back first in its queue."""
        self.finished(h)
        self._frontier.requeue(item)
        self._frontier.done(item)

    def set_crawl_delay(self, h: ClusterHost, seconds: float, started: float) -> None:
        h.crawl_delay = max(0.0, seconds)
        self._event("c", h, started, round(max(0.0, seconds) * 1000))

    def succeeded(self, h: ClusterHost, started: float, latency: float) -> None:
        """Redis counts it, and marks the host answered (the `s` event says as much)."""
        h.flags |= ANSWERED
        self._event("s", h, started, round(latency * 1000))

    def answered(self, h: ClusterHost) -> None:
        """An HTTP response came from it (any status, robots.txt's too): in Redis, it may take
        its full --per-host share and is retired only by --host-max-failures strikes. Once
        per host and process; the event rides the batch of the URL being finished."""
        if not h.flags & ANSWERED:
            h.flags |= ANSWERED
            self._event("a", h, 0.0)

    def failed(self, h: ClusterHost, why: str, started: float, now: float, retry_after: float | None = None,
               block: bool = True, strike: bool = True) -> bool:
        """Counted in Redis, which backs the host off (block) and retires it after
        politeness.py strike_limit() strikes in a row (scripts.py's, in Lua), for every process; so
        never True here: a retired host's URLs come out of POP flagged."""
        self._event("f", h, started, -1 if retry_after is None else round(retry_after * 1000),
                    int(block) + 2 * int(strike), why[:16])
        h.strikes += int(strike)
        h.last_error = why
        return False

    def retire(self, h: ClusterHost, why: str) -> int:
        """Retired at once, for every process (a name that does not resolve is a fact, not
        a strike): its URL in hand gets its Record now, and its queued ones come out of POP
        flagged, each for its HostRetired Record. The URLs queued as the last rows said."""
        if h.flags & RETIRED:
            return 0
        h.flags |= RETIRED
        if why:
            h.last_error = why
        self._event("r", h, 0.0, why=why[:64])
        self._frontier.soon()
        return h.queued

    def take_events(self, now: float) -> list[str | int]:
        """The buffered events as DONE's arguments: times as milliseconds ago."""
        events, self.events = self.events, []
        out: list[str | int] = []
        for kind, key, started, b, c, why in events:
            out += (kind, key, max(0, round((now - started) * 1000)), b, c, why)
        return out

    # -- steering: one call each, for the whole crawl ---------------------------------
    def pause(self, key: str) -> bool:
        h = self.host(key)
        if h.flags & PAUSED:
            return False
        h.flags |= PAUSED
        self._frontier.host_ctl("pause", key)
        return True

    def resume(self, key: str) -> int:
        h = self.hosts.get(key)
        if h is None or not h.flags & PAUSED:
            return -1
        h.flags &= ~PAUSED
        self._frontier.host_ctl("resume", key)
        return h.queued

    def paused(self) -> dict[str, int]:
        return {k: h.queued for k, h in self.hosts.items() if h.flags & PAUSED}

    def set_live_delay(self, key: str, seconds: float | None) -> ClusterHost:
        h = self.host(key)
        h.live_delay = seconds
        h.delay, h.source = with_live(h.delay, h.source, seconds)  # as HOSTCTL's recompute will say
        self._frontier.host_ctl("delay", key, "" if seconds is None else str(round(seconds * 1000)))
        return h

    # -- reading ----------------------------------------------------------------------
    def counts(self, now: float) -> dict[str, int]:
        out = dict.fromkeys(STATES, 0)
        for h in self.hosts.values():
            out[h.state(now)] += 1
        return out

    def rows(self, flat: list[bytes], redis_now: int, now: float) -> None:
        """A page of rows from BEAT: host, queued, then HOST_FIELDS."""
        width = 2 + len(HOST_FIELDS)
        default = self.policy.delay
        for i in range(0, len(flat) - width + 1, width):
            key = flat[i].decode()
            f = dict(zip(HOST_FIELDS, (v.decode() for v in flat[i + 2:i + width]), strict=False))
            h = self.host(key)
            h.queued = int(flat[i + 1])
            h.in_flight = _int(f["f"])
            h.delay = _int(f["d"]) / 1000 if f["d"] else default
            h.source = f["src"] if f["d"] else plain_source(default)
            h.failures, h.strikes, h.why, h.over = _int(f["x"]), _int(f["k"]), f["w"], _int(f["o"])
            h.next_at = now + (_int(f["n"]) - redis_now) / 1000 if f["n"] else 0.0
            h.backoff_until = now + (_int(f["u"]) - redis_now) / 1000 if f["u"] else 0.0
            local = h.flags & (NEEDS_ROBOTS | NEEDS_PROBE | STEP_PENDING | ANSWERED | RETIRED)  # ours may be ahead
            h.flags = (local | (PAUSED if f["p"] == "1" else 0) | (RETIRED if f["r"] == "1" else 0)
                       | (ANSWERED if f["an"] == "1" else 0) | (CHECK if f["l"] == "1" else 0))
            h.done, h.errors, h.total_ms = _int(f["ok"]), _int(f["er"]), float(_int(f["ms"]))
            h.last_error = f["le"]


def _int(text: str) -> int:
    try:
        return int(float(text)) if text else 0
    except ValueError:
        return 0
