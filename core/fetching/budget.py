"""How many bytes of large bodies a crawl holds at once, read or being parsed.

Why: a worker reads its whole body before the parse, and the parse of a large page holds
the event loop for half a second. Meanwhile every other worker that fetched a large page
goes on filling its chunk list: at the end of a crawl of Debian's rust-doc, six bodies
of 1-10 MB (31 MB) sat in memory at once next to the slim copy of the one being parsed,
a third of the crawl's peak RSS (docs/benchmarks/memory.md, "Peak memory on large pages",
faf4580). A body of LARGE bytes or more
first takes its size from this budget and gives it back once it is parsed; a worker that
must wait leaves its bytes in the socket (aiohttp stops reading a connection whose
buffer is full), so waiting costs no memory. Bodies under LARGE never wait.

- A body larger than the whole budget goes when nothing else holds any: alone.
- A body whose size is not known beforehand (no Content-Length, or a Content-Encoding,
  whose decoded size the header doesn't give) takes the whole budget once it has read
  LARGE bytes: a body never takes more than once, so two bodies can't wait for each other.
- Waiters go in arrival order: a large body is not overtaken forever by smaller ones.
"""
from __future__ import annotations

import asyncio
from collections import deque

LARGE = 1 << 20
LIMIT = 8 << 20


class BodyBudget:
    """Bytes of large bodies held at once (see the module docstring)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.used = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def take(self, n: int) -> int:
        """Wait until n bytes fit (or nothing is held); return what was taken, for give()."""
        n = min(n, self.limit)
        if not self._waiting and (self.used == 0 or self.used + n <= self.limit):
            self.used += n
            return n
        fut = asyncio.get_running_loop().create_future()
        entry = (n, fut)
        self._waiting.append(entry)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted as the cancel came: give it back
                self.give(n)
            else:
                self._waiting.remove(entry)
                self._wake()
            raise
        return n

    def give(self, n: int) -> None:
        """Return what take() took (0: nothing)."""
        if n:
            self.used -= n
            self._wake()

    def _wake(self) -> None:
        while self._waiting:
            n, fut = self._waiting[0]
            if self.used and self.used + n > self.limit:
                return
            self._waiting.popleft()
            if not fut.done():
                self.used += n
                fut.set_result(None)
