"""Control of a shared crawl, written to Redis for every process's heartbeat to act on.

Whole crawl: the `ctl` hash. One process: its `ctl:PROC` hash, whose fields win over
the whole-crawl ones (core/cluster/member.py applies a field when its effective value
changes). A whole-crawl resume also clears every process's own pause, and a whole-crawl
stop marks the crawl stopped, so no process pops another URL meanwhile.
"""
from __future__ import annotations

from typing import cast

import redis.asyncio as aioredis

from .keys import Keys

OPS = ("pause", "resume", "concurrency", "stop")


async def command(r: aioredis.Redis, keys: Keys, op: str, arg: int | None = None, proc: str | None = None) -> None:
    if op not in OPS:
        raise ValueError(f"unknown cluster command {op!r}")
    target = keys.ctl_of(proc) if proc else keys.ctl
    pipe = r.pipeline(transaction=True)
    if op == "pause":
        pipe.hset(target, "paused", "1")
    elif op == "resume":
        pipe.hset(target, "paused", "0")
        if proc is None:
            for other in await r.hkeys(keys.procs):
                pipe.hdel(keys.ctl_of(cast(bytes, other).decode()), "paused")  # a client without decode_responses
    elif op == "concurrency":
        pipe.hset(target, "concurrency", str(max(1, int(arg or 1))))
    elif op == "stop":
        pipe.hset(target, "stop", "1")
        if proc is None:
            pipe.hset(keys.meta, "status", "stopped")
    await pipe.execute()
