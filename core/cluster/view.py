"""ClusterView: a whole shared crawl seen from Redis, with the surface the TUI drives.

The TUI cannot tell it from a local Crawler or a RemoteCrawler (ARCHITECTURE.md, "Control");
how it reads and what it steers, with or without an engine of its own, is ClusterView's docstring.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import types
from collections.abc import Awaitable
from typing import Any, Protocol

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ..monitor.stats import BrowserView, Snapshot
from ..sockets.client import HeldStats
from ..sockets.protocol import SnapshotDecoder
from ..steering.ignores import IgnoreResult, Ignores
from ..surface import MonitorStats, Parts
from . import commands, scripts
from .bell import ring
from .combine import WORKER_BLOCK, Rings, merge
from .frontier import IGNORES, LEASE
from .keys import Keys
from .link import OUTAGE, Link, cancel_and_wait
from .member import Member
from .nodes import EVERY, NodeRow, down_nodes, read_nodes
from .procs import ProcessInfo, ProcessRow
from .totals import TOTALS, ask, keys_of, summed

POLL = 0.5  # seconds between reads of the crawl


class Local(Protocol):
    """This process's engine as the view drives it: a Member, served on its control
    socket (core/sockets/server.py Listening[Member])."""

    @property
    def engine(self) -> Member: ...
    @property
    def stats(self) -> MonitorStats: ...
    @property
    def paused(self) -> bool: ...
    @property
    def concurrency(self) -> int: ...
    async def crawl(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def set_concurrency(self, n: int) -> None: ...
    def cancel_worker(self, worker_id: int) -> bool: ...
    def stop(self) -> None: ...


class ClusterStats(HeldStats):
    """The `stats` of a ClusterView: the merged snapshot of the last read."""

    def __init__(self, view: ClusterView) -> None:
        self._view = view
        self.snap = merge([], state="STARTING", queued=0, seen=0, in_flight=0)

    def snapshot(self) -> Snapshot:
        local = self._view.local
        if local is not None:  # our own numbers live, the others' as of the last read
            self.snap = self._view.merged(local.stats.snapshot())
        return self.snap

    def top_error_urls(self, n: int = 10) -> list[tuple[str, int]]:
        local = self._view.local
        return local.stats.top_error_urls(n) if local is not None else []


class ClusterView:
    """A shared crawl as a `Monitor` (core/surface.py).

    It reads the crawl with one pipelined round trip twice a second (never two at once):
    every process's row and Stats snapshot, the queue, the seen set and the leases; then
    merges them (core/cluster/combine.py). Keys act on the whole crawl through Redis
    (core/cluster/commands.py); `pause_process` and friends on one process.

    With `local` (the Member of this process, served on its socket: the same-loop TUI of
    `crawl --redis`), its own snapshot is taken live, its workers keep their ids (so `x`
    cancels one), steering keys go to it (and through it to the whole crawl), and crawl()
    is its crawl. Without, it is `attach NAME --redis URL`, from any machine: crawl()
    watches until the crawl is over and no process is left, or until the monitor detaches
    (`d`); its only steering is the crawl's shared set of ignores. `parts` says which.
    """

    def __init__(self, client: aioredis.Redis, name: str, roots: list[str], *, local: Local | None = None,
                 lease: float = LEASE) -> None:
        self.redis, self.keys, self.name, self.local = client, Keys(name), name, local
        self.link = Link(client)
        self.roots = roots
        self.config = types.SimpleNamespace(roots=tuple(roots))
        self.lease = lease
        self.stats = ClusterStats(self)
        self.rows: list[ProcessRow] = []
        self.node_rows: list[NodeRow] = []
        self._nodes_at = -EVERY  # when the nodes were last read (loop time)
        self._nodes: asyncio.Future[list[NodeRow]] | None = None  # that read, while it runs
        self._read_once = False
        self.records = 0
        self.status = "running"
        self.problem = ""
        self._decoders: dict[str, SnapshotDecoder] = {}
        self._rings = Rings()
        self._others: list[Snapshot] = []
        self._last: dict[str, Snapshot] = {}  # each live process's newest snapshot
        self._final: dict[str, Snapshot] = {}  # each gone process's final one (Keys.left)
        self._tried: set[str] = set()
        self._totals = (0, 0, 0)  # queued, seen, in flight
        self.totals: dict[str, int] = dict.fromkeys(TOTALS, 0)  # summed over the partitions (core/cluster/totals.py)
        self.partitions: list[Keys] | None = None  # the crawl's, from its control meta at the first read
        self._detached = asyncio.Event()
        self._paused = False
        self._concurrency = 0

    # -- what the app reads ---------------------------------------------------------
    @property
    def parts(self) -> Parts:
        """With an engine here, its steering; without, the shared ignores, and `d`: only
        a monitor in its own process can leave the crawl running."""
        if self.local is not None:
            return Parts(steer=self.local.engine, cluster=self)
        return Parts(ignoring=self, detach=self, cluster=self)

    @property
    def down(self) -> bool:
        """Redis unreachable at the last read."""
        return self.link.down

    @property
    def paused(self) -> bool:
        return self.local.paused if self.local is not None else self._paused

    @property
    def concurrency(self) -> int:
        return self.local.concurrency if self.local is not None else max(1, self._concurrency)

    def processes(self) -> list[ProcessRow]:
        return self.rows

    def _nodes_read(self, task: asyncio.Future[list[NodeRow]]) -> None:
        if not task.cancelled() and task.exception() is None:
            self.node_rows = task.result()

    def nodes(self) -> list[NodeRow]:
        """On a Redis Cluster, its masters (core/cluster/nodes.py), as of the last read."""
        return self.node_rows

    def merged(self, own: Snapshot | None) -> Snapshot:
        snaps = ([own] if own is not None else []) + self._others
        if own is not None:
            self._rings.absorb("", own)
        queued, seen, in_flight = self._totals
        down, nodes = self.link.down_text(), down_nodes(self.node_rows)
        notice = (f"REDIS DOWN: retrying ({nodes})" if down and nodes else down or nodes or self.problem
                  or (own.notice if own else ""))
        snap = merge(snaps, state=self._state(snaps), queued=queued, seen=seen, in_flight=in_flight, notice=notice,
                     rings=self._rings.current())
        browser = browsers(snaps)
        return snap if browser is None else dataclasses.replace(snap, browser=browser)

    def _state(self, snaps: list[Snapshot]) -> str:
        if self.local is not None:
            return self.local.stats.state
        if self.status == "finished":
            return "DONE"
        if self.status == "stopped":
            return "STOPPING" if self.rows else "DONE"
        live = [r.info.state for r in self.rows if not r.lost]
        if live and all(s == "PAUSED" for s in live):
            return "PAUSED"
        return "RUNNING"

    # -- commands: the whole crawl --------------------------------------------------------
    def pause(self) -> None:
        self._paused = True
        self._command("pause")
        if self.local is not None:
            self.local.pause()

    def resume(self) -> None:
        self._paused = False
        self._command("resume")
        if self.local is not None:
            self.local.resume()

    def set_concurrency(self, n: int) -> None:
        """Workers per process, for every process."""
        self._concurrency = n
        self._command("concurrency", n)
        if self.local is not None:
            self.local.set_concurrency(n)

    def cancel_worker(self, worker_id: int) -> bool:
        if self.local is not None and worker_id < WORKER_BLOCK:
            return bool(self.local.cancel_worker(worker_id))
        return False  # another process's worker: pause or stop that process instead

    def stop(self) -> None:
        if self.local is not None:
            self.local.stop()  # the same-loop TUI's q: this process (the others go on)
        else:
            self._command("stop")

    # -- ignores from a monitor with no engine: straight to the crawl's shared set ---------
    async def add_ignore(self, pattern: str) -> IgnoreResult:
        if self.local is not None:
            return await self.local.engine.add_ignore(pattern)
        reason = Ignores.check(pattern)
        if reason is not None:
            return IgnoreResult(False, pattern, reason)
        if await self.link.once(self.redis.hsetnx(self.keys.ignores, pattern, "monitor")) == 0:
            return IgnoreResult(False, pattern, f"already an ignore pattern: {pattern}")
        # each process drops its matches when the bell tells it, at its next beat at the latest
        await self._quietly(ring(self.redis, self.keys.bell, IGNORES))
        return IgnoreResult(True, pattern)

    def remove_ignore(self, pattern: str) -> bool:
        if self.local is not None:
            return bool(self.local.engine.remove_ignore(pattern))
        async def unignore() -> None:
            await self._quietly(self.redis.hdel(self.keys.ignores, pattern))
            await self._quietly(ring(self.redis, self.keys.bell, IGNORES))
        asyncio.ensure_future(unignore())
        return True

    def pause_process(self, proc: str) -> None:
        self._command("pause", proc=proc)

    def resume_process(self, proc: str) -> None:
        self._command("resume", proc=proc)

    def stop_process(self, proc: str) -> None:
        self._command("stop", proc=proc)

    def detach(self) -> None:
        self._detached.set()

    def _command(self, op: str, arg: int | None = None, proc: str | None = None) -> None:
        asyncio.ensure_future(self._send(op, arg, proc))

    async def _quietly(self, coro: Awaitable[Any]) -> None:
        with contextlib.suppress(*OUTAGE, RedisError):
            await self.link.once(coro)  # bounded there: the client has no socket timeout

    async def _send(self, op: str, arg: int | None, proc: str | None) -> None:
        with contextlib.suppress(*OUTAGE, RedisError):
            await self.link.once(commands.command(self.redis, self.keys, op, arg, proc))
            await self.read()

    # -- the crawl -------------------------------------------------------------------------
    async def crawl(self) -> None:
        """The local engine's crawl, or watching until the crawl is over."""
        poll = asyncio.ensure_future(self._poll())
        try:
            if self.local is not None:
                await self.local.crawl()
                return
            detach = asyncio.ensure_future(self._detached.wait())
            await asyncio.wait((poll, detach), return_when=asyncio.FIRST_COMPLETED)
            detach.cancel()
        finally:
            await cancel_and_wait(poll)

    async def _poll(self) -> None:
        wait = POLL
        while True:
            try:
                await self.read()
                wait = POLL
            except (*OUTAGE, RedisError):  # an outage: the link says so (down)
                self.stats.snap = self.merged(None)
                wait = min(wait * 2, 5.0)
            except Exception as exc:  # a row that isn't ours, or a bug: say so, and go on watching
                self.problem = f"unreadable data in Redis: {exc}"[:200]
                self.stats.snap = self.merged(None)
                wait = min(wait * 2, 5.0)
            if self.local is None and self.status != "running" and not any(not r.lost for r in self.rows):
                return
            await asyncio.sleep(wait)

    async def read(self) -> None:
        """One pipelined read of the whole crawl (and one more for the leases of lost
        processes, usually none). Its counts, leases and hosts are summed over the crawl's
        partitions (core/cluster/totals.py): the first read also asks how many there are,
        and with more than one reads their totals once more, then knows where they are."""
        k = self.keys
        first = self.partitions is None
        parts = self.partitions or [k]
        pipe = self.redis.pipeline(transaction=False)
        pipe.eval(scripts.CLOCK, 1, k.meta)  # TIME has no key: a cluster's pipeline takes it only so
        pipe.hget(k.meta, "status")
        pipe.hgetall(k.procs)
        pipe.hgetall(k.beats)
        pipe.smembers(k.left)
        if first:
            pipe.hget(k.meta, "parts")
        ask(pipe, parts)
        loop = asyncio.get_running_loop()
        # The nodes at most once a second, in a task of their own that this round never waits
        # for: one master that hangs would hold up every row of the crawl. It never raises (a
        # node that fails is a row marked down), and its rows are the next rounds'.
        if loop.time() - self._nodes_at >= EVERY and (self._nodes is None or self._nodes.done()):
            self._nodes_at = loop.time()
            self._nodes = asyncio.ensure_future(read_nodes(self.redis, [p.meta for p in (self.partitions or [k])]))
            self._nodes.add_done_callback(self._nodes_read)
        try:
            replies = await self.link.once(pipe.execute())
            now_t, status, procs, beats, left = replies[:5]
            counted = replies[6:] if first else replies[5:]
            if first:
                parts = keys_of(self.name, replies[5])
                if len(parts) > 1:  # the first read asked the control prefix: ask the partitions
                    pipe = self.redis.pipeline(transaction=False)
                    ask(pipe, parts)
                    counted = await self.link.once(pipe.execute())
                    if self._nodes is not None:  # it asked where the control key lives: ask for every partition
                        self._nodes.cancel()
                        self._nodes = asyncio.ensure_future(read_nodes(self.redis, [p.meta for p in parts]))
                        self._nodes.add_done_callback(self._nodes_read)
                self.partitions = parts
        finally:  # the first round (a one-shot `ctl status`, an outage at start) waits for them
            if self._nodes is not None and not self._read_once:
                await asyncio.wait((self._nodes,))
            self._read_once = True
        totals = summed(counted)
        self.records = totals["records"]  # every record of the crawl in Redis, from all processes
        now = int(now_t[0]) * 1000 + int(now_t[1]) // 1000
        own = self.local.engine.frontier.proc if self.local is not None else None
        ids = sorted(p.decode() for p in procs)
        each = 1 + len(parts)  # per process: its snapshot, then what it holds in each partition
        pipe = self.redis.pipeline(transaction=False)
        for proc in ids:
            pipe.get(k.snap(proc))
            for part in parts:
                pipe.smembers(part.held(proc))
        # each one's final snapshot, read once (one still in `ids` left just now: next time)
        gone = sorted(p for p in (x.decode() for x in left) if p not in self._tried and p != own and p not in ids)
        for proc in gone:
            pipe.get(k.snap(proc))
        got = await self.link.once(pipe.execute()) if ids or gone else []
        for proc, raw_final in zip(gone, got[each * len(ids):], strict=True):
            self._tried.add(proc)  # once: a final snapshot that expired is not asked for again
            if raw_final is not None:
                self._final[proc] = _retired(SnapshotDecoder().decode(json.loads(raw_final)))
        rows: list[ProcessRow] = []
        others: list[Snapshot] = []
        problem = ""
        for i, proc in enumerate(ids):
            raw_snap, helds = got[each * i], got[each * i + 1:each * (i + 1)]
            age = (now - int(beats.get(proc.encode(), 0) or 0)) / 1000
            lost = age > self.lease
            expires = None
            if lost and any(helds):  # a live process renews its leases; a lost one's run out
                expires = await self._expires([(part, held) for part, held in zip(parts, helds, strict=True) if held],
                                              now)
            rows.append(ProcessRow(proc, ProcessInfo.from_json(procs[proc.encode()]), age, lost,
                                   sum(len(held) for held in helds), expires))
            if raw_snap is not None and proc != own and not lost:
                try:  # one unreadable snapshot costs its process's numbers, not the whole read
                    snap = self._decoders.setdefault(proc, SnapshotDecoder()).decode(json.loads(raw_snap))
                except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
                    problem = f"unreadable snapshot of {proc}: {exc}"[:200]
                    self._decoders.pop(proc, None)  # start afresh with its next one
                    continue
                others.append(snap)
                self._rings.absorb(proc, snap)
                self._last[proc] = snap
        # a process that left (its final snapshot) or went silent (its last one) still
        # counts in the totals: what it fetched stays fetched, the end doesn't read "pages 0"
        live = {p for p, r in zip(ids, rows, strict=True) if not r.lost}
        others += list(self._final.values())
        others += [_retired(snap) for proc, snap in self._last.items() if proc not in live and proc not in self._final]
        self.rows, self._others = rows, others
        self.status = status.decode() if status else "running"
        self._totals = (totals["queued"], totals["seen"], totals["leased"])
        self.totals = totals
        if self.local is None:
            running = [r for r in rows if not r.lost]
            self._paused = bool(running) and all(r.info.state == "PAUSED" for r in running)
            self._concurrency = max((r.info.workers for r in running), default=self._concurrency)
        self.problem = problem
        self.stats.snap = self.merged(self.local.stats.snapshot() if self.local is not None else None)

    async def _expires(self, held: list[tuple[Keys, set[Any]]], now: int) -> float | None:
        """When the first of a lost process's leases runs out (seconds from `now`), from each
        partition where it holds some; None if none is left."""
        pipe = self.redis.pipeline(transaction=False)
        for part, members in held:
            pipe.zmscore(part.leases, list(members))
        scores = [s for got in await self.link.once(pipe.execute()) for s in got if s is not None]
        return (min(scores) - now) / 1000 if scores else None


def browsers(snaps: list[Snapshot]) -> BrowserView | None:
    """The crawl's Chromiums (--browser: one per engine) as one: memory and its limit summed
    over the engines running one (a gone engine's Chromium is gone: 0), restarts over every
    engine; None for a crawl without a browser."""
    views = [s.browser for s in snaps if s.browser is not None]
    if not views:
        return None
    return BrowserView(sum(b.memory for b in views), sum(b.memory_limit for b in views),
                       sum(b.restarts for b in views))


def _retired(snap: Snapshot) -> Snapshot:
    """A gone process's last snapshot: its counters, none of its live gauges (its Chromium
    is gone with it: only its restarts count)."""
    browser = None if snap.browser is None else BrowserView(0, 0, snap.browser.restarts)
    return dataclasses.replace(snap, concurrency=0, busy=0, idle=0, rate_now=0.0, workers=(),
                               hosts=tuple(dataclasses.replace(h, in_flight=0, parked=0) for h in snap.hosts),
                               history_pages=(), history_queue=(), history_errors=(), browser=browser)
