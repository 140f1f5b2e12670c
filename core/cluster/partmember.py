"""A Member's heartbeat and leaving (core/cluster/member.py) on a crawl in several partitions.

Each is two steps where a one-partition crawl's is one script: the control slot's half
(CTLBEAT, DEPART: who it is, control, ignores, status) and every partition's half, one
pipeline per node (PBEAT, GIVEBACK: leases renewed or given back, totals),
core/cluster/partscripts.py. A node that fails costs only its partitions' half: the leases
held elsewhere are still renewed. The beat also tells the frontier which processes are
live, for its rendezvous ownership of partitions, and puts partitions waiting for their
node on the status line.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Protocol

from ..monitor.stats import Snapshot
from ..queueing.frontier import Item
from .keys import decode_item
from .parted import Lazy, PartedFrontier
from .procs import ProcessInfo

PARTLY = "REDIS PARTLY DOWN"  # (PartedFrontier.away_text)


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
    ctl, mine, status, ignores, redis_now, procs = await f.link.call(lambda: f.ctlbeat(keys, args))
    f.set_live([p.decode() for p in procs])
    sums, head, host_rows = await beat_parts(f, rows)
    _queued, _seen, _leased, _records, total, retired, over = sums
    notice, away = m.engine.stats.notice, f.away_text()
    if away:  # (a call retrying on one of those partitions has the link say REDIS DOWN too)
        m.engine.stats.notice = f"{f.link.down_text()}; {away}" if f.link.down else away
    elif PARTLY in notice:
        m.engine.stats.notice = f.link.down_text()
    return ctl, mine, status, head, ignores, redis_now, host_rows, total, retired, over


async def beat_parts(f: PartedFrontier, rows: int) -> tuple[list[int], list[Item], list[Any]]:
    """Renew the leases held in each partition and read its totals (PBEAT); one partition a
    beat also gives its first URLs due and a page of host rows, in turn. A partition whose
    node fails keeps its last totals. Returns ([queued, seen, leased, records, hosts,
    retired, over], head, rows)."""
    held, row_part = f.held_by_part(), f.row_part
    lazy: list[Lazy] = []
    for p in range(len(f.parts)):
        page, cursor = (rows, f.row_cursor) if p == row_part else (0, 0)
        lazy.append((f.pbeat, p, partial(f.std_args, f.lease_ms, cursor, page, *held.get(p, [])), None))
    sums = [0] * 7
    head: list[Item] = []
    got_rows: list[Any] = []
    for p, reply in enumerate(await f.calls(lazy)):
        if isinstance(reply, BaseException):
            if p == row_part:
                f.row_part, f.row_cursor = (row_part + 1) % len(f.parts), 0
            continue
        queued, seen, leased, records, hosts, retired, over, h, cursor, r, _now = reply
        for i, v in enumerate((queued, seen, leased, records, hosts, retired, over)):
            sums[i] += int(v)
        f._totals_of(p, queued, seen)
        if p == row_part:
            head, got_rows = [decode_item(raw) for raw in h], r
            f.row_cursor = int(cursor)
            if not f.row_cursor:
                f.row_part = (row_part + 1) % len(f.parts)
    return sums, head, got_rows


async def leave_call(m: Member, f: PartedFrontier, live_ms: int, final_ttl_ms: int) -> list[Any]:
    """As Member._leave_call: what this process holds goes back in every partition (one
    whose node fails keeps it until its leases run out), then it deregisters and gives back
    what it holds of --max-pages; LIVE's answer (live, status, the report is ours)."""
    await f.calls([(f.giveback, p, f.std_args, None) for p in range(len(f.parts))])
    k = f.keys
    keys = [k.procs, k.beats, k.snap(f.proc), k.ctl_of(f.proc), k.left, k.meta]
    final = m._published(m.engine.stats.snapshot())
    args: list[str | int] = [f.proc, live_ms, int(m.reports), final, final_ttl_ms, f.budget.allow]
    got = list(await f.link.call(lambda: f.depart(keys, args)))
    f.budget.allow = 0
    return got
