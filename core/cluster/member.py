"""One process of a shared crawl: its heartbeat, its control, its leaving.

`Member` wraps a Crawler the way core/sockets/server.py's Listening does: it is an `Engine` and
a `Steer` (core/surface.py), each member passed on to the crawler but ignores (one set
for the whole crawl, through Redis), and crawl() also runs the heartbeat. Each beat (one script call):
renews this process's leases, publishes its ProcessInfo and Stats snapshot for the
monitors, and reads back the crawl's control and totals, and a page of host rows (the
queues view and the header counts are the whole crawl's, read from Redis). Control is applied when its
effective value changes, so a key pressed in this process's own TUI is not undone by
the next beat.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
from collections.abc import Sequence
from typing import Any

from ..crawler import Crawler
from ..errors import UsageError
from ..monitor.queueview import QueueView
from ..monitor.stats import HostView, Snapshot, Stats
from ..monitor.summary import browser_numbers
from ..sockets.protocol import encode_snapshot, rings
from ..steering.ignores import IgnoreResult, Ignores, IgnoreSetView, IgnoreView
from ..steering.steer import SeedResult
from ..surface import HasRoots, Parts
from . import partmember, scripts
from .bell import ring
from .frontier import IGNORES, ROWS, RedisFrontier
from .keys import decode_item, text
from .link import OUTAGE, cancel_and_wait
from .parted import PartedFrontier
from .procs import ProcessInfo

BEAT = 1.0  # seconds between heartbeats
LIVE = 3 * BEAT  # a process that has not beaten for this long is gone, for the final report
LEAVE_TIMEOUT = 10.0  # Redis gone at exit: don't hang; our leases run out and are reaped
SNAP_TTL_MS = 10_000
FINAL_TTL_MS = 600_000  # a process's final snapshot, for monitors, after it left
PUBLISHED_EVENTS = 50  # newest events of each ring in the published snapshot: a beat stays small


class Member:
    def __init__(self, crawler: Crawler, frontier: RedisFrontier, *, reports: bool = True) -> None:
        # reports=False: someone else writes the final report (--processes' parent), so
        # leaving never waits to claim it
        self.engine, self.frontier, self.reports = crawler, frontier, reports
        self.reporter = False
        self.left = False
        self._control: dict[str, str] = {}
        self._leaving = 0.0
        self._ignores: set[str] = set()
        # reads of the shared ignores, numbered when asked: an answer older than one already
        # acted on (a beat's, overtaken by a ring's or by our own add) must not undo it
        self._asked = self._applied = 0
        self._rang = False
        self._reading: asyncio.Future[None] | None = None
        self._beat = frontier.script(scripts.BEAT)
        self._leave = frontier.script(scripts.LEAVE)
        self._live = frontier.script(scripts.LIVE)
        frontier.link.on_down = self._on_down
        frontier.on_ignores = self._ignores_rang

    # -- the engine's control surface, passed on --------------------------------------
    @property
    def stats(self) -> Stats:
        return self.engine.stats

    @property
    def paused(self) -> bool:
        return self.engine.paused

    @property
    def concurrency(self) -> int:
        return self.engine.concurrency

    @property
    def config(self) -> HasRoots:
        return self.engine.config

    @property
    def roots(self) -> Sequence[str]:
        return self.engine.roots

    @property
    def parts(self) -> Parts:
        return Parts(steer=self)

    @property
    def ignore_rules(self) -> Ignores:
        return self.engine.steering.ignore_rules

    def pause(self) -> None:
        self.engine.pause()

    def resume(self) -> None:
        self.engine.resume()

    def set_concurrency(self, n: int) -> None:
        self.engine.set_concurrency(n)

    def cancel_worker(self, worker_id: int) -> bool:
        return self.engine.cancel_worker(worker_id)

    def stop(self) -> None:
        self.engine.stop()

    def ignores(self) -> tuple[IgnoreView, ...]:
        return self.engine.steering.ignores()

    def add_seed(self, url: str) -> SeedResult:
        return self.engine.steering.add_seed(url)

    async def set_ignore_set(self, name: str, on: bool) -> IgnoreResult:
        """This process's engine only: each process of a shared crawl starts with the crawl's
        sets (its settings in Redis); a live toggle is per process (docs/scaling.md)."""
        return await self.engine.steering.set_ignore_set(name, on)

    def ignore_sets(self) -> tuple[IgnoreSetView, ...]:
        return self.engine.steering.ignore_sets()

    def pause_host(self, host: str) -> bool:
        return self.engine.steering.pause_host(host)

    def resume_host(self, host: str) -> int:
        return self.engine.steering.resume_host(host)

    def paused_hosts(self) -> dict[str, int]:
        return self.engine.steering.paused_hosts()

    def set_host_delay(self, host: str, seconds: float) -> None:
        self.engine.steering.set_host_delay(host, seconds)

    def host_table(self, sort: str = "queued", state: str | None = None,
                   limit: int | None = None) -> list[HostView]:
        return self.engine.steering.host_table(sort, state, limit)

    def queue_view(self, n: int = 10) -> QueueView:
        return self.engine.steering.queue_view(n)

    # -- the crawl ------------------------------------------------------------------------
    async def crawl(self) -> None:
        beat = asyncio.ensure_future(self._beats())
        try:
            await self.engine.crawl()
        finally:
            await cancel_and_wait(beat)  # not a bare cancel(): on 3.11 one can be lost (link.py)
            self.frontier.on_ignores = None  # a ring while we leave must not start another read
            if self._reading is not None:
                await cancel_and_wait(self._reading)
            # A leave that cannot finish must not keep the process alive (seen: an
            # engine DONE for 14 minutes, retrying a Redis that was gone). Shortly before the
            # timeout the link stops waiting out outages, so no retry loop outlives it.
            loop = asyncio.get_running_loop()
            give_up = loop.call_later(LEAVE_TIMEOUT - 0.5, setattr, self.frontier.link, "closed", True)
            try:
                self._leaving = loop.time()
                async with asyncio.timeout(LEAVE_TIMEOUT):
                    await self.leave()
            except (TimeoutError, UsageError, *OUTAGE):  # told by `left` == False; the leases expire
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2.0):
                        await self.frontier.close()
            finally:
                give_up.cancel()

    async def leave(self) -> None:
        """Finish what is queued for Redis, give back any lease still held, deregister.
        If the crawl is finished, the last process out claims its report (`reporter`):
        a process that was killed shortly before still looks live, so while others seem
        live we wait up to LIVE seconds for them to leave or go quiet."""
        f, k = self.frontier, self.frontier.keys
        await f.flush()
        args: list[str | int] = [f.proc, int(LIVE * 1000), int(self.reports)]
        live, status, claimed = await self._leave_call()
        self.left = True
        # within crawl()'s LEAVE_TIMEOUT, with a second to spare for the last LIVE call
        now = asyncio.get_running_loop().time()
        deadline = min((self._leaving or now) + LEAVE_TIMEOUT - 1.0, now + LIVE + BEAT)
        loop = asyncio.get_running_loop()
        while self.reports and live and status in (b"finished", "finished") and loop.time() < deadline:
            await asyncio.sleep(BEAT / 2)
            live, status, claimed = await f.link.call(lambda: self._live([k.beats, k.meta], args))
        self.reporter = bool(claimed)
        f._status(status)
        await f.close()

    async def _leave_call(self) -> list[Any]:
        """LEAVE: give back, deregister, and LIVE's answer (live, status, the report is ours)."""
        f, k = self.frontier, self.frontier.keys
        if isinstance(f, PartedFrontier):
            return await partmember.leave_call(self, f, int(LIVE * 1000), FINAL_TTL_MS)
        keys = f.std_keys(k.procs, k.beats, k.snap(f.proc), k.ctl_of(f.proc), k.left)
        final = f.std_args(int(LIVE * 1000), int(self.reports), self._published(self.engine.stats.snapshot()),
                           FINAL_TTL_MS)
        return list(await f.link.call(lambda: self._leave(keys, final)))

    def _on_down(self, down: bool) -> None:
        """REDIS DOWN on the status line while Redis is away, with the node that failed (on
        a cluster, redis-py says which); called again when that node changes."""
        self.engine.stats.notice = self.frontier.link.down_text() if down else ""

    async def _beats(self) -> None:
        while True:
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let a monitor feature kill the crawl
                self.engine.stats.notice = f"heartbeat: {exc}"
            await asyncio.sleep(BEAT)

    async def beat(self) -> None:
        f, c = self.frontier, self.engine
        snap = c.stats.snapshot()
        # its Chromium's numbers in the small row too: the dashboard sums them every tick
        info = ProcessInfo(host=socket.gethostname(), pid=_pid(f.proc), state=snap.state,
                           workers=snap.concurrency, busy=snap.busy, pages=snap.pages, rate=round(snap.rate_now, 1),
                           browser=browser_numbers(snap.browser) or None)
        asked = self._ask()
        ctl, mine, status, head, ignores, redis_now, rows, total, retired, over = await self._beat_call(info, snap)
        if c.stats.notice.startswith("heartbeat:"):  # the last beat failed; this one did not
            c.stats.notice = ""
        f._head = head
        hosts = f.hosts
        hosts.rows(rows, int(redis_now), asyncio.get_running_loop().time())
        hosts.total, hosts.retired, hosts.over_budget = int(total), int(retired), int(over)
        self._apply({**_pairs(ctl), **_pairs(mine)})
        await self._sync_ignores({p.decode() for p in ignores}, asked)
        if status in (b"stopped", "stopped"):
            c.stop()
        f._status(status)

    async def _beat_call(self, info: ProcessInfo, snap: Snapshot) -> tuple[Any, ...]:
        """BEAT, one script call: (ctl, ctl:PROC, status, head, ignores, now, host rows, hosts,
        retired, over budget); the totals go to the frontier."""
        f, k = self.frontier, self.frontier.keys
        if isinstance(f, PartedFrontier):
            return await partmember.beat_call(self, f, info, snap, ROWS, SNAP_TTL_MS)
        keys = f.std_keys(k.procs, k.beats, k.snap(f.proc), k.ctl, k.ctl_of(f.proc), k.ignores)
        args = f.std_args(info.to_json(), self._published(snap), SNAP_TTL_MS, f.lease_ms, f._cursor, ROWS, *f.held())
        (ctl, mine, status, size, seen, _leased, _records, head, ignores, redis_now, cursor, rows, total, retired,
         over) = await f.link.call(lambda: self._beat(keys, args))
        f._totals(size, seen)
        f._cursor = int(cursor)  # a page of host rows for the queues view: every host comes round in turn
        return ctl, mine, status, [decode_item(raw) for raw in head], ignores, redis_now, rows, total, retired, over

    @staticmethod
    def _published(snap: Snapshot) -> str:
        """The snapshot as monitors read it: the newest events only, so a beat stays small."""
        snap = dataclasses.replace(snap, **{ring: getattr(snap, ring)[-PUBLISHED_EVENTS:] for ring in rings()})
        return json.dumps(encode_snapshot(snap), separators=(",", ":"))

    # -- ignores: one set for the whole crawl ----------------------------------------
    async def add_ignore(self, pattern: str) -> IgnoreResult:
        """Here at once; in every other process as soon as the bell tells it (IGNORES), at
        its next beat at the latest (each takes the matches it finds on the shared queue:
        REMOVE gives each item to one process only)."""
        result = await self.engine.steering.add_ignore(pattern)
        if result.ok:  # in Redis first: a read in between must not see it as removed
            f = self.frontier
            await f.link.call(lambda: f.redis.hset(f.keys.ignores, pattern, f.proc))
            self._ignores.add(pattern)
            self._applied = self._ask()  # a read asked before the HSET is older than this
            await f.link.call(lambda: ring(f.redis, f.keys.bell, IGNORES))
        return result

    def remove_ignore(self, pattern: str) -> bool:
        ok = self.engine.steering.remove_ignore(pattern)
        if ok:  # kept in _ignores until a read sees it gone from Redis, or it comes back
            f = self.frontier

            async def unignore() -> None:
                await f.link.call(lambda: f.redis.hdel(f.keys.ignores, pattern))
                await f.link.call(lambda: ring(f.redis, f.keys.bell, IGNORES))
            f.link.background(unignore())
        return ok

    def _ask(self) -> int:
        self._asked += 1
        return self._asked

    def _ignores_rang(self) -> None:
        """The bell: some process changed the crawl's ignores. Read them now, not at the
        next beat: until this process has a new pattern, it queues the links that match."""
        self._rang = True
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._read_ignores())

    async def _read_ignores(self) -> None:
        f = self.frontier
        while self._rang:
            self._rang = False
            asked = self._ask()
            try:
                shared = await f.link.call(lambda: f.redis.hkeys(f.keys.ignores))
                await self._sync_ignores({text(p) for p in shared}, asked)
            except (UsageError, *OUTAGE):  # the beats go on reading them
                return
            except Exception as exc:  # as in _beats: never let a monitor feature kill the crawl
                self.engine.stats.notice = f"heartbeat: {exc}"
                return

    async def _sync_ignores(self, shared: set[str], asked: int) -> None:
        """Act on what changed in Redis since the last read, as for control; a read asked
        before the last one acted on is stale (replies on two connections can cross)."""
        if asked < self._applied:
            return
        self._applied = asked
        added, removed = shared - self._ignores, self._ignores - shared
        self._ignores = shared
        for pattern in sorted(added):
            if pattern not in self.engine.steering.ignore_rules:
                await self.engine.steering.add_ignore(pattern)
        for pattern in removed:
            self.engine.steering.remove_ignore(pattern)

    def _apply(self, control: dict[str, str]) -> None:
        """Act on what changed since the last beat."""
        last, self._control = self._control, control
        c = self.engine
        if control.get("stop") == "1" and last.get("stop") != "1":
            c.stop()
        paused = control.get("paused", "0")
        if paused != last.get("paused", "0"):
            c.pause() if paused == "1" else c.resume()
        n = control.get("concurrency")
        if n is not None and n != last.get("concurrency") and n.isdigit():
            c.set_concurrency(int(n))


def _pairs(flat: list[bytes]) -> dict[str, str]:
    it = iter(x.decode() for x in flat)
    return dict(zip(it, it, strict=False))  # one iterator: pairs


def _pid(proc: str) -> int:
    parts = proc.split(":")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else 0
