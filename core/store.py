"""Crash-safe crawl state in one SQLite file: frontier, seen set, in-flight URLs,
records and settings.

`SqliteStore` implements the `Frontier` protocol of core/frontier.py, so workers do
not change, and its `.sink` is a `Sink` that keeps every Record.  `open_state()` is
the entry point the CLI uses: it creates or resumes a state file.

The store is split by what each part holds: this module is the frontier and seen set;
core/store_writer.py the writer thread (why a thread, how batches are cut and applied);
core/store_open.py opening, resuming, locking, closing and settings; core/resume.py
`open_state()`;
core/state.py the file format and crash safety; core/bloom.py the Bloom filter.
Every name is still importable from here.

Bounded memory
--------------
The frontier lives on disk.  Memory holds at most MEM_QUEUE items of the queue head
(refilled from SQLite by the writer thread, in queue order), a blocked Bloom filter of
the seen set (16 bits per URL, sized in powers of two: 4 MB for a million URLs), a bounded cache of URLs
confirmed seen, and the batches not yet committed.  `seen(url)` is exact: a URL the
Bloom filter has never seen is new (no I/O); otherwise the pending batches, the cache
and finally one primary-key lookup on a read connection answer.  That lookup is a
point read of a page that is almost always in the page cache (microseconds) and only
happens for URLs that were very probably seen before.
"""
from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from typing import Any

from .bloom import BloomFilter
from .frontier import DueWaiters, Item
from .hosts import Host, Hosts
from .provenance import intern_path
from .records import Record

# Re-exported: core.store is where the CLI, export and tests import them from.
from .state import (  # noqa: F401
    _INSERT_RECORDS,
    _SCHEMA,
    _SQL,
    _TUPLE_FIELDS,
    _UPSERT,
    DONE,
    IN_FLIGHT,
    QUEUED,
    SCHEMA_VERSION,
    SEEN_ONLY,
    SQLITE_MAGIC,
    STATUS_FINISHED,
    STATUS_RUNNING,
    STATUS_STOPPED,
    StateError,
    _check_header,
    _connect,
    _has_tables,
    _read_settings,
    config_from_json,
    config_to_json,
    iter_records,
    read_state,
)
from .store_open import StoreOpen
from .store_writer import StoreWriter, _count_lines  # noqa: F401

FLUSH_INTERVAL = 0.2  # seconds between batches
FLUSH_OPS = 2000  # or this many operations, whichever comes first
MAX_BACKLOG = 16  # batches handed to the writer but not committed; pop() waits above it
MEM_QUEUE = 10_000  # queue items kept in memory; the rest wait in SQLite
MEM_QUEUE_MAX = 50_000  # while no host in memory is due, refills may go on up to this
REFILL = 5_000  # items loaded per refill
CACHE = 32_768  # URLs confirmed seen, kept to skip repeated lookups


class RecordSink:
    """The store seen as a Sink: write() keeps the Record, close() only flushes
    (the store itself is closed by its owner, after the session is saved)."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def write(self, record: Record) -> None:
        self._store.write(record)

    def close(self) -> None:
        self._store.flush()


class SqliteStore(StoreOpen, StoreWriter, DueWaiters):
    """A persistent Frontier and record store. Create it with `open_state()` or
    `SqliteStore.open()`; all methods are called from the event loop's thread."""

    persistent: bool = True

    def __init__(self, path: str, *, _internal: bool = False) -> None:
        if not _internal:
            raise TypeError("use SqliteStore.open(path) or open_state(...)")
        self.path = path
        self.resumed = False  # the file held a crawl before this open
        self.resumed_records = 0  # records carried over from earlier runs
        self.recovered_in_flight = 0  # in-flight URLs turned back into queued ones at open
        self.settings: dict[str, Any] = {}
        self.run = 1
        self.records_written = 0
        self._closed = False
        self._error: BaseException | None = None
        # Called from the writer thread on the first failed write; must be thread-safe.
        self.on_error: Callable[[BaseException], None] | None = None
        self._jsonl: Any = None  # text file the writer appends committed records to
        self.jsonl_caught_up = 0  # records copied from the state into the JSONL at attach

        # Frontier state (loop thread only). The queue head in memory is per-host
        # queues (core/hosts.py); host states are kept in the hosts table for resume.
        self.hosts = Hosts()
        self.hosts.changed = self._host_changed
        self._dirty_hosts: dict[str, Host] = {}
        self._waiters_init()
        self._spilled = 0  # queued items only in SQLite, all after the ones in _mem
        self._mem_hi = 0  # highest seq ever put in _mem
        self._seq = 0
        self._unfinished = 0
        self._skip_done: dict[str, int] = {}
        self._joined: asyncio.Event | None = None
        self._refill_task: asyncio.Future[list[tuple]] | None = None
        self._removed: set[str] = set()  # taken off the queue while a refill may still bring them
        self._seen_total = 0
        self._bloom = BloomFilter(1)
        self._cache: OrderedDict[str, None] = OrderedDict()

        # Batching.
        self._rows: dict[str, tuple] = {}  # url -> (url, state, seq, redirects_left, depth, tries, via, discovery)
        self._recs: list[Record] = []
        self._sets: list[tuple[str, str]] = []
        self._nops = 0
        self._uncommitted: deque[dict[str, tuple]] = deque()  # writer pops after commit
        self._timer: asyncio.TimerHandle | None = None
        self._flush_soon = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cmds: deque[Any] = deque()
        self._cmd_ready = threading.Condition()
        self._writer: threading.Thread | None = None
        self._rconn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None

    # ---------------------------------------------------------------- batching
    # (the hand-over to the writer thread is in core/store_writer.py; _touch stays here
    # because it reads this module's FLUSH_OPS and FLUSH_INTERVAL)

    def _touch(self) -> None:
        """One more operation in the current batch: make sure it gets flushed."""
        self._nops += 1
        if self._timer is not None and self._nops < FLUSH_OPS:
            return  # the common case: a flush is already scheduled
        if self._closed:
            raise StateError(f"{self.path}: store is closed")
        loop = self._loop
        if loop is None or loop.is_closed():
            try:
                loop = self._loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = self._loop = None
        if loop is None:
            if self._nops >= FLUSH_OPS:
                self._flush()
            return
        if self._nops >= FLUSH_OPS:
            if not self._flush_soon:
                self._flush_soon = True
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
                loop.call_soon(self._flush)
        elif self._timer is None and not self._flush_soon:
            self._timer = loop.call_later(FLUSH_INTERVAL, self._flush)


    # ---------------------------------------------------------------- Sink

    @property
    def sink(self) -> RecordSink:
        return RecordSink(self)

    def write(self, record: Record) -> None:
        self.records_written += 1
        self._recs.append(record)
        self._touch()

    # ---------------------------------------------------------------- Frontier

    def _is_seen(self, url: str) -> bool:
        if url in self._rows:
            return True
        if url not in self._bloom:
            return False
        return self._confirm_seen(url)

    def _confirm_seen(self, url: str) -> bool:
        """The Bloom filter says maybe: ask the cache, the pending batches, then SQLite."""
        if url in self._rows:
            return True
        if url in self._cache:
            return True
        for urls in tuple(self._uncommitted):
            if url in urls:
                return True
        assert self._rconn is not None
        if self._rconn.execute("SELECT 1 FROM urls WHERE url = ?", (url,)).fetchall():
            self._cache[url] = None
            if len(self._cache) > CACHE:
                self._cache.popitem(last=False)
            return True
        return False

    def _state(self, item: Item, state: int, seq: int = -1) -> None:
        if seq < 0:
            prev = self._rows.get(item.url)
            if prev is not None:
                seq = prev[2]
        self._rows[item.url] = (item.url, state, seq, item.redirects_left, item.depth, item.tries,
                               item.via, item.discovery)
        self._touch()

    def _enqueue(self, item: Item, seq: int, host: Host | None = None, front: bool = False) -> None:
        if front or (self._spilled == 0 and self.hosts.size < MEM_QUEUE):
            self.hosts.put(host or self.hosts.of(item.url), item, front)
            if not front:
                self._mem_hi = seq
        else:
            self._spilled += 1
        self._unfinished += 1
        if self._joined is not None:
            self._joined.clear()

    def _host_changed(self, h: Host) -> None:
        self._dirty_hosts[h.key] = h
        self._touch()

    def _new(self, url: str) -> bool:
        """True, and the URL is now seen, if it was never seen before."""
        if url in self._rows:
            return False
        if self._bloom.check_add(url) and self._confirm_seen(url):
            return False
        self._seen_total += 1
        return True

    def add(self, item: Item) -> bool:
        if not self._new(item.url):
            return False
        host = None
        if self.hosts.policy.budget is not None:  # else a spilled URL costs no Host until it is read back
            host = self.hosts.within_budget(item.url)
            if host is None:  # over its host's budget: seen, never queued
                self._rows[item.url] = (item.url, SEEN_ONLY, 0, 0, 0, 0, None, "")
                self._touch()
                return False
        self._seq += 1
        seq = self._seq
        self._rows[item.url] = (item.url, QUEUED, seq, item.redirects_left, item.depth, item.tries,
                               item.via, item.discovery)
        self._touch()
        self._enqueue(item, seq, host)
        return True

    def requeue(self, item: Item, after: float = 0.0) -> None:
        """First in its host's queue (or in `after` seconds), in memory; the row keeps
        its queue position (it was in memory, so at or below _mem_hi: no refill brings
        it twice)."""
        self._new(item.url)
        self._state(item, QUEUED)
        self._skip_done[item.url] = self._skip_done.get(item.url, 0) + 1
        if after > 0:
            self.hosts.defer(item, time.monotonic() + after)
            self._unfinished += 1
            if self._joined is not None:
                self._joined.clear()
        else:
            self._enqueue(item, -1, front=True)

    def seen(self, url: str) -> bool:
        return self._is_seen(url)

    def mark_seen(self, url: str) -> bool:
        if not self._new(url):
            return False
        self._rows[url] = (url, SEEN_ONLY, 0, 0, 0, 0, None, "")
        self._touch()
        return True

    def _has_items(self) -> bool:
        return bool(self.hosts.size) or self._spilled > 0

    async def pop(self) -> Item:
        loop = asyncio.get_running_loop()
        while len(self._uncommitted) > MAX_BACKLOG:  # the writer is behind: let it catch up
            await asyncio.sleep(0.005)
        while True:
            item = self._take(loop)
            if item is not None:
                self._state(item, IN_FLIGHT)
                if self._spilled and self.hosts.size < REFILL // 2 and self._refill_task is None:
                    self._start_refill(loop)
                return item
            if self._spilled and self.hosts.size < MEM_QUEUE_MAX:
                # Nothing in memory is due: read further, other hosts may be.
                if self._refill_task is None:
                    self._start_refill(loop)
                assert self._refill_task is not None
                await asyncio.shield(self._refill_task)
                continue
            await self._wait_due(loop)

    def _start_refill(self, loop: asyncio.AbstractEventLoop) -> None:
        self._flush()  # the spilled items may still be in the current batch
        fut: asyncio.Future[list[tuple]] = loop.create_future()
        self._refill_task = fut

        def deliver(rows: list[tuple]) -> None:
            try:
                loop.call_soon_threadsafe(self._refilled, fut, rows)
            except RuntimeError:  # loop closed
                pass

        self._submit(("refill", self._mem_hi, REFILL, deliver))

    def _refilled(self, fut: asyncio.Future[list[tuple]], rows: list[tuple]) -> None:
        self._refill_task = None
        removed, self._removed = self._removed, set()
        taken = 0
        for url, redirects_left, depth, tries, via, discovery, seq in rows:
            self._mem_hi = seq
            if url in removed:  # remove_matching already took it (and counted it off _spilled)
                continue
            item = Item(url, redirects_left, depth, tries, via, intern_path(discovery))
            self.hosts.put(self.hosts.of(url), item)
            taken += 1
        self._spilled -= taken
        if not rows and self._spilled:
            # Nothing came back although we counted spilled items: only if a write failed.
            self._spilled = 0
        if not fut.done():
            fut.set_result(rows)

    async def remove_matching(self, predicate: Callable[[str], bool]) -> list[Item]:
        """The queue head in memory is filtered at once; the rows only in SQLite are
        scanned by the writer thread (in queue order, after every batch handed over so
        far) and marked in flight here, as pop() does, so no refill brings them back."""
        removed = self._take_from_mem(predicate)
        if not self._spilled:
            return removed
        self._flush()  # queued rows still in the current batch must be in SQLite for the scan
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[tuple]] = loop.create_future()

        def deliver(rows: list[tuple]) -> None:
            try:
                loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(rows))
            except RuntimeError:  # loop closed
                pass

        self._submit(("scan", predicate, deliver))
        rows = await fut
        removed += self._take_from_mem(predicate)  # a refill may have landed meanwhile
        for url, redirects_left, depth, tries, via, discovery, seq in rows:
            if seq <= self._mem_hi or self._spilled <= 0:
                continue  # loaded into memory since the scan: filtered above, or popped already
            item = Item(url, redirects_left, depth, tries, via, intern_path(discovery))
            self._state(item, IN_FLIGHT)
            self._spilled -= 1
            if self._refill_task is not None:
                self._removed.add(url)
            removed.append(item)
        return removed

    def peek(self, n: int) -> list[Item]:
        return self.hosts.peek(n)

    def _take_from_mem(self, predicate: Callable[[str], bool]) -> list[Item]:
        removed = self.hosts.remove_if(predicate)
        for item in removed:
            self._state(item, IN_FLIGHT)
        return removed

    def done(self, item: Item) -> None:
        if self._unfinished <= 0:
            raise ValueError("done() called more times than there were items")
        self._unfinished -= 1
        skip = self._skip_done.get(item.url, 0)
        if skip:
            if skip == 1:
                del self._skip_done[item.url]
            else:
                self._skip_done[item.url] = skip - 1
        else:
            self._state(item, DONE)
        if self._unfinished == 0 and self._joined is not None:
            self._joined.set()

    async def join(self) -> None:
        if self._unfinished == 0:
            return
        if self._joined is None:
            self._joined = asyncio.Event()
        if self._unfinished == 0:
            self._joined.set()
        await self._joined.wait()

    def drain(self) -> list[Item]:
        """Persistent: queued items stay in the file for the next run."""
        return []

    @property
    def size(self) -> int:
        return self.hosts.size + self._spilled

    @property
    def seen_count(self) -> int:
        return self._seen_total

    @property
    def unfinished(self) -> int:
        return self._unfinished

    # ---------------------------------------------------------------- reading back

    def records(self) -> Iterator[dict[str, Any]]:
        """Every committed Record, oldest first (call flush() first for the latest)."""
        assert self._rconn is not None
        yield from iter_records(self._rconn)

    def memory_bytes(self) -> int:
        """Rough size of what the store keeps in memory (for benchmarks)."""
        return self._bloom.nbytes + 200 * (self.hosts.size + len(self._cache) + self._nops)
