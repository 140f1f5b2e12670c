"""Crawls shared through Redis as the dashboard shows them (`crawltop --redis URL`).

One pipelined read per crawl and tick, of small hashes only: its meta (status, roots), its
processes' heartbeat rows (pages, rate, workers, state), its counts (summed over its
partitions, core/cluster/totals.py: the first read learns how many there are) and controls. The
outcome counts live in each process's snapshot (`snap:PROC`, a full snapshot): those are
read every OUTCOMES_EVERY seconds, not per frame. Chromium's numbers (--browser) ride in
the heartbeat rows, so they are summed per tick. Gone processes' pages are not in the
`procs` hash any more: a shared crawl's pages here are those of its live processes (its
monitor, `attach --redis`, reads their final snapshots too).
"""
from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

import redis.asyncio as aioredis

from ..cluster.commands import command
from ..cluster.keys import Keys, partitions, parts_of, text
from ..cluster.totals import ask, summed
from ..monitor.summary import SPARK, Summary
from ..outcomes import OUTCOMES

OUTCOMES_EVERY = 2.0
SUFFIX = "@redis"  # a row's name: never a socket's (core/sockets/rundir.py NAME has no @)


class RedisCrawl:
    """One shared crawl's row data, refreshed by `read()`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.keys = Keys(name)
        self.partitions: list[Keys] | None = None  # from its meta at the first read (fixed at creation)
        self.status = "running"  # running | finished | stopped
        self.root = ""
        self.started = 0.0
        self.summary: Summary | None = None
        self.problem = ""  # set by the board when read() raised on this crawl's data
        self.paused = False
        self._spark: deque[int] = deque(maxlen=SPARK)
        self._sampled = 0.0
        self._outcomes: tuple[dict[str, int], dict[str, int], dict[str, int]] = ({}, {}, {})
        self._outcomes_at = -OUTCOMES_EVERY

    async def read(self, r: aioredis.Redis, now: float) -> None:
        k = self.keys
        first = self.partitions is None
        pipe = r.pipeline(transaction=False)
        pipe.hgetall(k.meta)
        pipe.hgetall(k.procs)
        pipe.hgetall(k.ctl)
        ask(pipe, self.partitions or [k])
        meta, procs, ctl, *counted = await pipe.execute()
        meta = {text(a): text(b) for a, b in meta.items()}
        if first:
            parts = partitions(self.name, parts_of(meta))
            if len(parts) > 1:  # the first read asked the control prefix: ask the partitions
                pipe = r.pipeline(transaction=False)
                ask(pipe, parts)
                counted = await pipe.execute()
            self.partitions = parts
        count = summed(counted)
        infos = [json.loads(v) for v in procs.values()]
        self.status = meta.get("status", "running")
        roots = json.loads(meta.get("roots") or "[]")
        self.root = str(roots[0]) if roots else ""
        self.started = float(meta.get("created") or 0.0)
        ctl = {text(a): text(b) for a, b in ctl.items()}
        states = [str(i.get("state", "")) for i in infos]
        self.paused = ctl.get("paused") == "1" or (bool(states) and all(s == "PAUSED" for s in states))
        if self.status != "running":
            state = "DONE"
        else:
            state = "PAUSED" if self.paused else "RUNNING"
        rate = sum(float(i.get("rate", 0.0)) for i in infos)
        if now - self._sampled >= 1.0:
            self._sampled = now
            self._spark.append(int(rate))
        if now - self._outcomes_at >= OUTCOMES_EVERY:
            self._outcomes_at = now
            await self._read_outcomes(r, [text(p) for p in procs])
        counts, classes, hosts = self._outcomes
        pages = sum(int(i.get("pages", 0)) for i in infos)
        self.summary = Summary(
            state=state, elapsed=max(0.0, time.time() - self.started) if self.started else 0.0, pages=pages,
            records=count["records"], queued=count["queued"], seen=0,
            rate_now=rate, rate_avg=0.0,
            concurrency=int(ctl.get("concurrency") or sum(int(i.get("workers", 0)) for i in infos)),
            outcomes=dict(counts) or dict.fromkeys(OUTCOMES, 0), fetched_classes=dict(classes),
            host_counts=dict(hosts), spark=tuple(self._spark), browser=browsers(infos))

    async def _read_outcomes(self, r: aioredis.Redis, procs: list[str]) -> None:
        """Each live process's outcome counts and host counts, from its snapshot, summed."""
        if not procs:
            return
        raws = await r.mget([self.keys.snap(p) for p in procs])
        counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        classes: dict[str, int] = {}
        hosts: dict[str, int] = {}
        for raw in raws:
            if raw is None:
                continue
            try:
                snap = json.loads(raw)
            except ValueError:
                continue
            for key, value in (snap.get("outcomes") or {}).items():
                counts[key] = counts.get(key, 0) + int(value)
            for key, value in (snap.get("fetched_classes") or {}).items():
                classes[key] = classes.get(key, 0) + int(value)
            host_counts = snap.get("host_counts") or {}
            if sum(host_counts.values()) > sum(hosts.values()):  # the shared queue: one process's view
                hosts = {str(a): int(b) for a, b in host_counts.items()}
        self._outcomes = (counts, classes, hosts)


def browsers(infos: list[dict[str, Any]]) -> dict[str, int]:
    """--browser: the live engines' Chromiums (one each) summed from their heartbeat rows, as
    the crawl's monitor sums them (core/cluster/view.py browsers); {} without a browser."""
    rows = [b for i in infos if isinstance(b := i.get("browser"), dict)]
    if not rows:
        return {}
    return {k: sum(int(b.get(k, 0)) for b in rows) for k in ("memory", "memory_limit", "restarts")}


async def names(r: aioredis.Redis) -> list[str]:
    """Every crawl in this Redis (a SCAN for their meta keys)."""
    out = set()
    async for key in r.scan_iter(match="crawltop:{*}:meta", count=500):
        k = text(key)[len("crawltop:{"):-len("}:meta")]
        if ":" not in k:  # a partition's own meta (`{NAME:K}`): its crawl is listed by its control meta
            out.add(k)
    return sorted(out)


COMMANDS = {"pause": "pause", "resume": "resume", "set_concurrency": "concurrency", "stop": "stop"}


async def control(r: aioredis.Redis, name: str, op: str, **args: Any) -> None:
    """A dashboard key on a shared crawl: the whole crawl's control hash (core/cluster/commands.py)."""
    if op not in COMMANDS:
        raise ValueError(f"{op.replace('_', ' ')} is not done from the list for a crawl on Redis: open it (enter)")
    await command(r, Keys(name), COMMANDS[op], args.get("n"))
