"""PartedFrontier: RedisFrontier over a crawl in P partitions (--partitions, docs/scaling.md
"Partitions: one crawl over every master").

A host belongs to one partition (keys.partition_of: by its registered domain), and its
queue, state, leases, seen URLs, counts and records live under that partition's hash tag,
so the scripts of scripts.py run unchanged on one partition's keys. What spans partitions:
- a URL goes to its host's partition; a page's links are sent (ADD, one per partition)
  before the page's DONE, so a process that dies in between leaves links added and its
  page leased: the page is fetched again, its links found seen. A DONE waits only for its
  own page's links (numbered: `_deps`), and for links of no page (roots, seeds);
- POP asks the partitions that are due, owned ones first (rendezvous hashing over the live
  processes), one after the other until the waiting workers have enough; each partition's
  bell wakes the lane when one of its hosts comes due;
- nothing is finished until core/cluster/finish.py has read every partition empty twice;
- --max-pages is taken in blocks from the control slot (core/cluster/budget.py);
- a batch goes one pipeline per node (core/cluster/nodecalls.py), each tried once: the
  partitions of a node that fails (a failover, a slot moving) are set aside for AWAY
  seconds, their calls kept for later, and the rest of the crawl goes on.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import AskError, RedisClusterException, RedisError

from ..errors import UsageError
from ..queueing.frontier import Item
from ..queueing.hosts import PAGES
from . import partscripts, scripts
from .bell import listen_all
from .budget import Budget
from .finish import State, finished
from .frontier import (
    IGNORES,
    LEASE,
    LINK,
    MAX_DONE,
    MAX_DONE_ARGS,
    MAX_POP,
    MAX_SLEEP,
    Op,
    RedisFrontier,
    _Lane,
    _op_size,
)
from .hosts import Event
from .keys import Keys, decode_item, encode_item, partition_of, partitions, split_member
from .link import OUTAGE, node_of, why
from .nodecalls import Call, NodeClients, by_node, is_outage, node_name
from .seen import fingerprint

SWEEP = 2.0  # every partition is asked again at least this often, bell or not
FINISH_EVERY = 0.2  # seconds between two finish checks of an idle process
AWAY = 1.0  # seconds a partition whose node failed is left alone before it is tried again
AWAY_MAX = 8.0  # doubling while the node stays away, up to this
MOVED_WAIT = 0.2  # seconds a partition whose slot moved waits (its node's others go on)
NODE_WAIT = 3.0  # seconds a node may take to answer a batch before its partitions are set aside
NEVER = float("inf")


@dataclass(slots=True)
class _Done:
    """A finished URL's DONE, waiting to go."""
    op: Op
    part: int  # its partition
    deps: dict[int, int]  # partition -> number of the last link its page (or no page) added there
    num: int  # ops made before it and it

# script, partition, its args (made when it goes: --max-pages' share is read then), and the
# links it may add to the seen set (None: a script that adds none, whose reply does not say)
Lazy = tuple[AsyncScript, int, Callable[[], list[Any]], int | None]


class PartedFrontier(RedisFrontier):
    """The frontier of a crawl in several partitions; `keys` are the crawl's control keys."""

    def __init__(self, client: aioredis.Redis, keys: Keys, proc: str, *, parts: int, lease: float = LEASE,
                 max_pages: int | None = None) -> None:
        super().__init__(client, keys, proc, lease=lease, max_pages=max_pages)
        self.parts = partitions(keys.name, parts)
        self.nodes = NodeClients(client)
        self._pend: dict[int, list[bytes | str | int]] = {}  # partition -> fp, host, lane, item, ...
        self._first: dict[int, int] = {}  # partition -> number of the first link in _pend
        self._flying: dict[int, int] = {}  # partition -> number of the first link of an ADD on its way
        self._links = 0  # links added, ever: numbers them
        self._sending = asyncio.Lock()  # one _send_pend at a time
        self._news = asyncio.Event()  # an op was queued or links reached Redis: a waiting sender looks again
        self._queue: deque[_Done] = deque()
        self._deps: dict[str, dict[int, int]] = {}  # a page not done yet -> its links' partitions, last number
        self._orphans: dict[int, int] = {}  # the same for links of no page at work here
        self._in_flight: set[int] = set()  # the ops of the DONEs on their way
        self._sizes, self._seens = [0] * parts, [0] * parts
        self._wakes: tuple[dict[int, float], dict[int, float]] = ({}, {})  # lane -> part -> due (monotonic; -1 none)
        self._rung: dict[int, int] = {}  # partition -> rings heard from it (_changed)
        self._swept = [0.0, 0.0]  # when each lane last asked every partition
        self._checked = 0.0
        self._away: dict[int, float] = {}  # partition -> when to try its node again (monotonic)
        self._where: dict[int, str] = {}  # partition -> its node and what failed, while away
        self._node_of: dict[int, str] = {}  # partition -> the node that last answered for it
        self._backoff: dict[str, float] = {}  # node -> how long its partitions are left alone now
        self._node_until: dict[str, float] = {}  # node -> until when (monotonic)
        self.live: list[str] = [proc]  # live processes, as the last beat read them
        self._owned: set[int] = set(range(parts))
        self._empty = self.script(partscripts.EMPTY)
        self._finish = self.script(partscripts.FINISHED)
        self.pbeat, self.giveback = self.script(partscripts.PBEAT), self.script(partscripts.GIVEBACK)
        self._records_script = self.script(partscripts.RECORDS)
        self.ctlbeat, self.depart = self.script(partscripts.CTLBEAT), self.script(partscripts.DEPART)
        self._turn, self._turn_end = self.script(scripts.TURN), self.script(scripts.TURN_END)
        self.budget = Budget(self.link, self.script(partscripts.GRANT), keys.meta, self.max_pages)
        self.row_part = self.row_cursor = 0  # the partition (and where in it) the next beat reads host rows

    async def close(self) -> None:
        await self.nodes.aclose()
        await super().close()

    # -- keys and arguments --------------------------------------------------------------
    def part_of(self, host_key: str) -> int:
        return partition_of(host_key, len(self.parts))

    def pkeys(self, p: int, *extra: str) -> list[str]:
        """std_keys of partition p."""
        k = self.parts[p]
        return [k.meta, k.count, k.ready, k.later, k.leases, k.owner, k.held(self.proc), k.seen, k.rec, k.hosts,
                k.idle, k.checks, k.idle_checks, *extra]

    def std_keys(self, *extra: str) -> list[str]:
        raise AssertionError("a partitioned crawl's scripts run on a partition's keys (pkeys)")

    def std_args(self, *extra: Any, now_ms: int | None = None) -> list[Any]:
        args = super().std_args(*extra, now_ms=now_ms)
        args[10] = self.budget.cap()
        return args

    def _totals_of(self, p: int, size: Any, seen: Any) -> None:
        self._sizes[p], self._seens[p] = int(size), int(seen)
        self._size, self._seen = sum(self._sizes), sum(self._seens)

    def _changed(self, p: int, wakes_ms: Sequence[Any], rung: int) -> None:
        """Our own ADD or DONE changed partition p (links, a URL given back or waiting out
        a back-off, a host freed): its reply says when each lane's first host there comes
        due (ms; -1: none could), so each lane asks it then, without a probe (the bell
        covers what other processes change). A ring that came while the call was on its way
        (`rung`: the count before it) may be newer: then the due time only moves sooner."""
        now, newer = time.monotonic(), self._rung.get(p, 0) != rung
        if len(wakes_ms) != len(self._wakes):  # (not a partition's reply: ask it again)
            for wakes in self._wakes:
                wakes.pop(p, None)
            return
        for w, wakes, ms in zip(self._lanes, self._wakes, wakes_ms, strict=True):
            due = now + int(ms) / 1000 if int(ms) >= 0 else -1.0
            if newer and p not in wakes:
                continue  # rung: asked again anyway
            if newer and 0 <= wakes[p] and (due < 0 or wakes[p] <= due):
                continue
            wakes[p] = due
            if 0 <= due and (w.wake_at is None or due < w.wake_at):
                w.poke.set()  # sooner than the lane sleeps for

    def owner_of(self, p: int) -> str:
        """Rendezvous hashing: the live process with the highest hash for p owns it."""
        return max(self.live, key=lambda proc: zlib.crc32(f"{proc}/{p}".encode()))

    def set_live(self, procs: Sequence[str]) -> None:
        live = sorted(set(procs) | {self.proc})
        if live != self.live:
            self.live = live
            self._owned = {p for p in range(len(self.parts)) if self.owner_of(p) == self.proc}

    # -- partitions whose node fails -------------------------------------------------------
    def is_away(self, p: int, now: float | None = None) -> bool:
        return self._away.get(p, 0.0) > (time.monotonic() if now is None else now)

    def _failed(self, p: int, exc: BaseException) -> None:
        """An outage of partition p's node: leave it, and every partition last seen on the
        same node, alone for a while (AWAY seconds, doubling to AWAY_MAX while the node stays
        away): a dead node costs one try a while, not one per partition. Its name is the
        failure's, or where its slot was the last time it was known (while redis-py reads
        the cluster's map again, it knows no node for it)."""
        node = node_of(exc) or self._node_of.get(p) or node_name(self.redis, self.parts[p].meta)
        now, where = time.monotonic(), f"{node if node not in ('', '?') else 'a node'} {why(exc)}"
        if isinstance(exc, AskError):  # MOVED or ASK: p's slot, not its node; the map is read again
            self._away[p], self._where[p] = max(now + MOVED_WAIT, self._away.get(p, 0.0)), where
            return
        if self._node_until.get(node, 0.0) <= now:  # once per failure of the node, not per partition
            self._backoff[node] = min(AWAY_MAX, self._backoff.get(node, AWAY / 2) * 2)
            self._node_until[node] = now + self._backoff[node]
        until = self._node_until[node]
        for q in [p, *(q for q, n in self._node_of.items() if n == node and node not in ("", "?"))]:
            self._away[q], self._where[q] = max(until, self._away.get(q, 0.0)), where
        self._node_of.setdefault(p, node)

    def _answered(self, p: int) -> None:
        if self._away.pop(p, None) is not None or p not in self._node_of:
            self._node_of[p] = node_name(self.redis, self.parts[p].meta)  # (moved, after a failover)
            self._backoff.pop(self._node_of[p], None)
        self._where.pop(p, None)

    def away_text(self) -> str:
        """The status line's words while partitions wait for their node ("" when none do)."""
        if not self._away:
            return ""
        n = len(self._away)
        where = Counter(self._where.values()).most_common(1)[0][0]  # the node most of them wait for
        return f"REDIS PARTLY DOWN: {n} partition{'s' if n != 1 else ''} waiting ({where})"

    async def calls(self, lazy: Sequence[Lazy], keys: Callable[[int], list[str]] | None = None) -> list[Any]:
        """Each call's reply, or the outage that stopped it (its partition is set aside).
        One pipeline per node (`keys`: a partition's KEYS, else pkeys); under --max-pages,
        the calls that add links go one after the other, each with all this process holds
        of it reserved, what it did not add given back when it answers (a call that may
        have run without an answer keeps its share: never counted twice). A failure that is
        no outage (a script error, a refused password) is fatal, as Link.call makes it."""
        keys = keys or self.pkeys
        if not self.max_pages or all(need is None for *_x, need in lazy):
            calls = [(script, keys(p), args()) for script, p, args, _n in lazy]
            return await self._by_node(calls, [p for _s, p, _a, _n in lazy])
        out: list[Any] = []
        for script, p, args, need in lazy:
            built = args()
            if need is None:
                (reply,) = await self._by_node([(script, keys(p), built)], [p])
            else:
                async with self.budget.lock:  # one call adding links at a time: no two share a reserve
                    held = await self.budget.reserve(need)
                    built[10] = held if held > 0 else -1  # MAXPAGES (std_args)
                    (reply,) = await self._by_node([(script, keys(p), built)], [p])
                    if not isinstance(reply, BaseException):
                        self.budget.allow += max(0, held - int(reply[3]))  # ADD's TAKEN: what it added
                    await self.budget.give_back()
            out.append(reply)
        return out

    async def _by_node(self, calls: list[Call], parts: list[int]) -> list[Any]:
        replies, nodes = await by_node(self.nodes, calls, min(NODE_WAIT, self.link.timeout))
        self.link.round_trips += nodes
        for p, reply in zip(parts, replies, strict=True):
            if not isinstance(reply, BaseException):
                self._answered(p)
            elif is_outage(reply):
                self._failed(p, reply)
            else:
                raise self.link._fatal(reply if isinstance(reply, Exception) else RuntimeError(str(reply)))
        return replies

    # -- adding ---------------------------------------------------------------------------
    def add(self, item: Item) -> bool:
        url = item.url
        if not self._remember(url):
            return False
        hosts = self.hosts
        key = hosts.key(url)
        p = self.part_of(key)
        self._links += 1
        if p not in self._pend:
            self._first[p] = self._links
        self._pend.setdefault(p, []).extend((fingerprint(url), key, int(hosts.classify(url)), encode_item(item)))
        # the DONE of the page that found it waits for it (core/cluster/finish.py says why); a
        # link of no page at work here (a root, a seed, a sitemap's, what a tab's stylesheet
        # named) holds every DONE queued after it
        owner = self._deps.setdefault(item.via, {}) if item.via in self._raw else self._orphans
        owner[p] = self._links
        if self._add_soon is None:
            self._add_soon = asyncio.get_running_loop().call_later(0.05, self._flush_adds)
        return True

    def _take_pending(self) -> list[bytes | str | int]:
        return []  # links wait per partition in _pend, never in the base's flat list

    def _flush_adds(self) -> None:
        self._add_soon = None
        if self._pend:
            self._adding = self.background(self._send_pend())

    async def _send_pend(self) -> None:
        """Every link waiting here to its partition, one ADD each, the partitions of a node
        that is away left for later."""
        async with self._sending:
            if self._add_soon is not None:
                self._add_soon.cancel()
                self._add_soon = None
            now = time.monotonic()
            ready = {p: links for p, links in self._pend.items() if not self.is_away(p, now)}
            if not ready:
                return
            for p in ready:
                del self._pend[p]
                self._flying[p] = self._first.pop(p)
            replies: list[Any] = []
            rung = {p: self._rung.get(p, 0) for p in ready}
            try:
                replies = await self.calls([(self._add, p, partial(self.std_args, *links), len(links) // LINK)
                                            for p, links in ready.items()])
            finally:  # (a fatal error too: nothing is left counted as on its way)
                for i, (p, links) in enumerate(ready.items()):
                    first = self._flying.pop(p)
                    reply = replies[i] if replies else None
                    if reply is None or isinstance(reply, BaseException):  # back in front, as they were
                        self._pend[p] = links + self._pend.get(p, [])
                        self._first[p] = min(first, self._first.get(p, first))
                    else:
                        self._totals_of(p, reply[1], reply[2])
                        self._changed(p, reply[4:], rung[p])
                if not self._pend and not self._flying:
                    self._deps.clear()  # every link is in Redis: no DONE waits for one
                    self._orphans.clear()
                self._news.set()  # an op may go now

    async def _send_adds(self, pending: list[bytes | str | int]) -> None:
        await self._send_pend()

    async def _adds_sent(self) -> None:
        """Every link added and every op queued before this call is in Redis (or waits for
        a node that is away, and then this waits with it)."""
        target, last = self._ops_made, self._links
        async with self._popping:
            pass
        await self._send_pend()

        def waiting() -> bool:  # (what waits for a node that is away is not waited for)
            now = time.monotonic()
            unsent = [n for q, n in [*self._first.items(), *self._flying.items()] if not self.is_away(q, now)]
            return (min(unsent, default=NEVER) <= last or any(n <= target for n in self._in_flight)
                    or any(d.num <= target and not self.is_away(d.part, now) for d in self._queue))
        while waiting():
            self._kick_sender()
            sender = self._sender
            assert sender is not None
            await asyncio.shield(sender)

    async def _ops_sent(self) -> None:
        while self._queue or self.hosts.events or (self._sender is not None and not self._sender.done()):
            self._kick_sender()
            sender = self._sender
            assert sender is not None
            await asyncio.shield(sender)

    async def flush(self) -> None:
        await self._send_pend()
        await self._ops_sent()

    # -- finishing URLs -------------------------------------------------------------------
    def done(self, item: Item) -> None:
        raw = self._raw.pop(item.url, None)
        if raw is None:
            return
        back = self._back.pop(item.url, None)
        record, err = ("", False) if back is not None else self._records.pop(item.url, ("", False))
        if not record and back is None:
            back = (item, 0.0)
        p = self.part_of(split_member(raw)[0])
        # every link goes by ADD, none rides in a DONE: a DONE waits only for its own page's
        # links, so a node that is away holds up only the pages that linked there
        op: Op = (raw, item.url, record, encode_item(back[0]) if back is not None else "",
                  round(back[1] * 1000) if back is not None else 0, int(err), [])
        deps = self._deps.pop(item.url, {})
        for q, n in self._orphans.items():
            deps[q] = max(n, deps.get(q, 0))
        self._ops_made += 1
        self._queue.append(_Done(op, p, deps, self._ops_made))
        self._ops_args += _op_size(op)
        self._news.set()
        self._kick_sender()

    def _batch(self) -> list[_Done]:
        """Ops that may go now, in order: their partition's node not away, and every link
        their page added in Redis (none waiting here, _pend, or on its way, _flying)."""
        now = time.monotonic()

        def sent(q: int, n: int) -> bool:
            return n < min(self._first.get(q, NEVER), self._flying.get(q, NEVER))

        batch: list[_Done] = []
        rest: deque[_Done] = deque()
        size = 0
        while self._queue:
            d = self._queue.popleft()
            if (len(batch) < MAX_DONE and size < MAX_DONE_ARGS and not self.is_away(d.part, now)
                    and all(sent(q, n) for q, n in d.deps.items())):
                batch.append(d)
                size += _op_size(d.op)
            else:
                rest.append(d)
        self._queue = rest
        self._ops_args -= size
        return batch

    def _events(self) -> dict[int, list[Any]]:
        """The hosts' events by partition (core/cluster/hosts.py), those of partitions away
        left for later."""
        now = time.monotonic()
        mine: list[Event] = []
        later: list[Event] = []
        for e in self.hosts.events:
            (later if self.is_away(self.part_of(e[1]), now) else mine).append(e)
        self.hosts.events = mine
        flat = self.hosts.take_events(asyncio.get_running_loop().time())
        self.hosts.events = later + self.hosts.events
        by: dict[int, list[Any]] = {}
        for i, e in zip(range(0, len(flat), 6), mine, strict=True):
            by.setdefault(self.part_of(e[1]), []).append((e, flat[i:i + 6]))
        return by

    async def _send_loop(self) -> None:
        while self._queue or self.hosts.events or self._claimed or self._pend:
            await self._send_pend()  # links to other partitions before the DONEs of their pages
            if self._claimed:  # before the DONE of the page that loaded them
                await self._send_claimed()
            batch, events = self._batch(), self._events()
            parts = sorted({d.part for d in batch} | set(events))
            if not parts:
                if self._queue or self._pend or self.hosts.events or self._claimed:
                    # waiting for a node, or for links on their way: until it may be back, or news
                    back = min([*self._away.values(), time.monotonic() + AWAY]) - time.monotonic()
                    self._news.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(max(0.01, back)):
                            await self._news.wait()
                continue
            await self._send_batch(batch, events, parts)

    async def _send_batch(self, batch: list[_Done], events: dict[int, list[Any]], parts: list[int]) -> None:
        """One DONE per partition, one pipeline per node; a failed partition's ops and
        events go back, first, in order."""
        ops_of: dict[int, list[_Done]] = {}
        for d in batch:
            ops_of.setdefault(d.part, []).append(d)
        lazy: list[Lazy] = []
        for p in parts:
            ev = [x for _e, flat in events.get(p, []) for x in flat]
            args: list[Any] = [len(ev) // 6, *ev]
            for d in ops_of.get(p, []):
                member, url, record, back, after, err, links = d.op
                args += (member, url, record, back, after, err, len(links) // LINK, *links)
            lazy.append((self._done, p, partial(self.std_args, *args), None))  # (its links went by ADD)
        self._in_flight = {d.num for d in batch}
        rung = {p: self._rung.get(p, 0) for p in parts}
        try:
            replies = await self.calls(lazy)
        except UsageError:  # fatal: on_error stopped the crawl; nobody waits for these
            self._ops_gone += len(batch)
            raise
        finally:
            self._in_flight = set()
        for p, reply in zip(parts, replies, strict=True):
            mine = ops_of.get(p, [])
            if isinstance(reply, BaseException):  # its node failed: again later, in order
                self._queue.extendleft(reversed(mine))
                self._ops_args += sum(_op_size(d.op) for d in mine)
                self.hosts.events[:0] = [e for e, _flat in events.get(p, [])]
                continue
            self._totals_of(p, reply[3], reply[4])
            self._changed(p, reply[6:], rung[p])
            self._ops_gone += len(mine)

    async def _send_claimed(self) -> None:
        """The Records of URLs our tabs claimed, each in its partition's stream (RECORDS,
        one pipeline per node); a partition whose node fails keeps its own for later, and
        the others are never written twice."""
        by: dict[int, list[str]] = {}
        keep: list[tuple[str, str]] = []
        now = time.monotonic()
        for url, data in self._claimed:
            p = self.part_of(self.hosts.key(url))
            if self.is_away(p, now):
                keep.append((url, data))  # its node is away: later, not a wait in every batch
            else:
                by.setdefault(p, []).extend((url, data))
        self._claimed = keep
        if not by:
            return
        lazy: list[Lazy] = [(self._records_script, p, partial(list, [self.proc, *pairs]), None)
                            for p, pairs in by.items()]
        replies = await self.calls(lazy, keys=lambda p: [self.parts[p].rec, self.parts[p].count])
        for (_p, pairs), reply in zip(by.items(), replies, strict=True):
            if isinstance(reply, BaseException):
                self._claimed[:0] = list(zip(pairs[::2], pairs[1::2], strict=True))

    # -- one host, one URL ----------------------------------------------------------------
    def host_ctl(self, op: str, host: str, value: str = "") -> None:
        p = self.part_of(host)
        keys = self.pkeys(p, self.parts[p].hq(host), self.parts[p].h(host))
        args = self.std_args(op, host, value)
        self.background(self.link.call(lambda: self._hostctl(keys, args)))

    async def turn(self, host: str, lent: int, crawl_delay: float | None, hold: float) -> tuple[int, float, bool]:
        args = self.std_args(host, lent, "" if crawl_delay is None else round(crawl_delay * 1000), round(hold * 1000))
        keys = self.pkeys(self.part_of(host))
        got = await self.link.call(lambda: self._turn(keys, args))
        return int(got[0]), int(got[1]) / 1000, bool(int(got[2]))

    async def turn_end(self, host: str) -> None:
        keys, args = self.pkeys(self.part_of(host)), self.std_args(host)
        await self.link.call(lambda: self._turn_end(keys, args))

    def _seen_keys_of(self, url: str) -> list[str]:
        k = self.parts[self.part_of(self.hosts.key(url))]
        return [k.meta, k.count, k.seen]

    async def lookup(self, url: str) -> bool:
        if hash(url) in self._known:
            return True
        keys, fp = self._seen_keys_of(url), fingerprint(url)
        return bool(await self.link.call(lambda: self._seen_has(keys, [fp])))

    async def _seen_add(self, url: str, cap: int = 0) -> int:
        """As the base's; a cap means this process's share of --max-pages here (one URL of
        it reserved for the call)."""
        keys, fp = self._seen_keys_of(url), fingerprint(url)
        if not (cap and self.max_pages):
            return int((await self.link.call(lambda: self._seen_add_script(keys, [0, fp])))[0])
        async with self.budget.lock:
            held = await self.budget.reserve(1)
            got = int((await self.link.call(lambda: self._seen_add_script(keys, [held or -1, fp])))[0])
            self.budget.allow += max(0, held - (1 if got == 1 else 0))
        return got

    async def remove_matching(self, predicate: Callable[[str], bool]) -> list[Item]:
        await self._adds_sent()
        removed: list[Item] = []
        for p, k in enumerate(self.parts):
            for match in await self._matches(predicate, k):
                keys, args = self.pkeys(p), self.std_args(self.lease_ms, *match)
                for member in await self.link.call(partial(self._remove, keys, args)):
                    member = member.decode()
                    item = decode_item(split_member(member)[1])
                    self._raw[item.url] = member
                    removed.append(item)
        return removed

    # -- popping --------------------------------------------------------------------------
    def _due(self, lane: int, now: float) -> list[int]:
        """The partitions to ask, owned ones first, then the soonest due: those never asked,
        rung, or due by now; every one when the lane's last sweep is SWEEP seconds old;
        none whose node is away."""
        wakes = self._wakes[lane]
        if now - self._swept[lane] >= SWEEP:
            self._swept[lane] = now
            wakes.clear()
        due = [p for p in range(len(self.parts)) if 0 <= wakes.get(p, 0.0) <= now and not self.is_away(p, now)]
        return sorted(due, key=lambda p: (p not in self._owned, wakes.get(p, 0.0)))

    async def _pop_loop(self, w: _Lane) -> None:
        idle = 0.01
        while True:
            if not await self._still_wanted(w):
                return
            try:
                got = await self._pop_round(w)
                if not got and not self._raw and self._size == 0 and not self.finished.is_set():
                    await self._finish_check()
            except UsageError:
                return
            if got:
                idle = 0.01
                continue
            now = time.monotonic()
            # when a partition comes due, or one set aside may be asked again (none past: a
            # partition whose node is away is not due, and a loop that never sleeps would
            # hold up every other task of the process)
            wakes = [t for p, t in self._wakes[w.lane].items() if t > now and not self.is_away(p, now)]
            wakes += [t for t in self._away.values() if t > now]
            w.wake_at = min(wakes) if wakes else None
            if wakes:
                sleep, idle = min(min(wakes) - now, MAX_SLEEP), 0.01
            else:
                sleep, idle = idle, min(idle * 2, 0.2 if w.lane == PAGES else MAX_SLEEP)
            sleep = max(0.005, min(sleep, self._swept[w.lane] + SWEEP - now))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(sleep):
                    await w.poke.wait()

    async def _pop_round(self, w: _Lane) -> int:
        """One POP per due partition, in order, until the lane's waiting workers have enough."""
        async with self._popping:
            await self._send_pend()  # our links are there before any partition looks empty
            want = min(len(w.waiters), MAX_POP)
            got = 0
            await self._probe(w.lane)
            for p in self._due(w.lane, time.monotonic()):
                if got >= want:
                    break
                (reply,) = await self.calls([(self._pop, p, partial(self.std_args, want - got, self.lease_ms, w.lane),
                                              None)])
                if isinstance(reply, BaseException):
                    continue  # its node is away: the others go on
                out, delays, _status, _new, size, seen, wake, _taken = reply
                self._totals_of(p, size, seen)
                wake = int(wake)
                # a partition that gave URLs is asked again at once, as one partition is: its
                # empty POP then leaves this process's idle mark there, for its bell
                self._wakes[w.lane][p] = time.monotonic() if out else -1.0 if wake < 0 else \
                    time.monotonic() + wake / 1000
                self._take(w, out, delays)
                got += len(out)
            return got

    async def _probe(self, lane: int) -> None:
        """Partitions whose next due time is not known (never asked, swept, rung) are asked
        all at once, a POP of none each (one pipeline per node): it reaps, brings due
        retries back, says when its first host comes due, and leaves this process's idle
        mark there, so its bell rings for us. Only those due get a real POP."""
        wakes, now = self._wakes[lane], time.monotonic()
        unknown = [p for p in self._due(lane, now) if p not in wakes]
        if len(unknown) < 2:
            return
        lazy: list[Lazy] = [(self._pop, p, partial(self.std_args, 0, self.lease_ms, lane), None) for p in unknown]
        for p, reply in zip(unknown, await self.calls(lazy), strict=True):
            if not isinstance(reply, BaseException):
                _out, _delays, _status, _new, size, seen, wake, _taken = reply
                self._totals_of(p, size, seen)
                wakes[p] = -1.0 if int(wake) < 0 else now + int(wake) / 1000

    async def _finish_check(self) -> None:
        """Every partition empty twice over, nothing changed between: the crawl is finished
        (core/cluster/finish.py); the control meta says so for every process. Not while a
        partition's node is away, nor while anything of ours is unsent."""
        now = time.monotonic()
        if now - self._checked < FINISH_EVERY or self._away:
            return
        self._checked = now
        await self._send_pend()
        if self._pend or self._queue or not await finished(self._pass):
            return
        status = await self.link.call(lambda: self._finish([self.keys.meta], []))
        self._status(status)

    async def _pass(self) -> State:
        """Every partition's (queued, leased, changes); a node that fails spoils the pass."""
        calls: list[Call] = [(self._empty, [k.count, k.leases], []) for k in self.parts]
        replies = await self._by_node(calls, list(range(len(self.parts))))
        if any(isinstance(x, BaseException) for x in replies):
            return [(1, 0, 0)]  # not empty: no verdict while a partition cannot be read
        return [(int(q), int(n), int(c)) for q, n, c in replies]

    # -- the bell ------------------------------------------------------------------------
    async def _listen(self) -> None:
        """Every partition's bell and the control one (IGNORES). A partition's ring makes it
        due again for the lane it names ("LANE": asked at once, probed first; "LANE:MS": by
        then, _sooner)."""
        channels = [k.bell for k in self.parts] + [self.keys.bell]
        part_of = {k.bell.encode(): p for p, k in enumerate(self.parts)}
        while not self.link.closed:
            try:
                async with contextlib.aclosing(listen_all(self.redis, channels)) as bell:
                    async for channel, data in bell:
                        if data == IGNORES:
                            if self.on_ignores is not None:
                                self.on_ignores()
                            continue
                        p = part_of.get(channel)
                        if p is not None:
                            self._rung[p] = self._rung.get(p, 0) + 1
                        if p is not None and b":" in data:
                            self._sooner(p, data)
                            continue
                        for w in self._lanes:
                            if data not in (b"0", b"1") or data == b"%d" % w.lane:
                                if p is not None:
                                    self._wakes[w.lane].pop(p, None)
                                w.poke.set()
            except (RedisError, RedisClusterException, *OUTAGE):
                await asyncio.sleep(MAX_SLEEP)

    def _sooner(self, p: int, data: bytes) -> None:
        """A process (this one too) brought partition p's first due host forward
        ("LANE:MS"): it is asked by then, if that is sooner than its last reply said."""
        lane_text, _, ms_text = data.partition(b":")
        try:
            lane, due = int(lane_text), time.monotonic() + int(ms_text) / 1000
        except ValueError:
            return
        if lane not in (0, 1):
            return
        wakes = self._wakes[lane]
        if p in wakes and (wakes[p] < 0 or due < wakes[p]):  # (unknown ones are probed anyway)
            wakes[p] = due
            for w in self._lanes:
                if w.lane == lane:
                    w.poke.set()

    def held_by_part(self) -> dict[int, list[str]]:
        """The lease members this process holds, by partition (the heartbeat renews them):
        URLs at work, and finished ones whose DONE waits (for a node, or its links)."""
        out: dict[int, list[str]] = {}
        for member in self._raw.values():
            out.setdefault(self.part_of(split_member(member)[0]), []).append(member)
        for d in self._queue:
            out.setdefault(d.part, []).append(d.op[0])
        return out
