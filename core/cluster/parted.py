"""PartedFrontier: RedisFrontier over a crawl in P partitions (--partitions, docs/scaling.md
"Redis Cluster: shard by host, with hash tags").

A host belongs to one partition (keys.partition_of: by its registered domain), and its
queue, state, leases, seen URLs, counts and records live under that partition's hash tag,
so the scripts of scripts.py run unchanged on one partition's keys. What spans partitions:
- a URL goes to its host's partition; a page's links to other partitions are sent (ADD,
  one pipeline: a round trip per node) before the page's DONE, so a process that dies in
  between leaves links added and its page leased: the page is fetched again, its links
  found seen;
- POP asks the partitions that are due, owned ones first (rendezvous hashing over the live
  processes), one after the other until the waiting workers have enough; each partition's
  bell wakes the lane when one of its hosts comes due;
- nothing is finished until core/cluster/finish.py has read every partition empty twice;
- --max-pages is taken in blocks from the control slot (partscripts.GRANT): a call may add
  at most what this process holds of it to the seen set; with it, the calls of a batch go
  one after the other, so the crawl never passes N (and stops at most a block per process
  short of it, a block held where no link is left to use it).
"""
from __future__ import annotations

import asyncio
import contextlib
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from ..errors import UsageError
from ..queueing.frontier import Item
from ..queueing.hosts import PAGES
from . import partscripts, scripts
from .bell import listen_all
from .finish import State, finished
from .frontier import IGNORES, LEASE, LINK, MAX_DONE, MAX_DONE_ARGS, MAX_POP, MAX_SLEEP, RedisFrontier, _Lane, _op_size
from .keys import Keys, decode_item, encode_item, partition_of, partitions, split_member
from .link import OUTAGE
from .seen import fingerprint

BLOCK = 64  # --max-pages taken from the control slot this many URLs at a time (N / 16 for a small N)
SWEEP = 2.0  # every partition is asked again at least this often, bell or not
FINISH_EVERY = 0.2  # seconds between two finish checks of an idle process

Call = tuple[AsyncScript, list[str], list[Any]]


class PartedFrontier(RedisFrontier):
    """The frontier of a crawl in several partitions; `keys` are the crawl's control keys."""

    def __init__(self, client: aioredis.Redis, keys: Keys, proc: str, *, parts: int, lease: float = LEASE,
                 max_pages: int | None = None) -> None:
        super().__init__(client, keys, proc, lease=lease, max_pages=max_pages)
        self.parts = partitions(keys.name, parts)
        self._pend: dict[int, list[bytes | str | int]] = {}  # partition -> fp, host, lane, item, ...
        self._part_ops: deque[int] = deque()  # the partition of each op in _ops, in step
        self._sizes, self._seens = [0] * parts, [0] * parts
        self._wakes: tuple[dict[int, float], dict[int, float]] = ({}, {})  # lane -> part -> due (monotonic; -1 none)
        self._swept = [0.0, 0.0]  # when each lane last asked every partition
        self._checked = 0.0
        self._allow = 0  # what this process may still add to the seen set (--max-pages)
        self.live: list[str] = [proc]  # live processes, as the last beat read them
        self._owned: set[int] = set(range(parts))
        self._empty = self.script(partscripts.EMPTY)
        self._finish = self.script(partscripts.FINISHED)
        self._grant = self.script(partscripts.GRANT)
        self._pbeat = self.script(partscripts.PBEAT)
        self._giveback = self.script(partscripts.GIVEBACK)
        self.ctlbeat, self.depart = self.script(partscripts.CTLBEAT), self.script(partscripts.DEPART)
        self._turn, self._turn_end = self.script(scripts.TURN), self.script(scripts.TURN_END)
        self._row_part = 0  # the partition whose host rows the next beat reads
        self._row_cursor = 0

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
        args[10] = self._cap()
        return args

    def _cap(self) -> int:
        """MAXPAGES of a call: 0 no limit, -1 nothing left, else what this process holds."""
        if not self.max_pages:
            return 0
        return self._allow if self._allow > 0 else -1

    def _used(self, taken: int) -> None:
        self._allow = max(0, self._allow - taken)

    @property
    def _block(self) -> int:
        return max(1, min(BLOCK, self.max_pages // 16))

    async def _top_up(self, need: int = 1) -> None:
        """Hold enough of --max-pages for a call that may add `need` URLs (what is left of
        it, if less), taken from the control slot in blocks."""
        want = max(need, (self._block + 1) // 2) - self._allow
        if self.max_pages and want > 0:
            ask = max(want, self._block)
            got = await self.link.call(lambda: self._grant([self.keys.meta], [self.max_pages, ask]))
            self._allow += int(got)

    async def _give_back(self) -> None:
        """Keep one block: what a call took for links already seen goes back for the others."""
        extra = self._allow - self._block
        if extra > 0:
            await self.link.call(lambda: self._grant([self.keys.meta], [self.max_pages, -extra]))
            self._allow -= extra

    async def _each(self, calls: Sequence[tuple[AsyncScript, list[str], Callable[[], list[Any]], int]]) -> list[Any]:
        """Run calls whose replies end with what they added to the seen set (ADD, DONE), each
        with the links it carries: in one pipeline, or under --max-pages one after the
        other, each holding enough of what is left for its links."""
        if not self.max_pages:
            built = [(script, keys, args()) for script, keys, args, _need in calls]
            return await self.link.call(partial(self._run, built))
        out = []
        for script, keys, args, need in calls:
            await self._top_up(need)
            one = [(script, keys, args())]
            res = (await self.link.call(partial(self._run, one)))[0]
            self._used(int(res[-1]))
            await self._give_back()
            out.append(res)
        return out

    def _totals_of(self, p: int, size: Any, seen: Any) -> None:
        self._sizes[p], self._seens[p] = int(size), int(seen)
        self._size, self._seen = sum(self._sizes), sum(self._seens)

    def owner_of(self, p: int) -> str:
        """Rendezvous hashing: the live process with the highest hash for p owns it."""
        return max(self.live, key=lambda proc: zlib.crc32(f"{proc}/{p}".encode()))

    def set_live(self, procs: Sequence[str]) -> None:
        live = sorted(set(procs) | {self.proc})
        if live != self.live:
            self.live = live
            self._owned = {p for p in range(len(self.parts)) if self.owner_of(p) == self.proc}

    # -- scripts in pipelines -------------------------------------------------------------
    async def _run(self, calls: list[Call]) -> list[Any]:
        """Each call's reply, in one pipeline (a round trip per node). A script a node does
        not have (a restarted or promoted node) is loaded and only those calls run again."""
        results = await self._pipe(calls)
        again = [i for i, x in enumerate(results) if isinstance(x, NoScriptError)]
        if again:
            for script in {id(calls[i][0]): calls[i][0] for i in again}.values():
                await self.redis.script_load(script.script)
            for i, x in zip(again, await self._pipe([calls[i] for i in again]), strict=True):
                results[i] = x
        for x in results:
            if isinstance(x, Exception):
                raise x
        self.link.round_trips += self._nodes(calls) - 1  # the link counted one: a pipeline is one per node
        return results

    def _nodes(self, calls: list[Call]) -> int:
        """How many nodes a pipeline of these calls went to (one server: one)."""
        if not self.cluster:
            return 1
        rc = cast(RedisCluster, self.redis)
        return len({getattr(rc.get_node_from_key(keys[0]), "name", None) for _s, keys, _a in calls}) or 1

    async def _pipe(self, calls: list[Call]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for script, keys, args in calls:
            # (by name: redis-py's cluster pipeline blocks its evalsha method, not the command,
            # which it routes by the script's first key as it does outside a pipeline)
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        return list(await pipe.execute(raise_on_error=False))

    # -- adding ---------------------------------------------------------------------------
    def add(self, item: Item) -> bool:
        url = item.url
        if not self._remember(url):
            return False
        hosts = self.hosts
        key = hosts.key(url)
        self._pend.setdefault(self.part_of(key), []).extend(
            (fingerprint(url), key, int(hosts.classify(url)), encode_item(item)))
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
        """Every link waiting here, to its partition: one ADD per partition, one pipeline."""
        if self._adding is not None and not self._adding.done() and self._adding is not asyncio.current_task():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._adding)
        if self._add_soon is not None:
            self._add_soon.cancel()
            self._add_soon = None
        pend, self._pend = self._pend, {}
        if not pend:
            return
        res = await self._each([(self._add, self.pkeys(p), partial(self.std_args, *links), len(links) // LINK)
                                for p, links in pend.items()])
        for p, (_new, size, seen, _taken) in zip(pend, res, strict=True):
            self._totals_of(p, size, seen)

    async def _send_adds(self, pending: list[bytes | str | int]) -> None:
        await self._send_pend()

    async def _adds_sent(self) -> None:
        target = self._ops_made
        async with self._popping:
            pass
        await self._send_pend()
        while self._ops_gone < target:
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
        links = self._pend.pop(p, [])  # this partition's links ride with the DONE; others go first
        self._ops.append((raw, item.url, record, encode_item(back[0]) if back is not None else "",
                          round(back[1] * 1000) if back is not None else 0, int(err), links))
        self._part_ops.append(p)
        self._ops_args += _op_size(self._ops[-1])
        self._ops_made += 1
        self._kick_sender()

    async def _send_loop(self) -> None:
        while self._ops or self.hosts.events or self._claimed or self._pend:
            batch: dict[int, list[Any]] = {}
            events_of: dict[int, list[str | int]] = {}
            links_of: dict[int, int] = {}
            n = size = 0
            while self._ops and n < MAX_DONE and size < MAX_DONE_ARGS:
                op, p = self._ops.popleft(), self._part_ops.popleft()
                member, url, record, back, after, err, links = op
                batch.setdefault(p, []).extend((member, url, record, back, after, err, len(links) // LINK, *links))
                links_of[p] = links_of.get(p, 0) + len(links) // LINK
                n += 1
                size += _op_size(op)
            self._ops_args -= size
            events = self.hosts.take_events(asyncio.get_running_loop().time())
            for i in range(0, len(events), 6):
                events_of.setdefault(self.part_of(str(events[i + 1])), []).extend(events[i:i + 6])
            parts = sorted(set(batch) | set(events_of))
            try:
                # the batch was taken first: every link its pages found is in _pend now, and
                # goes to its partition before their DONEs
                await self._send_pend()
                if self._claimed:  # before the DONE of the page that loaded them
                    await self._send_claimed()
                if not parts:
                    continue
                calls = []
                for p in parts:
                    ev = events_of.get(p, [])
                    calls.append((self._done, self.pkeys(p),
                                  partial(self.std_args, len(ev) // 6, *ev, *batch.get(p, [])), links_of.get(p, 0)))
                res = await self._each(calls)
                for p, (_accepted, _status, _rejected, queued, seen, _taken) in zip(parts, res, strict=True):
                    self._totals_of(p, queued, seen)
            finally:
                self._ops_gone += n

    async def _send_claimed(self) -> None:
        batch, self._claimed = self._claimed, []

        def send() -> Awaitable[Any]:
            pipe = self.redis.pipeline(transaction=False)
            for url, data in batch:
                k = self.parts[self.part_of(self.hosts.key(url))]
                pipe.xadd(k.rec, {"url": url, "data": data, "new": 0, "proc": self.proc})
                pipe.hincrby(k.count, "records", 1)
            return pipe.execute()
        await self.link.call(send)

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
        """As the base's; a cap means this process's share of --max-pages here."""
        if cap:
            await self._top_up()
        keys, fp, limit = self._seen_keys_of(url), fingerprint(url), self._cap() if cap else 0
        got = int((await self.link.call(lambda: self._seen_add_script(keys, [limit, fp])))[0])
        if got == 1 and cap:
            self._used(1)
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
        rung, or due by now; every one when the lane's last sweep is SWEEP seconds old."""
        wakes = self._wakes[lane]
        if now - self._swept[lane] >= SWEEP:
            self._swept[lane] = now
            wakes.clear()
        due = [p for p in range(len(self.parts)) if 0 <= wakes.get(p, 0.0) <= now]
        return sorted(due, key=lambda p: (p not in self._owned, wakes.get(p, 0.0)))

    async def _pop_loop(self, w: _Lane) -> None:
        idle = 0.01
        while True:
            while self._ops_args > 2 * MAX_DONE_ARGS and self._sender is not None and not self._sender.done():
                await asyncio.shield(self._sender)
            w.waiters = deque(f for f in w.waiters if not f.done())
            if not w.waiters:
                return
            w.poke.clear()
            try:
                got = await self._pop_round(w)
                if not got and not self._raw and self._size == 0 and not self.finished.is_set():
                    await self._finish_check()
            except UsageError:
                return
            if got:
                idle = 0.01
                continue
            wakes = [t for t in self._wakes[w.lane].values() if t >= 0]
            now = time.monotonic()
            w.wake_at = min(wakes) if wakes else None
            if wakes:
                sleep, idle = min(max(0.0, min(wakes) - now), MAX_SLEEP), 0.01
            else:
                sleep, idle = idle, min(idle * 2, 0.2 if w.lane == PAGES else MAX_SLEEP)
            sleep = min(sleep, max(0.0, self._swept[w.lane] + SWEEP - now))
            if sleep > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(sleep):
                        await w.poke.wait()

    async def _pop_round(self, w: _Lane) -> int:
        """One POP per due partition, in order, until the lane's waiting workers have enough."""
        async with self._popping:
            await self._send_pend()  # our links are there before any partition looks empty
            want = min(len(w.waiters), MAX_POP)
            got = 0
            for p in self._due(w.lane, time.monotonic()):
                if got >= want:
                    break
                keys, args = self.pkeys(p), self.std_args(want - got, self.lease_ms, w.lane)
                out, delays, _status, _new, size, seen, wake, _taken = await self.link.call(
                    partial(self._pop, keys, args))
                self._totals_of(p, size, seen)
                wake = int(wake)
                self._wakes[w.lane][p] = -1.0 if wake < 0 else time.monotonic() + wake / 1000
                for member, delay in zip(out, delays, strict=False):
                    member = member.decode()
                    key, raw = split_member(member)
                    item = decode_item(raw)
                    self._raw[item.url] = member
                    self.hosts.handed(key, int(delay), w.lane)
                    self._hand(w, item)
                got += len(out)
            return got

    async def _finish_check(self) -> None:
        """Every partition empty twice over, nothing changed between: the crawl is finished
        (core/cluster/finish.py); the control meta says so for every process."""
        now = time.monotonic()
        if now - self._checked < FINISH_EVERY:
            return
        self._checked = now
        await self._send_pend()
        if not await finished(self._pass):
            return
        status = await self.link.call(lambda: self._finish([self.keys.meta], []))
        self._status(status)

    async def _pass(self) -> State:
        calls: list[Call] = [(self._empty, [k.count, k.leases], []) for k in self.parts]
        res = await self.link.call(lambda: self._run(calls))
        return [(int(q), int(n), int(c)) for q, n, c in res]

    # -- the bell ------------------------------------------------------------------------
    async def _listen(self) -> None:
        """Every partition's bell and the control one (IGNORES). A partition's ring makes it
        due again for the lane it names."""
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
                        for w in self._lanes:
                            if data not in (b"0", b"1") or data == b"%d" % w.lane:
                                if p is not None:
                                    self._wakes[w.lane].pop(p, None)
                                w.poke.set()
            except (RedisError, RedisClusterException, *OUTAGE):
                await asyncio.sleep(MAX_SLEEP)

    # -- the heartbeat's partition half ---------------------------------------------------
    def held_by_part(self) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for member in self._raw.values():
            out.setdefault(self.part_of(split_member(member)[0]), []).append(member)
        return out

    async def beat_parts(self, rows: int) -> tuple[list[int], list[Item], list[Any], int]:
        """Renew the leases held in each partition and read its totals (PBEAT, one pipeline);
        one partition a beat also gives its first URLs due and a page of host rows, in turn.
        Returns ([queued, seen, leased, records, hosts, retired, over], head, rows, now)."""
        held = self.held_by_part()
        row_part = self._row_part
        calls: list[Call] = []
        for p in range(len(self.parts)):
            page = rows if p == row_part else 0
            cursor = self._row_cursor if p == row_part else 0
            calls.append((self._pbeat, self.pkeys(p), self.std_args(self.lease_ms, cursor, page, *held.get(p, []))))
        res = await self.link.call(lambda: self._run(calls))
        sums = [0] * 7
        head: list[Item] = []
        got_rows: list[Any] = []
        now = 0
        for p, (queued, seen, leased, records, hosts, retired, over, h, cursor, r, t) in enumerate(res):
            for i, v in enumerate((queued, seen, leased, records, hosts, retired, over)):
                sums[i] += int(v)
            self._totals_of(p, queued, seen)
            if p == row_part:
                head, got_rows, now = [decode_item(raw) for raw in h], r, int(t)
                self._row_cursor = int(cursor)
                if not self._row_cursor:
                    self._row_part = (row_part + 1) % len(self.parts)
        return sums, head, got_rows, now

    async def give_back(self) -> None:
        """Leaving: what this process holds goes back in every partition, idle marks go."""
        calls: list[Call] = [(self._giveback, self.pkeys(p), self.std_args()) for p in range(len(self.parts))]
        await self.link.call(lambda: self._run(calls))
