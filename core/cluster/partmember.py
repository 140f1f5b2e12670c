"""PartedMember: a Member (core/cluster/member.py) of a crawl in several partitions.

Its heartbeat and its leaving are two steps where a one-partition crawl's are one script:
the control slot's half (CTLBEAT, DEPART: who it is, control, ignores, status) and every
partition's half in one pipeline (PBEAT, GIVEBACK: leases renewed or given back, totals),
core/cluster/partscripts.py. The beat also tells the frontier which processes are live,
for its rendezvous ownership of partitions.
"""
from __future__ import annotations

from typing import Any

from ..crawler import Crawler
from ..monitor.stats import Snapshot
from . import partscripts
from .member import FINAL_TTL_MS, LIVE, ROWS, SNAP_TTL_MS, Member
from .parted import PartedFrontier
from .procs import ProcessInfo


class PartedMember(Member):
    def __init__(self, crawler: Crawler, frontier: PartedFrontier, *, reports: bool = True) -> None:
        super().__init__(crawler, frontier, reports=reports)
        self.parted = frontier
        self._ctlbeat = frontier.script(partscripts.CTLBEAT)
        self._depart = frontier.script(partscripts.DEPART)

    async def _beat_call(self, info: ProcessInfo, snap: Snapshot) -> tuple[Any, ...]:
        f, k = self.parted, self.parted.keys
        keys = [k.procs, k.beats, k.snap(f.proc), k.ctl, k.ctl_of(f.proc), k.ignores, k.meta]
        args: list[str | int] = [f.proc, info.to_json(), self._published(snap), SNAP_TTL_MS]
        ctl, mine, status, ignores, _now, procs = await f.link.call(lambda: self._ctlbeat(keys, args))
        f.set_live([p.decode() for p in procs])
        sums, head, rows, redis_now = await f.beat_parts(ROWS)
        _queued, _seen, _leased, _records, total, retired, over = sums
        return ctl, mine, status, head, ignores, redis_now, rows, total, retired, over

    async def _leave_call(self) -> list[Any]:
        f, k = self.parted, self.parted.keys
        await f.give_back()
        keys = [k.procs, k.beats, k.snap(f.proc), k.ctl_of(f.proc), k.left, k.meta]
        final = self._published(self.engine.stats.snapshot())
        args: list[str | int] = [f.proc, int(LIVE * 1000), int(self.reports), final, FINAL_TTL_MS,
                                 f._allow if f.max_pages else 0]
        got = list(await f.link.call(lambda: self._depart(keys, args)))
        f._allow = 0
        return got
