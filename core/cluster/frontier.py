"""RedisFrontier: the `Frontier` of core/queueing/frontier.py, shared by every process of a crawl.

Workers don't change. What the POP and DONE scripts do is docs/scaling.md ("The guarantees,
and how"); how this process batches its calls to them is RedisFrontier's docstring.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from ..errors import UsageError
from ..output.records import Record
from ..queueing.frontier import Item
from ..queueing.hosts import CHECKS, PAGES
from . import scripts
from .bell import is_cluster, listen
from .hosts import RedisHosts
from .keys import Keys, decode_item, encode_item, split_member, text
from .link import OUTAGE, Link
from .seen import fingerprint

LEASE = 15.0  # seconds a popped URL stays ours without a heartbeat
KNOWN_MAX = 1_000_000  # URL hashes remembered locally before starting over
MAX_POP = 64
MAX_DONE = 256  # finished URLs in one DONE call: a script runs alone in Redis, keep it short
MAX_DONE_ARGS = 20_000  # and its arguments (link-heavy pages): other processes wait meanwhile
GAP_FLUSH = 0.03  # a request's start reaches Redis within this, if no DONE took it sooner
MAX_SLEEP = 1.0  # nothing due here: look again at least this often (other processes' links)
ROWS = 500  # host rows read back per heartbeat (the queues view)
IGNORES = b"ignores"  # rung on the bell: the crawl's ignores changed (core/cluster/member.py)


LINK = 4  # script arguments per link: fingerprint, host, lane, item

# lease member ("HOST ITEM"), url, record JSON ('' = give back), back, after_ms, error, links
Op = tuple[str, str, str, str, int, int, list]


def _op_size(op: Op) -> int:
    """An op's script arguments in a DONE call: member, url, record, back, after, err, n,
    then its links."""
    return 7 + len(op[6])


class _Again(Exception):
    """Run this batch once more (its script had to be loaded first)."""


class _Lane:
    """The workers of one lane (core/queueing/hosts.py PAGES, CHECKS) waiting for a URL, and
    the loop that POPs for them: a lane's POP takes only its own hosts, so a page worker is
    never handed a check, and checks piling up never delay a page."""

    __slots__ = ("lane", "waiters", "popper", "poke", "wake_at")

    def __init__(self, lane: int) -> None:
        self.lane = lane
        self.waiters: deque[asyncio.Future[Item]] = deque()
        self.popper: asyncio.Future[Any] | None = None
        self.poke = asyncio.Event()  # the bell rang for this lane: a host came due, pop again
        self.wake_at: float | None = None  # when its first host comes due (time.monotonic)


class RecordStash:
    """The frontier's Sink: a Record waits here for its URL's done(), which sends both
    in one script call, so Redis accepts it only from the lease holder. A URL this process's
    browser tab claimed (`claim`) has no lease: its Record goes to the stream on its own,
    before the DONE of the page that loaded it (core/processing.py emits it first)."""

    def __init__(self, frontier: RedisFrontier) -> None:
        self._frontier = frontier

    def write(self, record: Record) -> None:
        f = self._frontier
        if record.url in f._claims:
            f._claims.discard(record.url)
            f._claimed.append((record.url, record.to_json()))
            f._kick_sender()
            return
        f._records[record.url] = (record.to_json(), record.error is not None)

    def close(self) -> None:
        pass


class RedisFrontier:
    """The queue of a crawl in Redis, as a worker sees it.

    - add() is synchronous, so links wait in `_pending` and ride along with the done of the
      page that found them, or with the next pop, or go on their own a moment later (roots,
      seeds). A link this process already sent is answered from `_known` without asking Redis.
    - pop(lane) asks for exactly as many items as workers of that lane wait for (one script
      call for all of them), only of the lane's due hosts (nobody hoards URLs another process
      could fetch, nobody holds one for a host that must wait); when nothing is due it sleeps
      until the lane's first host will be, or until a change in Redis (ours or another
      process's) rings the lane's bell. Each lane has its own waiters and loop.
    - `hosts` (core/cluster/hosts.py) is what the crawler's scheduling path calls; its
      outcomes (latency, back-off, failures, Crawl-delay) ride in the DONE batches.
    - done() and requeue() are synchronous too: they queue an operation that one sender task
      sends, all waiting operations in one pipeline.
    - Every call survives Redis going away: `link` (core/cluster/link.py) retries it with
      backoff, `down` says so (the monitor shows REDIS DOWN), and the workers wait meanwhile.
    """

    persistent: bool = True  # a stop leaves the queue in Redis: drain() returns nothing

    def __init__(self, client: aioredis.Redis, keys: Keys, proc: str, *, lease: float = LEASE,
                 max_pages: int | None = None) -> None:
        self.redis, self.keys, self.proc, self.lease = client, keys, proc, lease
        self.max_pages = max_pages or 0  # enforced by Redis: seen never passes it, cluster-wide
        self.lease_ms = int(lease * 1000)
        self.sink = RecordStash(self)
        self.link = Link(client)  # every round trip: retries, outages, fatal errors, counts
        self.finished = asyncio.Event()  # the crawl (not just us) has nothing left
        self.status = "running"
        self._size = self._seen = 0
        self._head: list[Item] = []
        # hash(url) of every URL this process sent or marked: a page's 20-odd links cost a
        # set lookup each, and only a new one is fingerprinted (blake2b) for Redis
        self._known: set[int] = set()
        self._pending: list[bytes | str | int] = []  # fp, host, lane, item, fp, ...
        self._records: dict[str, tuple[str, bool]] = {}  # url -> (record JSON, an error)
        self._raw: dict[str, str] = {}  # url -> the exact lease member Redis gave us
        self._claims: set[str] = set()  # claimed by our tabs (claim), their Records not yet written
        self._claimed: list[tuple[str, str]] = []  # (url, record JSON) of those, for the sender
        self._back: dict[str, tuple[Item, float]] = {}  # requeued: done() gives these back instead
        self._ops: deque[Op] = deque()
        self._ops_args = 0  # their size in script arguments: pops wait while it is large
        self._ops_made = self._ops_gone = 0  # ops queued and ops sent, ever: what a wait waits for
        self.hosts = RedisHosts(self)
        self._soon: asyncio.TimerHandle | None = None
        self._lanes = (_Lane(PAGES), _Lane(CHECKS))
        # One POP at a time, and none while an ADD is on its way: Redis decides `finished`
        # in any POP, so the links this process sent before it must be there first (the
        # roots, which the first POP carries, above all)
        self._popping = asyncio.Lock()
        self._adding: asyncio.Future[Any] | None = None
        self._cursor = 0  # where the next heartbeat's page of host rows starts
        self._listener: asyncio.Future[Any] | None = None
        self._sender: asyncio.Future[Any] | None = None
        self._add_soon: asyncio.TimerHandle | None = None
        self.cluster = is_cluster(client)  # a Redis Cluster's client: the bell is sharded (bell.py)
        self._pop = self.script(scripts.POP)
        self._done = self.script(scripts.DONE)
        self._add = self.script(scripts.ADD)
        self._remove = self.script(scripts.REMOVE)
        self._hostctl = self.script(scripts.HOSTCTL)
        self._seen_add_script = self.script(scripts.SEEN_ADD)
        self._seen_has = self.script(scripts.SEEN_HAS)
        self.on_ignores: Callable[[], None] | None = None  # the bell said IGNORES (set by Member)

    @property
    def on_error(self) -> Callable[[BaseException], None] | None:
        """Set by the crawler (as for the SQLite store): Redis refusing us for good (a
        changed password, a script error) stops the crawl with that error, never a hang."""
        return self.link.on_error

    @on_error.setter
    def on_error(self, fn: Callable[[BaseException], None] | None) -> None:
        self.link.on_error = fn

    @property
    def down(self) -> bool:
        """Redis unreachable right now: calls are being retried."""
        return self.link.down

    @property
    def round_trips(self) -> int:
        return self.link.round_trips

    def script(self, text: str) -> AsyncScript:
        """A script of core/cluster/scripts.py, as this client's server wants it."""
        return self.redis.register_script(scripts.for_client(text, self.cluster))

    def std_keys(self, *extra: str) -> list[str]:
        """The KEYS every host script starts with (core/cluster/scripts.py)."""
        k = self.keys
        return [k.meta, k.count, k.ready, k.later, k.leases, k.owner, k.held(self.proc), k.seen, k.rec, k.hosts,
                k.idle, k.checks, k.idle_checks, *extra]

    def std_args(self, *extra: Any, now_ms: int | None = None) -> list[Any]:
        """The ARGV every host script starts with: who we are, the crawl's rules, and the
        time: the server's (None), or `now_ms` for the tests that hold the scripts'
        formulas against core/queueing/politeness.py with a clock of their own."""
        p = self.hosts.policy
        return [self.keys.prefix, self.proc, round(p.delay * 1000), p.per_host or 0, round(p.max_crawl_delay * 1000),
                p.delay_factor, p.max_failures, p.budget or 0, round(p.backoff * 1000), round(p.max_backoff * 1000),
                self.max_pages, int(p.one_until_answered), "" if now_ms is None else now_ms, *extra]

    # -- the Frontier interface ----------------------------------------------------
    def add(self, item: Item) -> bool:
        """Sent with the URL: its host's lane (1: checks, CHECKS), kept by Redis if the host is new."""
        url = item.url
        if not self._remember(url):
            return False
        hosts = self.hosts
        self._pending += (fingerprint(url), hosts.key(url), int(hosts.classify(url)), encode_item(item))
        if self._add_soon is None:
            self._add_soon = asyncio.get_running_loop().call_later(0.05, self._flush_adds)
        return True

    def requeue(self, item: Item, after: float = 0.0) -> None:
        """First in its host's queue at done(), or in `after` seconds (a URL's own back-off)."""
        self._back[item.url] = (item, after)

    async def pop(self, lane: int = PAGES) -> Item:
        """The next URL of a due host of the lane: the site's pages (0) or checks (1)."""
        w = self._lanes[lane]
        fut: asyncio.Future[Item] = asyncio.get_running_loop().create_future()
        w.waiters.append(fut)
        if self._listener is None:
            self._listener = self.background(self._listen())
        if w.popper is None or w.popper.done():
            w.popper = self.background(self._pop_loop(w))
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # handed an item as we were cancelled
                self.requeue(fut.result())
                self.done(fut.result())
            raise

    def done(self, item: Item) -> None:
        raw = self._raw.pop(item.url, None)
        if raw is None:
            return
        back = self._back.pop(item.url, None)
        record, err = ("", False) if back is not None else self._records.pop(item.url, ("", False))
        if not record and back is None:  # no record written for it: never drop it, put it back
            back = (item, 0.0)
        # the links found so far (this page's, at least: parse, emit and done run without a
        # pause) go with this URL's DONE, so Redis counts them as its record's new links
        links = self._take_pending()
        self._ops.append((raw, item.url, record, encode_item(back[0]) if back is not None else "",
                          round(back[1] * 1000) if back is not None else 0, int(err), links))
        self._ops_args += _op_size(self._ops[-1])
        self._ops_made += 1
        self._kick_sender()

    def soon(self, within: float = GAP_FLUSH) -> None:
        """Host events wait for the next batch, at most `within` seconds (GAP_FLUSH, or a
        quarter of a short delay: a request's start must reach Redis before its host
        comes due again)."""
        loop = asyncio.get_running_loop()
        at = loop.time() + min(within, GAP_FLUSH)
        if self._soon is not None and self._soon.when() <= at:
            return
        if self._soon is not None:
            self._soon.cancel()
        self._soon = loop.call_at(at, self._flush_soon)

    def _flush_soon(self) -> None:
        self._soon = None
        if self.hosts.events:
            self._kick_sender()

    def host_ctl(self, op: str, host: str, value: str = "") -> None:
        """Pause, resume or a live delay for one host, for the whole crawl."""
        args = self.std_args(op, host, value)

        keys = self.std_keys(self.keys.hq(host), self.keys.h(host))
        self.background(self.link.call(lambda: self._hostctl(keys, args)))

    def seen(self, url: str) -> bool:
        return hash(url) in self._known

    def split_seen(self, urls: list[str]) -> tuple[list[str], list[str]]:
        """As MemoryFrontier's: a set test in a comprehension each, not a call of seen() per
        link (4% of an engine's samples on Redis, docs/benchmarks/redis.md, "Syscalls off the
        hot path")."""
        known = self._known
        old = [u for u in urls if hash(u) in known]
        if not old:
            return urls, old
        if len(old) == len(urls):
            return [], old
        return [u for u in urls if hash(u) not in known], old

    async def lookup(self, url: str) -> bool:
        """Exact, across the cluster (a redirect's target: merge or not)."""
        if hash(url) in self._known:
            return True
        fp = fingerprint(url)
        return bool(await self.link.call(lambda: self._seen_has(self._seen_keys(), [fp])))

    async def turn(self, host: str, lent: int, crawl_delay: float | None, hold: float) -> tuple[int, float, bool]:
        """A browser tab's request's turn on `host`, in the host's state in Redis (scripts.py
        TURN): (1 granted | 0 wait | -1 refused, seconds until it is due, under its cap). A
        granted one counts against the host's cap for every engine until `turn_end`, or
        `hold` seconds at most."""
        args = self.std_args(host, lent, "" if crawl_delay is None else round(crawl_delay * 1000),
                             round(hold * 1000))
        got = await self.link.call(lambda: self.script(scripts.TURN)(self.std_keys(), args))
        return int(got[0]), int(got[1]) / 1000, bool(int(got[2]))

    async def turn_end(self, host: str) -> None:
        """A granted turn's request is over (scripts.py TURN_END)."""
        args = self.std_args(host)
        await self.link.call(lambda: self.script(scripts.TURN_END)(self.std_keys(), args))

    def _seen_keys(self) -> list[str]:
        """The KEYS of SEEN_ADD and SEEN_HAS: the seen set's one way in (core/cluster/seen.py)."""
        k = self.keys
        return [k.meta, k.count, k.seen]

    async def _seen_add(self, url: str, cap: int = 0) -> int:
        """1: `url` was new and is seen now; 0: seen already; -1: refused by `cap` (seen is full)."""
        fp = fingerprint(url)
        got = await self.link.call(lambda: self._seen_add_script(self._seen_keys(), [cap, fp]))
        return int(got[0])

    def mark_seen(self, url: str) -> bool:
        if not self._remember(url):
            return False
        self.background(self._seen_add(url))
        return True

    async def claim(self, url: str) -> bool:
        """mark_seen, exactly across the cluster: a browser tab's load is recorded from that
        tab's answer, so of two processes whose tabs load the same requisite, one only may
        have it. Adding its fingerprint to the seen set (SEEN_ADD, core/cluster/seen.py)
        answers 1 to one caller; under --max-pages it is refused once seen is full, as the
        ADD script refuses links (core/cluster/scripts.py
        add_links), so claims and links share one cap. Taken or not, it is seen from now
        on here (`_known`), unless the cap refused it: then it was never seen."""
        if hash(url) in self._known:
            return False
        got = await self._seen_add(url, self.max_pages)
        if int(got) >= 0:
            self._remember(url)
        if int(got) == 1:
            self._claims.add(url)  # its Record has no lease to ride with (RecordStash)
        return int(got) == 1

    def _remember(self, url: str) -> bool:
        """False if this process already sent `url` to Redis. A 64-bit hash: a wrong
        "already sent" has odds of n²/2⁶⁵, as for the fingerprints in Redis."""
        h = hash(url)
        if h in self._known:
            return False
        if len(self._known) >= KNOWN_MAX:
            self._known.clear()
        self._known.add(h)
        return True

    async def join(self) -> None:
        await self.finished.wait()

    def drain(self) -> list[Item]:
        return []

    async def remove_matching(self, predicate: Callable[[str], bool]) -> list[Item]:
        """Take every matching URL still queued, in its host's queue or waiting out a back-off
        of its own (`later`), as MemoryFrontier's does: the REMOVE script takes each one only
        if it is still there, and leases it to us: the caller records it and calls done().

        First, every URL this process queued before the call reaches Redis: add() said yes
        to it, so it is queued as far as the crawler knows, yet it may still be waiting here
        (`_pending`), or ride in an ADD, a POP or a DONE not answered yet; a scan of Redis
        alone would miss it and it would be fetched despite the ignore."""
        await self._adds_sent()
        removed: list[Item] = []
        for match in await self._matches(predicate):
            args = self.std_args(self.lease_ms, *match)
            got = await self.link.call(partial(self._remove, self.std_keys(), args))
            for member in got:
                member = member.decode()
                item = decode_item(split_member(member)[1])
                self._raw[item.url] = member
                removed.append(item)
        return removed

    async def _adds_sent(self) -> None:
        """Every link added and every op finished before this call is in Redis."""
        target = self._ops_made
        if self._adding is not None and not self._adding.done():
            await asyncio.shield(self._adding)
        async with self._popping:  # a POP on its way carries links too: let it land
            pass
        if self._pending:
            await self._send_adds(self._take_pending())
        while self._ops_gone < target:  # FIFO: the ops queued before the call, not every later one
            self._kick_sender()
            sender = self._sender
            assert sender is not None  # _kick_sender() just made sure of it
            await asyncio.shield(sender)

    async def _matches(self, predicate: Callable[[str], bool], keys: Keys | None = None) -> list[list[str]]:
        """(host, item) pairs, flat, of the matching URLs: first the `later` set's, a page at
        a time (read first: a POP moves a due one into its host's queue, read next, never
        back), then one list per page of hosts, their queues read in one pipeline. REMOVE
        looks for each in both places."""
        k = keys or self.keys  # (a partition's, core/cluster/parted.py)
        out: list[list[str]] = []
        later: list[str] = []
        at = 0
        while True:
            at, scores = await self.link.call(partial(self.redis.zscan, k.later, at, count=500))
            for member, _when in scores:
                h, raw = split_member(text(member))
                if predicate(decode_item(raw).url):
                    later += (h, raw)
            if not int(at):
                break
        if later:
            out.append(later)
        cursor = 0
        while True:
            cursor, found = await self.link.call(partial(self.redis.sscan, k.hosts, cursor, count=200))
            hosts = [text(h) for h in found]
            if hosts:
                def read(hosts: list[str] = hosts) -> Awaitable[list[Any]]:  # a fresh pipeline per try
                    pipe = self.redis.pipeline(transaction=False)
                    for h in hosts:
                        pipe.lrange(k.hq(h), 0, -1)
                    return pipe.execute()
                queues = await self.link.call(read)
                match: list[str] = []
                for h, raws in zip(hosts, queues, strict=True):  # one queue read per host
                    match += [x for raw in raws if predicate(decode_item(raw).url) for x in (h, text(raw))]
                if match:
                    out.append(match)
            if not int(cursor):
                return out

    def peek(self, n: int) -> list[Item]:
        return self._head[:n]

    @property
    def size(self) -> int:
        return self._size

    @property
    def seen_count(self) -> int:
        return self._seen

    def next_wake_in(self) -> float | None:
        """Seconds until the earliest host comes due, as the last POPs said (None: none)."""
        wakes = [w.wake_at for w in self._lanes if w.wake_at is not None]
        if not wakes:
            return None
        return max(0.0, min(wakes) - time.monotonic())

    # -- talking to Redis --------------------------------------------------------------
    def background(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        return self.link.background(coro)

    def held(self) -> list[str]:
        """The lease members of every URL this process knows it holds."""
        return list(self._raw.values())

    def _take_pending(self) -> list[bytes | str | int]:
        pending, self._pending = self._pending, []
        if self._add_soon is not None:
            self._add_soon.cancel()
            self._add_soon = None
        return pending

    def _flush_adds(self) -> None:
        self._add_soon = None
        if self._pending:
            pending = self._take_pending()
            self._adding = self.background(self._send_adds(pending))

    async def _send_adds(self, pending: list[bytes | str | int]) -> None:
        res = await self.link.call(lambda: self._add(self.std_keys(), self.std_args(*pending)))
        self._totals(res[1], res[2])  # new hosts due ring the bell (ADD's PUBLISH)

    def _totals(self, size: int, seen: int) -> None:
        self._size, self._seen = int(size), int(seen)

    def _status(self, status: bytes | str | None) -> None:
        status = status.decode() if isinstance(status, bytes) else (status or "running")
        self.status = status
        if status != "running":
            self.finished.set()

    async def _pop_loop(self, w: _Lane) -> None:
        """While workers of the lane wait: one POP for all of them, from the lane's hosts
        that are due. With nothing due, sleep until its first host is (as POP says), until
        the lane's bell rings (a host came due: links, a freed slot, a resume, from any
        process), or MAX_SLEEP; with nothing queued in the lane, poll at most every 200 ms
        (pages; checks: MAX_SLEEP) until the crawl is finished (decided by Redis, not by
        idleness)."""
        idle = 0.01
        while True:
            if not await self._still_wanted(w):
                return
            try:
                async with self._popping:
                    if self._adding is not None and not self._adding.done():
                        await asyncio.shield(self._adding)
                    n = min(len(w.waiters), MAX_POP)
                    args = self.std_args(n, self.lease_ms, w.lane, *self._take_pending())
                    out, delays, status, _new, size, seen, wake, _taken = await self.link.call(
                        partial(self._pop, self.std_keys(), args))
            except UsageError:  # fatal: on_error has stopped the crawl, which cancels the waiters
                return
            self._totals(size, seen)
            wake = int(wake)
            w.wake_at = None if wake < 0 else time.monotonic() + wake / 1000
            self._take(w, out, delays)
            self._status(status)
            if out:
                idle = 0.01
                continue
            if wake >= 0:
                sleep = min(wake / 1000, MAX_SLEEP)
                idle = 0.01
            else:  # the checks lane of a crawl without checks idles for good: its bell will do
                sleep, idle = idle, min(idle * 2, 0.2 if w.lane == PAGES else MAX_SLEEP)
            if sleep > 0:  # asyncio.timeout, not wait_for: that loses a cancel on 3.11 (link.py)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(sleep):
                        await w.poke.wait()

    async def _still_wanted(self, w: _Lane) -> bool:
        """Before a lane's next POP: workers still wait for it (poke cleared: a ring from here
        on counts), once the backlog of finished URLs is sent (backpressure: link-heavy pages
        finish faster than their links reach Redis; no new URL until it is, so it stays
        bounded)."""
        while self._ops_args > 2 * MAX_DONE_ARGS and self._sender is not None and not self._sender.done():
            await asyncio.shield(self._sender)
        w.waiters = deque(f for f in w.waiters if not f.done())
        w.poke.clear()
        return bool(w.waiters)

    async def _listen(self) -> None:
        """The bell (core/cluster/scripts.py): another process made a host of a lane (the
        message) due while we slept, or changed the crawl's ignores (IGNORES: `on_ignores`
        reads them at once, not at the next beat). On its own connection; lost, it is simply
        opened again (MAX_SLEEP covers; the beats, for the ignores)."""
        while not self.link.closed:
            try:  # aclosing: a cancel closes the subscription now, not when the loop collects it
                async with contextlib.aclosing(listen(self.redis, self.keys.bell)) as bell:
                    async for data in bell:
                        if data == IGNORES:
                            if self.on_ignores is not None:
                                self.on_ignores()
                            continue
                        for w in self._lanes:
                            if data not in (b"0", b"1") or data == b"%d" % w.lane:
                                w.poke.set()
            except (RedisError, RedisClusterException, *OUTAGE):
                await asyncio.sleep(MAX_SLEEP)

    def _take(self, w: _Lane, out: list[bytes], delays: list[Any]) -> None:
        """The URLs a POP leased to us, each to a waiting worker of the lane."""
        for member, delay in zip(out, delays, strict=False):
            text_member = member.decode()
            key, raw = split_member(text_member)
            item = decode_item(raw)
            self._raw[item.url] = text_member
            self.hosts.handed(key, int(delay), w.lane)
            self._hand(w, item)

    def _hand(self, w: _Lane, item: Item) -> None:
        while w.waiters:
            fut = w.waiters.popleft()
            if not fut.done():
                fut.set_result(item)
                return
        self.requeue(item)  # every waiter went away meanwhile: give it back
        self.done(item)

    def _kick_sender(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = self.background(self._send_loop())

    async def _ops_sent(self) -> None:
        """Before a pop: what we finished is in Redis, so `finished` is never decided on
        a queue our own links have not reached yet."""
        while self._ops or self.hosts.events or (self._sender is not None and not self._sender.done()):
            self._kick_sender()  # a no-op while one runs
            sender = self._sender
            assert sender is not None  # _kick_sender() just made sure of it
            await asyncio.shield(sender)

    async def _send_loop(self) -> None:
        while self._ops or self.hosts.events or self._claimed:
            if self._claimed:  # first: the DONE of the page that loaded them may be in this batch
                await self._send_claimed()
                if not self._ops and not self.hosts.events:
                    continue
            ops: list[Op] = []
            size = 0
            while self._ops and len(ops) < MAX_DONE and size < MAX_DONE_ARGS:
                ops.append(self._ops.popleft())
                size += _op_size(ops[-1])
            self._ops_args -= size
            events = self.hosts.take_events(asyncio.get_running_loop().time())
            try:
                while True:
                    try:
                        await self.link.call(partial(self._send_ops, ops, events))
                        break
                    except _Again:
                        continue
            finally:  # sent, or given up on (a fatal error): either way nobody waits for them
                self._ops_gone += len(ops)

    async def _send_claimed(self) -> None:
        """The Records of URLs our tabs claimed, in the stream as DONE puts a leased URL's
        (the claim made this process their only writer), counted with the crawl's records."""
        batch, self._claimed = self._claimed, []

        def send() -> Awaitable[Any]:  # a fresh pipeline per try
            pipe = self.redis.pipeline(transaction=False)  # (one connection: in order)
            for url, data in batch:
                pipe.xadd(self.keys.rec, {"url": url, "data": data, "new": 0, "proc": self.proc})
            pipe.hincrby(self.keys.count, "records", len(batch))
            return pipe.execute()
        await self.link.call(send)

    async def _send_ops(self, ops: list[Op], events: list[str | int]) -> None:
        """One DONE call for the host events and every op of the batch. EVALSHA by hand:
        a Script object asks SCRIPT EXISTS first, a second round trip for every batch."""
        args: list[Any] = self.std_args(len(events) // 6, *events)
        for member, url, record, back, after, err, links in ops:
            args += (member, url, record, back, after, err, len(links) // LINK, *links)
        keys = self.std_keys()
        try:
            got = await self.redis.evalsha(self._done.sha, len(keys), *keys, *args)
            _accepted, status, _rejected, size, seen, _taken = got
        except NoScriptError:  # a restarted Redis forgot it: load, then run the batch again
            await self.redis.script_load(self._done.script)
            raise _Again() from None
        self._totals(size, seen)
        self._status(status)
        # a host freed here or links due now ring the bell (DONE's PUBLISH) for every idle
        # process, this one included: no self-poke, or this process would always win the
        # race for the slot it just freed

    async def flush(self) -> None:
        """Everything added and finished so far is in Redis."""
        if self._pending:
            await self._send_adds(self._take_pending())
        await self._ops_sent()

    async def close(self) -> None:
        """Stop talking to Redis (after flush(), or giving up on it)."""
        self.link.closed = True  # first: an outage from here on is not waited out
        if self._soon is not None:
            self._soon.cancel()
        for task in (*(w.popper for w in self._lanes), self._sender, self._listener):
            if task is not None:
                task.cancel()
        await self.link.close()
