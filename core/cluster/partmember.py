"""A Member's heartbeat and leaving (core/cluster/member.py) on a crawl in several partitions.

Each is two steps where a one-partition crawl's is one script: the control slot's half
(CTLBEAT, DEPART: who it is, control, ignores, status) and every partition's half in one
pipeline (PBEAT, GIVEBACK: leases renewed or given back, totals), core/cluster/partscripts.py.
The beat also tells the frontier which processes are live, for its rendezvous ownership
of partitions.
"""
from __future__ import annotations

from typing import Any, Protocol

from ..monitor.stats import Snapshot
from .parted import PartedFrontier
from .procs import ProcessInfo


class Member(Protocol):
    """What these steps use of core/cluster/member.py's Member (not imported: it imports us)."""

    reports: bool
    engine: Any

    def _published(self, snap: Snapshot) -> str: ...


async def beat_call(m: Member, f: PartedFrontier, info: ProcessInfo, snap: Snapshot, rows: int,
                    snap_ttl_ms: int) -> tuple[Any, ...]:
    """As Member._beat_call: (ctl, ctl:PROC, status, head, ignores, now, host rows, hosts,
    retired, over budget)."""
    k = f.keys
    keys = [k.procs, k.beats, k.snap(f.proc), k.ctl, k.ctl_of(f.proc), k.ignores, k.meta]
    args: list[str | int] = [f.proc, info.to_json(), m._published(snap), snap_ttl_ms]
    ctl, mine, status, ignores, _now, procs = await f.link.call(lambda: f.ctlbeat(keys, args))
    f.set_live([p.decode() for p in procs])
    sums, head, host_rows, redis_now = await f.beat_parts(rows)
    _queued, _seen, _leased, _records, total, retired, over = sums
    return ctl, mine, status, head, ignores, redis_now, host_rows, total, retired, over


async def leave_call(m: Member, f: PartedFrontier, live_ms: int, final_ttl_ms: int) -> list[Any]:
    """As Member._leave_call: give back in every partition, then deregister (and give back
    what it took of --max-pages); LIVE's answer (live, status, the report is ours)."""
    await f.give_back()
    k = f.keys
    keys = [k.procs, k.beats, k.snap(f.proc), k.ctl_of(f.proc), k.left, k.meta]
    final = m._published(m.engine.stats.snapshot())
    args: list[str | int] = [f.proc, live_ms, int(m.reports), final, final_ttl_ms, f._allow if f.max_pages else 0]
    got = list(await f.link.call(lambda: f.depart(keys, args)))
    f._allow = 0
    return got
