"""Per-host politeness for the whole cluster: the HostGate of core/hosts.py, kept in Redis.

One host sees no more than --per-host requests at once and no less than the delay
between two starts, counted over every process. A slot is a token in a sorted set with
an expiry, so a process that dies mid-request frees its slot when the expiry passes.
With neither a cap nor a delay, the gate costs nothing (no round trip).
"""
from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, AsyncIterator

from . import scripts

if TYPE_CHECKING:
    from .frontier import RedisFrontier


class RedisGate:
    def __init__(self, frontier: RedisFrontier, netloc: str, per_host: int | None, delay: float,
                 slot_ttl: float) -> None:
        self._frontier = frontier
        self._keys = [frontier.keys.gate(netloc), frontier.keys.slots(netloc)]
        self.per_host = per_host or 0
        self.delay = delay
        self._ttl_ms = int(slot_ttl * 1000)
        self._script = frontier.redis.register_script(scripts.GATE)
        # The cap holds here first, for free: only contention between processes costs polls.
        self._local = asyncio.Semaphore(self.per_host) if self.per_host else None

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if not self.per_host and self.delay <= 0:
            yield
            return
        if self._local is not None:
            await self._local.acquire()
        try:
            token = await self._acquire()
            yield
        finally:
            if self._local is not None:
                self._local.release()
        if self.per_host:  # the slot goes back with the next batch of finished URLs
            self._frontier.release_slot(self._keys[1], token)

    async def _acquire(self) -> str:
        token = os.urandom(8).hex()
        args = [token, self.per_host, int(self.delay * 1000), self._ttl_ms]
        retry = 0.01
        while True:
            res = await self._frontier._call(lambda: self._script(self._keys, args))
            if int(res[0]) >= 0:
                break
            await asyncio.sleep(retry)  # other processes hold every slot of this host
            retry = min(retry * 2, 0.2)
        if int(res[0]) > 0:
            await asyncio.sleep(int(res[0]) / 1000)
        return token
