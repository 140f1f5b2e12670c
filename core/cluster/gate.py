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

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if not self.per_host and self.delay <= 0:
            yield
            return
        token = os.urandom(8).hex()
        args = [token, self.per_host, int(self.delay * 1000), self._ttl_ms]
        while True:
            res = await self._frontier._call(lambda: self._script(self._keys, args))
            if int(res[0]) >= 0:
                break
            await asyncio.sleep(int(res[1]) / 1000)
        if int(res[0]) > 0:
            await asyncio.sleep(int(res[0]) / 1000)
        try:
            yield
        finally:
            if self.per_host:  # give the slot back; never block the worker for it
                asyncio.ensure_future(self._release(token))

    async def _release(self, token: str) -> None:
        try:
            await self._frontier._call(lambda: self._frontier.redis.zrem(self._keys[1], token))
        except Exception:  # closing: the slot's expiry frees it
            pass
