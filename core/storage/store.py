"""Crash-safe crawl state in one SQLite file: frontier, seen set, in-flight URLs, records and settings.

`SqliteStore` is the `Frontier` on disk (bounded memory: its docstring); `open_state()`
(core/storage/open_state.py) creates or resumes one. The other parts of core/storage/: ARCHITECTURE.md.
"""
from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Self

from ..config import CrawlConfig
from ..errors import StateError
from ..output.provenance import intern_path
from ..output.records import Record
from ..queueing.frontier import DueWaiters, split_by
from ..queueing.hosts import PAGES, Host, Hosts
from ..queueing.item import Item
from .bloom import BloomFilter
from .schema import (
    DONE,
    IN_FLIGHT,
    QUEUED,
    SCHEMA_VERSION,
    SEEN_ONLY,
    STATUS_FINISHED,
    STATUS_RUNNING,
    STATUS_STOPPED,
    config_from_json,
    config_to_json,
    iter_records,
    read_state,
)
from .state_file import StateFile
from .writer import Batch, QueuedRow, StoreWriter, _resolve

# Re-exported: core/storage/store.py is where the CLI, export and tests import them from.
__all__ = [
    "SCHEMA_VERSION", "STATUS_FINISHED", "STATUS_RUNNING", "STATUS_STOPPED", "RecordSink", "SqliteStore",
    "iter_records", "read_state",
]

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


class SqliteStore(DueWaiters):
    """A persistent Frontier and record store. Create it with `open_state()` or
    `SqliteStore.open()`; all methods are called from the event loop's thread.

    This module is the frontier and seen set, and when a batch is cut; its `.sink` keeps every Record.

    Bounded memory: the frontier lives on disk. Memory holds at most MEM_QUEUE items of the
    queue head (refilled from SQLite by the writer thread, in queue order), a blocked Bloom
    filter of the seen set (core/storage/bloom.py; 16 bits per URL, sized in powers of two:
    4 MB for a million URLs), a bounded cache of URLs confirmed seen, and the batches not yet
    committed. `seen(url)` is exact: a URL the Bloom filter has never seen is new (no I/O);
    otherwise the pending batches, the cache and finally one primary-key lookup on a read
    connection answer (a point read, almost always in the page cache, and only for URLs very
    probably seen before).
    """

    persistent: bool = True

    def __init__(self, path: str, *, _internal: bool = False) -> None:
        if not _internal:
            raise TypeError("use SqliteStore.open(path) or open_state(...)")
        self._file = StateFile(path)
        # _apply looked up on each batch, not bound now: the seam a test replaces.
        self._writer = StoreWriter(self._file, apply=lambda conn, batch: self._apply(conn, batch))
        self.records_written = 0
        self._closed = False

        # Frontier state (loop thread only). The queue head in memory is per-host
        # queues (core/queueing/hosts.py); host states are kept in the hosts table for resume.
        self.hosts = Hosts()
        self.hosts.changed = self._host_changed
        self._dirty_hosts: dict[str, Host] = {}
        self._waiters_init()
        self._spilled = 0  # queued items only in SQLite, all after the ones in memory
        self._mem_hi = 0  # highest seq ever put in memory
        self._seq = 0
        self._unfinished = 0
        self._skip_done: dict[str, int] = {}
        self._joined: asyncio.Event | None = None
        self._refill_task: asyncio.Future[list[QueuedRow]] | None = None
        self._removed: set[str] = set()  # taken off the queue while a refill may still bring them
        self._seen_total = 0
        self._bloom = BloomFilter(1)
        self._cache: OrderedDict[str, None] = OrderedDict()

        # When the current batch is handed to the writer.
        self._flush_timer: asyncio.TimerHandle | None = None
        self._flush_soon = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---------------------------------------------------------------- open / close

    @classmethod
    def open(cls, path: str, *, create: bool = True, settings: Mapping[str, Any] | None = None) -> Self:
        """Open (resume) or create a state file. `settings` are written with the schema,
        in the same transaction, when the file is new (so a kill can't leave half a file)."""
        store = cls(os.fspath(path), _internal=True)
        store._file.open(create=create, settings=settings or {}, load=store._load)
        store._writer.start()
        return store

    def _load(self, conn: sqlite3.Connection) -> None:
        """A resumed file's frontier: host states, queue, seen set (errors: corrupt file)."""
        offset = time.time() - time.monotonic()
        for key, data in conn.execute("SELECT key, data FROM hosts"):
            try:
                saved = json.loads(data)
            except ValueError:
                continue  # one bad row costs that host its history, not the resume
            if isinstance(saved, dict):
                self.hosts.restore(key, saved, offset)
        self._seq = conn.execute("SELECT coalesce(max(seq), 0) FROM urls").fetchone()[0]
        queued = conn.execute("SELECT count(*) FROM urls WHERE state = 0").fetchone()[0]
        self._spilled = queued
        self._unfinished = queued
        total = conn.execute("SELECT count(*) FROM urls").fetchone()[0]
        self._bloom = BloomFilter(total * 2)
        for (url,) in conn.execute("SELECT url FROM urls"):
            self._bloom.add(url)
        self._seen_total = total

    def close(self) -> None:
        """Flush everything, stop the writer thread and release the file. Idempotent."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            if self._flush_timer is not None:
                self._flush_timer.cancel()
                self._flush_timer = None
            self._writer.stop()
            self._file.close()
        self._raise_if_failed()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unlock(self) -> None:
        self._file.unlock()

    # ---------------------------------------------------------------- what the open found

    @property
    def path(self) -> str:
        return self._file.path

    @property
    def settings(self) -> dict[str, Any]:
        return self._file.settings

    @property
    def run(self) -> int:
        return self._file.run

    @property
    def resumed(self) -> bool:
        """The file held a crawl before this open."""
        return self._file.resumed

    @property
    def resumed_records(self) -> int:
        """Records carried over from earlier runs."""
        return self._file.resumed_records

    @property
    def recovered_in_flight(self) -> int:
        """In-flight URLs turned back into queued ones at open."""
        return self._file.recovered_in_flight

    @property
    def _rconn(self) -> sqlite3.Connection | None:
        return self._file.rconn

    # ---------------------------------------------------------------- settings

    @property
    def status(self) -> str:
        """running (or killed while running), stopped (clean stop) or finished."""
        return str(self.settings.get("status", STATUS_RUNNING))

    @property
    def finished(self) -> bool:
        return self.status == STATUS_FINISHED

    @property
    def config(self) -> CrawlConfig | None:
        raw = self.settings.get("config")
        return config_from_json(raw) if raw else None

    def set_setting(self, key: str, value: Any) -> None:
        self.settings[key] = value
        self._writer.sets.append((key, json.dumps(value)))
        self._touch()

    def save_config(self, config: CrawlConfig) -> None:
        self.set_setting("config", config_to_json(config))

    def save_session(self, *, status: str, paused: bool | None = None, concurrency: int | None = None) -> None:
        """At the end of a run: how it ended, and the paused flag and concurrency to resume with."""
        if paused is not None:
            self.set_setting("paused", bool(paused))
        if concurrency is not None:
            self.set_setting("concurrency", int(concurrency))
        self.set_setting("status", status)

    # ---------------------------------------------------------------- batching

    def _touch(self) -> None:
        """One more operation in the current batch: make sure it gets flushed."""
        w = self._writer
        w.nops += 1
        if self._flush_timer is not None and w.nops < FLUSH_OPS:
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
            if w.nops >= FLUSH_OPS:
                self._flush()
            return
        if w.nops >= FLUSH_OPS:
            if not self._flush_soon:
                self._flush_soon = True
                if self._flush_timer is not None:
                    self._flush_timer.cancel()
                    self._flush_timer = None
                loop.call_soon(self._flush)
        elif self._flush_timer is None and not self._flush_soon:
            self._flush_timer = loop.call_later(FLUSH_INTERVAL, self._flush)

    def _flush(self) -> None:
        """Hand the current batch to the writer thread (never blocks)."""
        self._flush_soon = False
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if not self._writer.nops:
            return
        hosts: list[tuple[str, str | None]] = []
        if self._dirty_hosts:  # host states as they are now (one row per host per batch)
            offset = time.time() - time.monotonic()
            for key, h in self._dirty_hosts.items():
                saved = self.hosts.saved(h, offset)
                hosts.append((key, json.dumps(saved, separators=(",", ":")) if saved else None))
            self._dirty_hosts = {}
        self._writer.hand_over(hosts)

    def _submit(self, cmd: Any) -> None:
        self._writer.submit(cmd)

    def _apply(self, conn: sqlite3.Connection, batch: Batch) -> None:
        self._writer.apply(conn, batch)

    def flush(self) -> None:
        """Commit everything so far, waiting for the writer (blocks: not for the loop)."""
        if self._closed:
            return
        self._flush()
        self._writer.sync()
        self._raise_if_failed()

    async def aflush(self) -> None:
        """Commit everything so far without blocking the loop."""
        self._flush()
        await self._writer.async_sync()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        error = self._writer.error
        if error is not None:
            raise StateError(f"{self.path}: writing the state failed: {error}") from error

    @property
    def on_error(self) -> Callable[[BaseException], None] | None:
        """Called from the writer thread on the first failed write; must be thread-safe."""
        return self._writer.on_error

    @on_error.setter
    def on_error(self, callback: Callable[[BaseException], None] | None) -> None:
        self._writer.on_error = callback

    def attach_jsonl(self, path: str) -> None:
        """Stream this state's records to a JSON-lines file, written by the writer thread
        right after each commit, so the file never holds a record the state lacks.

        Call it right after opening, before any record is written.  A new state starts
        the file afresh.  On a resume the file is continued: a partial last line (a kill
        mid-write) is cut, and the records committed but not yet written out when the
        last run died are copied from the state first, so the file equals `export`.
        """
        self.flush()
        self._writer.attach_jsonl(path)

    @property
    def jsonl_caught_up(self) -> int:
        """Records copied from the state into the JSONL at attach."""
        return self._writer.jsonl_caught_up

    # ---------------------------------------------------------------- Sink

    @property
    def sink(self) -> RecordSink:
        return RecordSink(self)

    def write(self, record: Record) -> None:
        self.records_written += 1
        self._writer.recs.append(record)
        self._touch()

    # ---------------------------------------------------------------- Frontier

    def _is_seen(self, url: str) -> bool:
        if url in self._writer.rows:
            return True
        if url not in self._bloom:
            return False
        return self._confirm_seen(url)

    def _confirm_seen(self, url: str) -> bool:
        """The Bloom filter says maybe: ask the cache, the pending batches, then SQLite."""
        if url in self._writer.rows:
            return True
        if url in self._cache:
            return True
        if self._writer.pending(url):
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
            prev = self._writer.rows.get(item.url)
            if prev is not None:
                seq = prev[2]
        self._writer.rows[item.url] = (item.url, state, seq, item.redirects_left, item.depth, item.tries,
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
        if url in self._writer.rows:
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
                self._writer.rows[item.url] = (item.url, SEEN_ONLY, 0, 0, 0, 0, None, "")
                self._touch()
                return False
        self._seq += 1
        seq = self._seq
        self._writer.rows[item.url] = (item.url, QUEUED, seq, item.redirects_left, item.depth, item.tries,
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
            self.hosts.defer(item, self.clock() + after)
            self._unfinished += 1
            if self._joined is not None:
                self._joined.clear()
        else:
            self._enqueue(item, -1, front=True)

    def seen(self, url: str) -> bool:
        return self._is_seen(url)

    def split_seen(self, urls: list[str]) -> tuple[list[str], list[str]]:
        return split_by(urls, self._is_seen)  # one `_is_seen` a URL: it may read the file

    def mark_seen(self, url: str) -> bool:
        if not self._new(url):
            return False
        self._writer.rows[url] = (url, SEEN_ONLY, 0, 0, 0, 0, None, "")
        self._touch()
        return True

    async def claim(self, url: str) -> bool:
        """One process holds the file (its lock): mark_seen is exact already."""
        return self.mark_seen(url)

    def _has_items(self) -> bool:
        return bool(self.hosts.size) or self._spilled > 0

    async def pop(self, lane: int = PAGES) -> Item:
        loop = asyncio.get_running_loop()
        while len(self._writer.uncommitted) > MAX_BACKLOG:  # the writer is behind: let it catch up
            await asyncio.sleep(0.005)
        while True:
            item = self._take(lane)
            if item is not None:
                self._state(item, IN_FLIGHT)
                if self._spilled and self.hosts.size < REFILL // 2 and self._refill_task is None:
                    self._start_refill(loop)
                return item
            # Nothing in memory is due: read further, other hosts may be; past the cap (up to twice
            # it) when this lane has nothing due in memory at all (memory full of checks, the pages
            # on disk), so a page worker never waits for the check workers to drain it.
            if self._spilled and (self.hosts.size < MEM_QUEUE_MAX or (
                    self.hosts.size < 2 * MEM_QUEUE_MAX and self.hosts.next_wake(lane) is None)):
                # Nothing in memory is due: read further, other hosts may be.
                if self._refill_task is None:
                    self._start_refill(loop)
                assert self._refill_task is not None
                await asyncio.shield(self._refill_task)
                continue
            await self._wait_due(loop, lane)

    def _start_refill(self, loop: asyncio.AbstractEventLoop) -> None:
        self._flush()  # the spilled items may still be in the current batch
        fut: asyncio.Future[list[QueuedRow]] = loop.create_future()
        self._refill_task = fut

        def deliver(rows: list[QueuedRow]) -> None:
            try:
                loop.call_soon_threadsafe(self._refilled, fut, rows)
            except RuntimeError:  # loop closed
                pass

        self._writer.refill(self._mem_hi, REFILL, deliver)

    def _refilled(self, fut: asyncio.Future[list[QueuedRow]], rows: list[QueuedRow]) -> None:
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
        fut: asyncio.Future[list[QueuedRow]] = loop.create_future()

        def deliver(rows: list[QueuedRow]) -> None:
            try:
                loop.call_soon_threadsafe(_resolve, fut, rows)
            except RuntimeError:  # loop closed
                pass

        self._writer.scan(predicate, deliver)
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
        return self._bloom.nbytes + 200 * (self.hosts.size + len(self._cache) + self._writer.nops)
