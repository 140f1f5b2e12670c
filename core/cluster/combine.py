"""Many processes' Stats snapshots as one: what the monitor of a shared crawl shows.

Counters and rates add up; histories add up aligned at the newest second; hosts merge
by name (a row read from Redis, with its queue state, is already the whole crawl's: the
freshest one is taken, not a sum; so are the counts of hosts by state); workers are
listed together, each process's ids moved into its own thousand (process 0's stay as
they are, so the same-loop TUI can still cancel its own); the recent-event rings
interleave by time. Queue depth, seen and in flight are not summed: the caller takes
them from Redis, where they are exact.
"""
from __future__ import annotations

import dataclasses
from collections import Counter, deque
from collections.abc import Sequence

from ..monitor.stats import RING, HostView, Snapshot, WorkerView
from ..outcomes import OUTCOMES

WORKER_BLOCK = 1000  # worker id = process ordinal * 1000 + its own id


def _sum_history(histories: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    width = max((len(h) for h in histories), default=0)
    out = [0] * width
    for h in histories:
        for i, v in enumerate(h):
            out[width - len(h) + i] += v
    return tuple(out)


def _hosts(snaps: Sequence[Snapshot]) -> tuple[HostView, ...]:
    merged: dict[str, HostView] = {}
    for s in snaps:
        for h in s.hosts:
            m = merged.get(h.host)
            if m is None:
                merged[h.host] = h
                continue
            if h.state or m.state:  # the whole crawl's row (core/cluster/hosts.py): the fresher one
                merged[h.host] = h if (h.done, h.errors) >= (m.done, m.errors) else m
                continue
            done = m.done + h.done
            avg = (m.avg_ms * m.done + h.avg_ms * h.done) / done if done else 0.0
            merged[h.host] = HostView(h.host, m.in_flight + h.in_flight, done, m.errors + h.errors, avg,
                                      max(m.delay, h.delay), m.paused or h.paused, m.parked + h.parked)
    return tuple(sorted(merged.values(), key=lambda h: (-h.in_flight, -h.done, h.host)))


def _ring(snaps: Sequence[Snapshot], name: str) -> tuple:
    events = sorted((e for s in snaps for e in getattr(s, name)), key=lambda e: e.at)[-RING:]
    return tuple(dataclasses.replace(e, seq=i) for i, e in enumerate(events))


def _workers(snaps: Sequence[Snapshot]) -> tuple[WorkerView, ...]:
    return tuple(dataclasses.replace(w, id=i * WORKER_BLOCK + w.id) for i, s in enumerate(snaps) for w in s.workers)


def merge(snaps: Sequence[Snapshot], *, state: str, queued: int, seen: int, in_flight: int,
          notice: str = "", rings: dict[str, tuple] | None = None) -> Snapshot:
    """One Snapshot for the whole crawl; `snaps[0]` is this process's own, if it has one.
    `rings`: the recent-event rings as a monitor keeps them (class Rings), with seqs that
    stay put from frame to frame; without, each call numbers the events afresh."""
    rings = rings or {name: _ring(snaps, name) for name in ("recent_errors", "recent_merges", "recent_redirects")}
    statuses: Counter[int] = Counter()
    kinds: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    for s in snaps:
        statuses.update(s.statuses)
        kinds.update(s.errors_by_kind)
        outcomes.update(s.outcomes)
        classes.update(s.fetched_classes)

    def total(field: str) -> int:
        return sum(getattr(s, field) for s in snaps)

    return Snapshot(
        state=state, elapsed=max((s.elapsed for s in snaps), default=0.0),
        records=total("records"), pages=total("pages"), bytes=total("bytes"),
        queued=queued, seen=seen, in_flight=in_flight,
        concurrency=total("concurrency"), busy=total("busy"), idle=total("idle"),
        errors=total("errors"), retries=total("retries"), redirects=total("redirects"), merges=total("merges"),
        robots_blocked=total("robots_blocked"), truncated=total("truncated"),
        rate_now=sum(s.rate_now for s in snaps), rate_avg=sum(s.rate_avg for s in snaps),
        statuses=dict(statuses), errors_by_kind=dict(kinds),
        workers=_workers(snaps), hosts=_hosts(snaps),
        recent_errors=rings["recent_errors"], recent_merges=rings["recent_merges"],
        history_pages=_sum_history([s.history_pages for s in snaps]),
        history_queue=_sum_history([s.history_queue for s in snaps[:1]]),  # the queue is shared: one view of it
        history_errors=_sum_history([s.history_errors for s in snaps]),
        resumed_from=0, recent_redirects=rings["recent_redirects"], ignored=total("ignored"),
        notice=notice, sitemap_probes=total("sitemap_probes"), sitemap_found=total("sitemap_found"),
        requisites=total("requisites"), externals=total("externals"),
        # hosts by state are the whole crawl's in every snapshot (read from Redis): the fullest
        host_counts=max((s.host_counts for s in snaps), key=lambda c: sum(c.values()), default={}),
        next_due=min((s.next_due for s in snaps if s.next_due is not None), default=None),
        hosts_over_budget=max((s.hosts_over_budget for s in snaps), default=0),
        outcomes={o: outcomes[o] for o in OUTCOMES}, fetched_classes=dict(classes),
        checks_busy=total("checks_busy"), checks=total("checks"),
    )


class Rings:
    """The merged recent-event rings of a live monitor. Each process's new events (seq
    past the last one taken from it) are appended under a seq of the monitor's own, so a
    panel that appends what is newer than its last seq never shows an event twice."""

    NAMES = ("recent_errors", "recent_merges", "recent_redirects")

    def __init__(self) -> None:
        self._rings: dict[str, deque] = {name: deque(maxlen=RING) for name in self.NAMES}
        self._last: dict[tuple[str, str], int] = {}
        self._seq = 0

    def absorb(self, proc: str, snap: Snapshot) -> None:
        for name in self.NAMES:
            last = self._last.get((proc, name), -1)
            new = [e for e in getattr(snap, name) if e.seq > last]
            if new:
                self._last[(proc, name)] = new[-1].seq
                for e in new:
                    self._seq += 1
                    self._rings[name].append(dataclasses.replace(e, seq=self._seq))

    def current(self) -> dict[str, tuple]:
        return {name: tuple(ring) for name, ring in self._rings.items()}
