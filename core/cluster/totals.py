"""A shared crawl's numbers summed over its partitions, for every reader of them (the
monitor's view, `ctl status`, the dashboard, `--processes`' progress line, the tests).

A crawl of P > 1 partitions (control meta's `parts`) keeps a `count` hash, a `leases`
zset and a `hosts` set per partition (core/cluster/keys.py): a reader that looked only
under the control prefix would see none of them. The commands are queued on the caller's
pipeline (`ask`), so a read stays one round trip on one server, and a Redis Cluster's
pipeline sends each partition's share to its own master at once; `summed` folds the
replies. With P = 1 the one partition is the control prefix: the same keys as ever.
"""
from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis

from .keys import Keys, partitions, parts_of

COUNTS = ("records", "rejected", "queued", "retired", "over", "seen")  # fields of each `count` hash
TOTALS = (*COUNTS, "leased", "hosts")  # what `summed` gives: counts, ZCARD leases, SCARD hosts
ASKED = 3  # replies `ask` queues per partition


def keys_of(name: str, parts: object) -> list[Keys]:
    """Crawl NAME's partitions from its control meta's `parts` field (the HGET's reply:
    None for a crawl made before partitions, so one)."""
    if isinstance(parts, str):
        parts = parts.encode()
    return partitions(name, parts_of({b"parts": parts}) if isinstance(parts, bytes) else 1)


async def read_parts(r: aioredis.Redis, name: str) -> list[Keys]:
    """Crawl NAME's partitions, read from its control meta (fixed at creation: read once)."""
    return keys_of(name, await r.hget(Keys(name).meta, "parts"))


def read_parts_sync(r: redis.Redis, name: str) -> list[Keys]:
    """read_parts for a blocking client."""
    return keys_of(name, r.hget(Keys(name).meta, "parts"))


def ask(pipe: Any, parts: list[Keys]) -> int:
    """Queue on `pipe` what `summed` folds: per partition its counts, leases and hosts.
    How many replies that is (they follow one another, from where the pipe stood)."""
    for k in parts:
        pipe.hmget(k.count, COUNTS)
        pipe.zcard(k.leases)
        pipe.scard(k.hosts)
    return ASKED * len(parts)


def summed(replies: list[Any]) -> dict[str, int]:
    """The replies `ask` queued, summed over the partitions: each of COUNTS, `leased` (URLs
    in flight) and `hosts` (every host that ever had a URL queued)."""
    out = dict.fromkeys(TOTALS, 0)
    for i in range(0, len(replies), ASKED):
        values, leased, hosts = replies[i:i + ASKED]
        for field, value in zip(COUNTS, values, strict=True):
            out[field] += int(value or 0)
        out["leased"] += int(leased or 0)
        out["hosts"] += int(hosts or 0)
    return out


async def totals(r: aioredis.Redis, name: str, parts: list[Keys] | None = None) -> dict[str, int]:
    """Crawl NAME's totals in one pipelined read (`parts`: as read before; else read first)."""
    parts = parts if parts is not None else await read_parts(r, name)
    pipe = r.pipeline(transaction=False)
    ask(pipe, parts)
    return summed(await pipe.execute())


def totals_sync(r: redis.Redis, name: str, parts: list[Keys] | None = None) -> dict[str, int]:
    """totals for a blocking client."""
    parts = parts if parts is not None else read_parts_sync(r, name)
    pipe = r.pipeline(transaction=False)
    ask(pipe, parts)
    return summed(pipe.execute())
