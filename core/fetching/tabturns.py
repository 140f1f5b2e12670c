"""Per-host politeness for the requests a browser tab makes: each waits for its host's turn.

A worker takes a page only when the page's host is due (core/queueing/hosts.py); a tab then
asks for dozens of URLs at once, on that host and on others. Each one waits here, before it
leaves Chromium (core/fetching/tabroutes.py, the Request stage), for the same state the
crawl's scheduler keeps for its host: the gap of --delay, Crawl-delay, the adaptive delay,
a live delay or a back-off (`next_at`, `backoff_until`), and the --per-host cap (its strikes
included). Taking a turn moves the host's next-allowed time on by its delay, as the
scheduler's `take` does, so a worker and a tab never both use the same gap.

What is fair, chosen here:

- The page's own host: the page's worker holds one of its slots for the whole tab, and
  lends it to the tab, whose requests there then go at most --per-host at a time, each
  after its gap: with --per-host 1 and --delay 1, one at a time, a second apart, the first a
  second after the page's own request (a page with N requisites there takes N seconds).
- Another host: its own gap and cap, as any request to it. A host a tab reaches first has
  its robots.txt (fetched for the crawl's rules) as its first request, as a worker's would
  be: the gap and its Crawl-delay count from it.
- Bounded: a turn that would come after the first half of --page-timeout is not waited for;
  the request is refused in the tab (blocked) before it is claimed, so the URL is left to
  the crawl's ordinary path (a requisite in the page's final HTML is queued and fetched on
  its host's turn). The page is still read in time, never timed out by politeness.
- A paused or retired host's request is refused at once.
- The answer tells the host what the aiohttp path would: 429 and 503 back it off (their
  Retry-After heeded), any other status is a success (the adaptive delay learns its latency).

A turn is woken by another tab request's end, or by its due time; one held up by a slot a
worker holds (no event reaches here when a worker ends) looks again every RECHECK seconds.

On Redis (`shared`: core/cluster/frontier.py `turn`) the host's state is the crawl's, in
Redis, for every engine: a turn is one script call (scripts.py TURN) that moves the host's
next-allowed time on when it grants, so every engine's workers and tabs share one gap. A
granted turn holds a slot of the host's cap for every engine's workers and tabs until it is
given back (TURN_END, when its request ends) or, if its engine died, until --page-timeout
passed. A turn taken but unused keeps its gap spent there, and the answer's news rides the
engine's next DONE batch, as its workers' does (a 429's or 503's back-off sent at once).
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..parsing.urls import host_origin
from ..queueing import politeness as rules
from ..queueing.hosts import ANSWERED, NEEDS_ROBOTS, PAUSED, RETIRED, STEP_PENDING, Host, Hosts
from .fetch import retry_after
from .robots import Robots

RECHECK = 0.25  # seconds between two looks at a host held up by a worker's slot
TURN_SHARE = 0.5  # of --page-timeout: how long a tab's requests may wait for their hosts' turns


@runtime_checkable
class SharedHosts(Protocol):
    """Hosts whose state lives in Redis, for every engine (core/cluster/frontier.py)."""

    async def turn(self, host: str, lent: int, crawl_delay: float | None, hold: float) -> tuple[int, float, bool]:
        """(1 granted | 0 wait | -1 refused, seconds until due, under its cap); a granted one
        holds a slot of the host until `turn_end`, or `hold` seconds."""
        ...

    async def turn_end(self, host: str) -> None:
        """A granted turn's request is over: its slot back."""
        ...

    def soon(self) -> None:
        """Send the buffered host events within a moment, not with the next finished URL."""
        ...


class Turn:
    """A request's turn on its host: given back once (`Turns.done`). `key`: a turn taken in
    Redis (its host's key, to give it back there), else ''."""

    __slots__ = ("host", "started", "before", "key")

    def __init__(self, host: Host, started: float, before: float, key: str = "") -> None:
        self.host, self.started, self.before, self.key = host, started, before, key


class Turns:
    """The crawl's hosts as a tab's requests see them (`hosts` is set by the attempt that
    hands pages to the browser; None: no scheduler to ask, requests go at once)."""

    def __init__(self, max_wait: float, hold: float = 60.0) -> None:
        self.hosts: Hosts | None = None
        self.robots: Robots | None = None
        self.shared: SharedHosts | None = None  # a crawl on Redis: its hosts' state is there
        self.max_wait = max_wait  # --max-wait: the longest Retry-After agreed to
        self.hold = hold  # --page-timeout: the longest a turn taken in Redis holds its slot
        self._ends: set[asyncio.Future[None]] = set()  # turns given back to Redis, under way
        self._ended = asyncio.Event()  # a tab request's turn ended: waiters look again

    async def take(self, url: str, page: str, until: float) -> Turn | None | bool:
        """Wait for `url`'s host's turn (True: no scheduler, go; a Turn: go, then `done`; False:
        refused: paused, retired, or its turn comes after `until`, loop time)."""
        hosts = self.hosts
        if hosts is None:
            return True
        if self.shared is not None:
            return await self._take_shared(self.shared, hosts, url, page, until)
        if not isinstance(hosts, Hosts):
            return True
        h = hosts.of(url)
        lent = 1 if hosts.key(url) == hosts.key(page) else 0  # the page's own slot, lent to its tab
        clock = asyncio.get_running_loop().time
        robots = self.robots
        if h.flags & NEEDS_ROBOTS and not h.flags & STEP_PENDING and robots is not None:
            # A host a tab reaches first: its robots.txt, which the rules just fetched, was its
            # first request (as a worker's would be): the gap and its Crawl-delay count from it
            h.flags &= ~NEEDS_ROBOTS
            crawl_delay = (await robots.check(url))[1]  # known now: no request
            if host_origin(url) not in robots.unanswered:
                hosts.answered(h)
            hosts.set_crawl_delay(h, crawl_delay, clock())
        while True:
            if h.flags & (PAUSED | RETIRED):
                return False
            now = clock()
            x = h.x
            cap = rules.cap_of(hosts.policy, x.strikes if x is not None else 0, bool(h.flags & ANSWERED))
            due = h.next_at if x is None else rules.due_at(h.next_at, x.backoff_until)
            free = cap is None or h.in_flight - lent < cap
            if free and due <= now:
                turn = Turn(h, now, h.next_at)
                h.in_flight += 1
                h.next_at = now + h.delay
                return turn
            wake = due if free else max(due, now + RECHECK)
            if wake > until:
                return False
            ended = self._ended
            try:
                await asyncio.wait_for(ended.wait(), wake - now)
            except TimeoutError:
                pass

    async def _take_shared(self, shared: SharedHosts, hosts: Hosts, url: str, page: str,
                           until: float) -> Turn | bool:
        """`take` on Redis: asked of the script until it grants, refuses, or the turn would
        come after `until`."""
        key = hosts.key(url)
        lent = 1 if key == hosts.key(page) else 0
        h = hosts.of(url)
        robots = self.robots
        crawl_delay = None
        if robots is not None:  # the rules asked it already: no request (a Crawl-delay holds from here)
            crawl_delay = (await robots.check(url))[1] or None
        clock = asyncio.get_running_loop().time
        while True:
            if h.flags & (PAUSED | RETIRED):
                return False
            ended = self._ended
            granted, due_in, free = await shared.turn(key, lent, crawl_delay, self.hold)
            if granted > 0:
                return Turn(h, clock(), 0.0, key)
            if granted < 0:
                return False
            now = clock()
            wake = now + (due_in if free else max(due_in, RECHECK))
            if wake > until:
                return False
            try:
                await asyncio.wait_for(ended.wait(), wake - now)
            except TimeoutError:
                pass

    def _end_shared(self, key: str) -> None:
        """Give a turn's slot back in Redis, without holding up the request's end (if it is
        never sent, the slot is forgotten after `hold`)."""
        shared = self.shared
        if shared is None:
            return
        task = asyncio.ensure_future(shared.turn_end(key))
        self._ends.add(task)
        task.add_done_callback(_ended_quietly(self._ends))

    def unused(self, turn: Turn) -> None:
        """The turn was taken but nothing went out (the URL proved seen): its gap is not spent."""
        h = turn.host
        if turn.key:  # on Redis the gap stays spent: giving it back would cost a call
            self._free(turn)
            return
        if h.next_at == turn.started + h.delay:
            h.next_at = turn.before
        self._free(turn)

    def done(self, turn: Turn, status: int | None, retry: str | None = None) -> None:
        """The request is over (`status`: its answer's, None: no answer): the slot goes back,
        the host learns what the answer says, and waiting requests look again."""
        hosts, h = self.hosts, turn.host
        if hosts is not None and (turn.key or isinstance(hosts, Hosts)):  # on Redis: events of the next batch
            now = asyncio.get_running_loop().time()
            if status in (429, 503):
                wait = retry_after(retry, self.max_wait)
                if hosts.failed(h, str(status), turn.started, now, wait, block=True, strike=False):
                    hosts.retire(h, h.why)
                if turn.key and self.shared is not None:  # the back-off holds for the next turns at once
                    self.shared.soon()
            elif status is not None:
                hosts.succeeded(h, turn.started, now - turn.started)
        self._free(turn)

    def _free(self, turn: Turn) -> None:
        hosts, h = self.hosts, turn.host
        if turn.key:
            self._end_shared(turn.key)
        elif isinstance(hosts, Hosts):
            if h.flags & STEP_PENDING:  # a worker's robots.txt or probe: `finished` is its to call
                h.in_flight = max(0, h.in_flight - 1)
            else:
                hosts.finished(h)
        ended, self._ended = self._ended, asyncio.Event()
        ended.set()


def _ended_quietly(tasks: set[asyncio.Future[None]]) -> Callable[[asyncio.Future[None]], None]:
    """Forget a finished give-back; its failure (Redis gone at the crawl's end) is no one's
    to hear: the slot is forgotten in Redis after its hold anyway."""
    def done(task: asyncio.Future[None]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()
    return done
