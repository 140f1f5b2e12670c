"""The frontier: what is queued and what was ever seen.

Workers only see this small interface, so a SQLite store (crash-safe resume) or a
Redis store (many machines) can stand in for the in-memory one without touching them.
"""
from __future__ import annotations

import asyncio
from collections import deque
from itertools import islice
from typing import Callable, NamedTuple, Protocol


class Item(NamedTuple):
    url: str
    redirects_left: int
    depth: int
    tries: int = 0  # tries already spent (a cancelled worker's URL comes back with +1)
    # Provenance (core/provenance.py): the parent's own URL string (shared, not copied)
    # and an interned hop path. Defaults keep old 4-field items valid.
    via: str | None = None
    discovery: str = ""


class Frontier(Protocol):
    def add(self, item: Item) -> bool:
        """Queue a URL never seen before; False (and nothing queued) if it was seen."""
    def requeue(self, item: Item) -> None:
        """Put back a URL that was taken but not finished (cancelled worker)."""
    async def pop(self) -> Item: ...
    def done(self, item: Item) -> None:
        """The item's Record is written; join() counts it finished."""
    def seen(self, url: str) -> bool: ...
    def mark_seen(self, url: str) -> bool:
        """Mark seen without queueing (e.g. a URL we record but never fetch)."""
    async def join(self) -> None: ...
    def drain(self) -> list[Item]:
        """Take every queued item at stop. A persistent store returns [] and keeps them."""
    async def remove_matching(self, predicate: Callable[[str], bool]) -> list[Item]:
        """Take every queued (not in flight) item whose URL satisfies `predicate` off the
        queue and return them (live ignores). They stay seen and stay unfinished: the
        caller writes each one's Record and then calls done(item), as for a popped item.
        Async because a store may have to scan rows on disk or on a server; it must not
        block the loop meanwhile. Order of the remaining items is kept."""
    def peek(self, n: int) -> list[Item]:
        """Up to n items that pop() would give next, without taking them (the queue view).
        Cheap: a store reads only its head."""
    @property
    def size(self) -> int: ...
    @property
    def seen_count(self) -> int: ...


class _Queue(asyncio.Queue[Item]):
    """asyncio.Queue with a filter: subclasses own `self._queue` (as LifoQueue does)."""

    _queue: deque[Item]

    def remove_if(self, predicate: Callable[[str], bool]) -> list[Item]:
        kept: deque[Item] = deque()
        removed: list[Item] = []
        for item in self._queue:
            (removed if predicate(item.url) else kept).append(item)
        if removed:
            self._queue = kept
        return removed


class MemoryFrontier:
    """asyncio.Queue plus a set: the chapter's design, the default store."""

    def __init__(self) -> None:
        self._queue = _Queue()
        self._seen: set[str] = set()

    def add(self, item: Item) -> bool:
        if item.url in self._seen:
            return False
        self._seen.add(item.url)
        self._queue.put_nowait(item)
        return True

    def requeue(self, item: Item) -> None:
        self._queue.put_nowait(item)

    async def pop(self) -> Item:
        return await self._queue.get()

    def done(self, item: Item) -> None:
        self._queue.task_done()

    def seen(self, url: str) -> bool:
        return url in self._seen

    def mark_seen(self, url: str) -> bool:
        if url in self._seen:
            return False
        self._seen.add(url)
        return True

    async def join(self) -> None:
        await self._queue.join()

    def drain(self) -> list[Item]:
        items = []
        while not self._queue.empty():
            items.append(self._queue.get_nowait())
        return items

    async def remove_matching(self, predicate: Callable[[str], bool]) -> list[Item]:
        return self._queue.remove_if(predicate)

    def peek(self, n: int) -> list[Item]:
        return list(islice(self._queue._queue, n))

    @property
    def size(self) -> int:
        return self._queue.qsize()

    @property
    def seen_count(self) -> int:
        return len(self._seen)
