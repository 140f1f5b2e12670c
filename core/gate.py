"""Per-host politeness at fetch time, for a store without per-host queues (the Redis
store until it schedules by host; core/hosts.py is how the others do it): a cap and a gap."""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator


class HostGate:
    def __init__(self, per_host: int | None, delay: float) -> None:
        self._sem = asyncio.Semaphore(per_host) if per_host else None
        self.delay = delay
        self._next = 0.0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._sem is not None:
            await self._sem.acquire()
        try:
            if self.delay > 0:
                loop = asyncio.get_running_loop()
                now = loop.time()
                start = max(now, self._next)
                self._next = start + self.delay
                if start > now:
                    await asyncio.sleep(start - now)
            yield
        finally:
            if self._sem is not None:
                self._sem.release()
