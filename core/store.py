"""Crash-safe crawl state in one SQLite file: frontier, seen set, in-flight URLs,
records and settings.

`SqliteStore` implements the `Frontier` protocol of core/frontier.py, so workers do
not change, and its `.sink` is a `Sink` that keeps every Record.  `open_state()` is
the entry point the CLI uses: it creates or resumes a state file.

Why a writer thread
-------------------
Every write (queue an URL, mark it in flight, mark it done, keep a Record) is recorded
in an in-memory batch on the event loop, which costs a dict or list store.  The batch is
handed to one dedicated writer thread every FLUSH_INTERVAL seconds or FLUSH_OPS
operations, whichever comes first, and the thread applies it in one transaction.
A dedicated thread rather than `run_in_executor` per batch because:
- sqlite3 connections are bound to a thread, and SQLite has exactly one writer anyway,
  so one thread with one connection is the natural shape;
- batches must be applied in order, which a single FIFO thread gives for free;
- the commit (and its fsync of the WAL) runs without the GIL, off the loop.
Batches are cut only at loop-callback boundaries (`call_soon` / `call_later`), so a
group of operations made in one synchronous stretch (a worker's `write` of a Record and
its `done`) lands in the same transaction.  A batch holds each touched URL's final state
(add + pop + done of one URL is one row) and is applied as one upsert over `json_each`,
plus one insert for its records: the thread takes the GIL for a few calls per batch and
SQLite does the rows in C with the GIL released (`executemany` re-takes the GIL for every
row, which a busy event loop turns into a convoy).

With `attach_jsonl()` the JSON-lines output is written by the same thread right after
each commit, so it never runs ahead of the state; a resume copies over what a kill left
unwritten, and the file ends up equal to `crawltop export`.

Crash safety
------------
WAL mode with synchronous=NORMAL: a committed batch survives kill -9 (the WAL is in
the OS page cache; only a power cut can lose the last commits).  A kill loses at most
the batches not yet committed, i.e. the last few hundred milliseconds.  Items popped
but not finished are stored as in flight; `open` turns them back into queued items,
so they are fetched again.  Records and the `done` marks of their URLs are in the
same or consecutive batches, so a URL refetched after a kill duplicates a Record only
if that Record was committed and its `done` was not: at most one per worker.

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

Schema version SCHEMA_VERSION.  A file that is not SQLite, is corrupt, is not a
crawltop state, or has another schema version raises `StateError` and is never
written to.
"""
from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict, deque
from typing import Any, Callable, Iterator, Mapping

from core.config import CrawlConfig
from core.frontier import Item
from core.records import Record

SCHEMA_VERSION = 1
SQLITE_MAGIC = b"SQLite format 3\x00"

FLUSH_INTERVAL = 0.2  # seconds between batches
FLUSH_OPS = 2000  # or this many operations, whichever comes first
MAX_BACKLOG = 16  # batches handed to the writer but not committed; pop() waits above it
MEM_QUEUE = 10_000  # queue items kept in memory; the rest wait in SQLite
REFILL = 5_000  # items loaded per refill
CACHE = 32_768  # URLs confirmed seen, kept to skip repeated lookups

# urls.state
QUEUED, IN_FLIGHT, DONE, SEEN_ONLY = 0, 1, 2, 3

_SCHEMA = """
CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE urls(
    url TEXT PRIMARY KEY,
    state INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    redirects_left INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    tries INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX urls_queued ON urls(seq) WHERE state = 0;
CREATE TABLE records(
    id INTEGER PRIMARY KEY,
    run INTEGER NOT NULL,
    url TEXT NOT NULL,
    data TEXT NOT NULL
);
"""

# One statement per batch for all URL state changes, one for all records: the writer
# thread needs the GIL for a handful of calls per batch, not per row, and SQLite does
# the rows in C with the GIL released (executemany re-takes it for every row, which a
# busy event loop makes slow). Each batch row is the URL's final state in that batch;
# seq -1 means "keep the stored queue position" (pop, done).
_UPSERT = """
INSERT INTO urls(url, state, seq, redirects_left, depth, tries)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]')
FROM json_each(?) WHERE 1
ON CONFLICT(url) DO UPDATE SET
    state = excluded.state,
    seq = iif(excluded.seq >= 0, excluded.seq, urls.seq),
    redirects_left = excluded.redirects_left, depth = excluded.depth, tries = excluded.tries
"""
_INSERT_RECORDS = """
INSERT INTO records(run, url, data)
SELECT ?, json_extract(value, '$.url'), value FROM json_each(?)
"""
_SQL = {"setting": "INSERT OR REPLACE INTO settings(key, value) VALUES (?, ?)"}

STATUS_RUNNING, STATUS_STOPPED, STATUS_FINISHED = "running", "stopped", "finished"


class StateError(Exception):
    """The state file cannot be used: corrupt, not ours, another version, or busy.

    The file is left untouched.  The CLI maps this to exit code 2.
    """


# -- config <-> JSON -------------------------------------------------------------

_TUPLE_FIELDS = {f.name for f in dataclasses.fields(CrawlConfig) if str(f.type).startswith("tuple")}


def config_to_json(config: CrawlConfig) -> str:
    return json.dumps(dataclasses.asdict(config), sort_keys=True)


def config_from_json(text: str) -> CrawlConfig:
    raw = json.loads(text)
    names = {f.name for f in dataclasses.fields(CrawlConfig)}
    kwargs = {k: (tuple(v) if k in _TUPLE_FIELDS and v is not None else v) for k, v in raw.items() if k in names}
    return CrawlConfig(**kwargs)


# -- Bloom filter ------------------------------------------------------------------


class _Bloom:
    """A scalable, blocked Bloom filter over Python's str hash (stable within one process;
    the filter is rebuilt at every open).  Each URL sets 4 bits of one 64-bit word, so a
    probe is one word read; 16 bits per URL gives ~0.1-0.5% false positives, each of which
    costs one primary-key lookup, never a wrong answer.  When full, a filter twice the
    size is added; lookups probe each filter."""

    BITS_PER_ITEM = 16

    def __init__(self, capacity: int) -> None:
        self._filters: list[tuple[memoryview, int]] = []
        self._capacity = 0
        self._count = 0
        self._slab = 1 << 16
        while self._slab < capacity:
            self._slab <<= 1
        self._grow()

    def _grow(self) -> None:
        words = self._slab * self.BITS_PER_ITEM // 64  # a power of two: indexes are masked
        self._filters.append((memoryview(bytearray(words * 8)).cast("Q"), words - 1))
        self._words, self._mask = self._filters[-1]
        self._capacity += self._slab
        self._slab <<= 1

    def __contains__(self, url: str) -> bool:
        h = hash(url)
        g = h >> 40
        wm = (1 << (g & 63)) | (1 << (g >> 6 & 63)) | (1 << (g >> 12 & 63)) | (1 << (g >> 18 & 63))
        for words, mask in self._filters:
            if words[h & mask] & wm == wm:
                return True
        return False

    def check_add(self, url: str) -> bool:
        """True if url may be present (nothing changes); else add it and return False."""
        h = hash(url)
        g = h >> 40
        wm = (1 << (g & 63)) | (1 << (g >> 6 & 63)) | (1 << (g >> 12 & 63)) | (1 << (g >> 18 & 63))
        words, mask = self._words, self._mask
        w = h & mask
        if words[w] & wm == wm:
            return True
        if len(self._filters) > 1:
            for older, omask in self._filters[:-1]:
                if older[h & omask] & wm == wm:
                    return True
        if self._count >= self._capacity:
            self._grow()
            words, mask = self._words, self._mask
            w = h & mask
        self._count += 1
        words[w] |= wm
        return False

    def add(self, url: str) -> None:
        self.check_add(url)

    @property
    def nbytes(self) -> int:
        return sum(len(b) * 8 for b, _ in self._filters)


# -- validation ----------------------------------------------------------------------


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    return conn


def _has_tables(conn: sqlite3.Connection, path: str) -> bool:
    try:
        return conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
    except sqlite3.DatabaseError as exc:
        raise StateError(f"{path}: corrupt state file ({exc})") from exc


def _read_settings(conn: sqlite3.Connection, path: str) -> dict[str, Any]:
    """The settings of an existing file, or StateError. Reads only."""
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "settings" not in tables:
            raise StateError(f"{path}: not a crawltop state file (no settings table)")
        settings = {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM settings")}
    except sqlite3.DatabaseError as exc:
        raise StateError(f"{path}: corrupt state file ({exc})") from exc
    except ValueError as exc:
        raise StateError(f"{path}: corrupt state file (bad settings: {exc})") from exc
    version = settings.get("schema")
    if version != SCHEMA_VERSION:
        raise StateError(
            f"{path}: state file has schema version {version!r}; this crawltop reads version {SCHEMA_VERSION}"
        )
    missing = {"urls", "records"} - tables
    if missing:
        raise StateError(f"{path}: corrupt state file (missing tables: {', '.join(sorted(missing))})")
    return settings


def _check_header(path: str) -> bool:
    """True if path holds a database (False: missing or empty, i.e. a new state)."""
    if not os.path.exists(path):
        return False
    if os.path.isdir(path):
        raise StateError(f"{path}: is a directory, not a state file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StateError(f"{path}: cannot read state file ({exc})") from exc
    if not head:
        return False
    if head != SQLITE_MAGIC:
        raise StateError(f"{path}: not a crawltop state file (not an SQLite database)")
    return True


def read_state(path: str) -> tuple[dict[str, Any], sqlite3.Connection]:
    """Open an existing state file for reading (export, inspection). StateError if unusable."""
    if not _check_header(path):
        raise StateError(f"{path}: no such state file")
    conn = _connect(path)
    try:
        settings = _read_settings(conn, path)
    except BaseException:
        conn.close()
        raise
    return settings, conn


# -- the store -------------------------------------------------------------------------


class RecordSink:
    """The store seen as a Sink: write() keeps the Record, close() only flushes
    (the store itself is closed by its owner, after the session is saved)."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def write(self, record: Record) -> None:
        self._store.write(record)

    def close(self) -> None:
        self._store.flush()


class SqliteStore:
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

        # Frontier state (loop thread only).
        self._mem: deque[Item] = deque()
        self._spilled = 0  # queued items only in SQLite, all after the ones in _mem
        self._mem_hi = 0  # highest seq ever put in _mem
        self._seq = 0
        self._unfinished = 0
        self._skip_done: dict[str, int] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._joined: asyncio.Event | None = None
        self._refill_task: asyncio.Future[list[tuple]] | None = None
        self._seen_total = 0
        self._bloom = _Bloom(1)
        self._cache: OrderedDict[str, None] = OrderedDict()

        # Batching.
        self._rows: dict[str, tuple] = {}  # url -> (url, state, seq, redirects_left, depth, tries)
        self._recs: list[Record] = []
        self._sets: list[tuple[str, str]] = []
        self._nops = 0
        self._uncommitted: deque[dict[str, tuple]] = deque()  # writer pops after commit
        self._timer: asyncio.TimerHandle | None = None
        self._flush_soon = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cmds: "deque[Any]" = deque()
        self._cmd_ready = threading.Condition()
        self._writer: threading.Thread | None = None
        self._rconn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None

    # ---------------------------------------------------------------- open / close

    @classmethod
    def open(cls, path: str, *, create: bool = True, settings: Mapping[str, Any] | None = None) -> SqliteStore:
        """Open (resume) or create a state file. `settings` are written with the schema,
        in the same transaction, when the file is new (so a kill can't leave half a file)."""
        path = os.fspath(path)
        exists = _check_header(path)
        if not exists and not create:
            raise StateError(f"{path}: no such state file")
        store = cls(path, _internal=True)
        conn = _connect(path)
        try:
            if exists and not _has_tables(conn, path):
                exists = False  # an empty database (killed while being created): nothing to lose
            if not exists and not create:
                raise StateError(f"{path}: no such state file")
            if exists:
                store.settings = _read_settings(conn, path)
            store._lock(path)
            store._setup(conn, exists, settings or {})
        except BaseException:
            conn.close()
            store._unlock()
            raise
        conn.close()
        store._rconn = _connect(path)
        store._rconn.execute("PRAGMA cache_size = -8000")
        store._writer = threading.Thread(target=store._writer_main, name="crawltop-store", daemon=True)
        store._writer.start()
        return store

    def _lock(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StateError(f"{path}: cannot open state file ({exc})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StateError(f"{path}: state file is in use by another crawltop process") from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _setup(self, conn: sqlite3.Connection, exists: bool, settings: Mapping[str, Any]) -> None:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            if not exists:
                self.settings = {"schema": SCHEMA_VERSION, "runs": 1, "created": time.time(),
                                 "status": STATUS_RUNNING, **settings}
                conn.execute("BEGIN")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.executemany(_SQL["setting"], [(k, json.dumps(v)) for k, v in self.settings.items()])
                conn.execute("COMMIT")
                self.run = 1
                return
            self.resumed = True
            self.run = int(self.settings.get("runs", 0)) + 1
            conn.execute("BEGIN")
            self.recovered_in_flight = conn.execute(
                "UPDATE urls SET state = 0 WHERE state = 1"
            ).rowcount
            conn.execute(_SQL["setting"], ("runs", json.dumps(self.run)))
            conn.execute("COMMIT")
            self.settings["runs"] = self.run
            self.resumed_records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
            self._seq = conn.execute("SELECT coalesce(max(seq), 0) FROM urls").fetchone()[0]
            queued = conn.execute("SELECT count(*) FROM urls WHERE state = 0").fetchone()[0]
            self._spilled = queued
            self._unfinished = queued
            total = conn.execute("SELECT count(*) FROM urls").fetchone()[0]
            self._bloom = _Bloom(total * 2)
            for (url,) in conn.execute("SELECT url FROM urls"):
                self._bloom.add(url)
            self._seen_total = total
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{self.path}: corrupt state file ({exc})") from exc

    def close(self) -> None:
        """Flush everything, stop the writer thread and release the file. Idempotent."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._submit(None)
            if self._writer is not None:
                self._writer.join()
            if self._jsonl is not None:
                self._jsonl.close()
            if self._rconn is not None:
                self._rconn.close()
            self._unlock()
        if self._error is not None:
            raise StateError(f"{self.path}: writing the state failed: {self._error}") from self._error

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        self._sets.append((key, json.dumps(value)))
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

    def _flush(self) -> None:
        """Hand the current batch to the writer thread (never blocks)."""
        self._flush_soon = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._nops:
            return
        batch = (self._rows, self._recs, self._sets)
        self._uncommitted.append(self._rows)
        self._rows, self._recs, self._sets, self._nops = {}, [], [], 0
        self._submit(("batch", batch))

    def _submit(self, cmd: Any) -> None:
        with self._cmd_ready:
            self._cmds.append(cmd)
            self._cmd_ready.notify()

    def flush(self) -> None:
        """Commit everything so far, waiting for the writer (blocks: not for the loop)."""
        if self._closed:
            return
        self._flush()
        done = threading.Event()
        self._submit(("sync", done.set))
        done.wait()
        self._raise_if_failed()

    async def aflush(self) -> None:
        """Commit everything so far without blocking the loop."""
        self._flush()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(None))
            except RuntimeError:
                pass

        self._submit(("sync", wake))
        await fut
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise StateError(f"{self.path}: writing the state failed: {self._error}") from self._error

    # ---------------------------------------------------------------- writer thread

    def _writer_main(self) -> None:
        conn = _connect(self.path)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA cache_size = -8000")
        try:
            while True:
                with self._cmd_ready:
                    while not self._cmds:
                        self._cmd_ready.wait()
                    cmd = self._cmds.popleft()
                if cmd is None:
                    return
                kind = cmd[0]
                if kind == "batch":
                    try:
                        if self._error is None:
                            self._apply(conn, cmd[1])
                    except BaseException as exc:  # disk full, I/O error: surfaced by flush/close
                        self._error = exc
                        if self.on_error is not None:  # and at once to the crawl, which stops
                            self.on_error(exc)
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                    finally:
                        self._uncommitted.popleft()
                elif kind == "sync":
                    cmd[1]()
                elif kind == "refill":
                    _, after, limit, deliver = cmd
                    try:
                        rows = conn.execute(
                            "SELECT url, redirects_left, depth, tries, seq FROM urls"
                            " WHERE state = 0 AND seq > ? ORDER BY seq LIMIT ?",
                            (after, limit),
                        ).fetchall()
                    except BaseException as exc:
                        self._error = exc
                        rows = []
                    deliver(rows)
        finally:
            conn.close()

    def _apply(self, conn: sqlite3.Connection, batch: tuple) -> None:
        rows, recs, sets = batch
        rows_json = json.dumps(list(rows.values()), ensure_ascii=False, separators=(",", ":")) if rows else None
        lines = [r.to_json() for r in recs]
        recs_json = "[" + ",".join(lines) + "]" if lines else None
        conn.execute("BEGIN")
        if rows_json:
            conn.execute(_UPSERT, (rows_json,))
        if recs_json:
            conn.execute(_INSERT_RECORDS, (self.run, recs_json))
        if sets:
            conn.executemany(_SQL["setting"], sets)
        conn.execute("COMMIT")
        if lines and self._jsonl is not None:  # after the commit: the JSONL never runs ahead
            self._jsonl.write("\n".join(lines) + "\n")
            self._jsonl.flush()

    def attach_jsonl(self, path: str) -> None:
        """Stream this state's records to a JSON-lines file, written by the writer thread
        right after each commit, so the file never holds a record the state lacks.

        Call it right after opening, before any record is written.  A new state starts
        the file afresh.  On a resume the file is continued: a partial last line (a kill
        mid-write) is cut, and the records committed but not yet written out when the
        last run died are copied from the state first, so the file equals `export`.
        """
        self.flush()
        if not self.resumed or not os.path.exists(path):
            self._jsonl = open(path, "w", encoding="utf-8")
            if self.resumed:  # the file is gone: rewrite it from the state
                self._copy_records_to_jsonl(0)
            return
        have, good = _count_lines(path)
        with open(path, "r+b") as fh:
            fh.truncate(good)
        self._jsonl = open(path, "a", encoding="utf-8")
        self._copy_records_to_jsonl(have)

    def _copy_records_to_jsonl(self, after_id: int) -> None:
        assert self._rconn is not None and self._jsonl is not None
        cur = self._rconn.execute("SELECT data FROM records WHERE id > ? ORDER BY id", (after_id,))
        while rows := cur.fetchmany(1000):
            self._jsonl.write("".join(data + "\n" for (data,) in rows))
            self.jsonl_caught_up += len(rows)
        self._jsonl.flush()

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
        self._rows[item.url] = (item.url, state, seq, item.redirects_left, item.depth, item.tries)
        self._touch()

    def _enqueue(self, item: Item, seq: int) -> None:
        if self._spilled == 0 and len(self._mem) < MEM_QUEUE:
            self._mem.append(item)
            self._mem_hi = seq
        else:
            self._spilled += 1
        self._unfinished += 1
        if self._joined is not None:
            self._joined.clear()
        self._wakeup()

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
        self._seq += 1
        seq = self._seq
        self._rows[item.url] = (item.url, QUEUED, seq, item.redirects_left, item.depth, item.tries)
        self._touch()
        self._enqueue(item, seq)
        return True

    def requeue(self, item: Item) -> None:
        self._new(item.url)
        self._seq += 1
        self._state(item, QUEUED, self._seq)
        self._skip_done[item.url] = self._skip_done.get(item.url, 0) + 1
        self._enqueue(item, self._seq)

    def seen(self, url: str) -> bool:
        return self._is_seen(url)

    def mark_seen(self, url: str) -> bool:
        if not self._new(url):
            return False
        self._rows[url] = (url, SEEN_ONLY, 0, 0, 0, 0)
        self._touch()
        return True

    def _wakeup(self) -> None:
        while self._getters:
            g = self._getters.popleft()
            if not g.done():
                g.set_result(None)
                break

    def _has_items(self) -> bool:
        return bool(self._mem) or self._spilled > 0

    async def pop(self) -> Item:
        loop = asyncio.get_running_loop()
        while len(self._uncommitted) > MAX_BACKLOG:  # the writer is behind: let it catch up
            await asyncio.sleep(0.005)
        while True:
            if self._mem:
                item = self._mem.popleft()
                self._state(item, IN_FLIGHT)
                if self._spilled and len(self._mem) < REFILL // 2 and self._refill_task is None:
                    self._start_refill(loop)
                return item
            if self._spilled:
                if self._refill_task is None:
                    self._start_refill(loop)
                assert self._refill_task is not None
                await asyncio.shield(self._refill_task)
                continue
            getter = loop.create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                try:
                    self._getters.remove(getter)
                except ValueError:
                    pass
                if self._has_items() and not getter.cancelled():
                    self._wakeup()
                raise

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
        for url, redirects_left, depth, tries, seq in rows:
            self._mem.append(Item(url, redirects_left, depth, tries))
            self._mem_hi = seq
        self._spilled -= len(rows)
        if not rows and self._spilled:
            # Nothing came back although we counted spilled items: only if a write failed.
            self._spilled = 0
        if not fut.done():
            fut.set_result(rows)
        for _ in range(min(len(rows), len(self._getters))):
            self._wakeup()

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
        return len(self._mem) + self._spilled

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
        return self._bloom.nbytes + 200 * (len(self._mem) + len(self._cache) + self._nops)


def _count_lines(path: str) -> tuple[int, int]:
    """Complete lines in a file and the offset just past the last one."""
    lines = good = offset = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            n = chunk.count(b"\n")
            if n:
                lines += n
                good = offset + chunk.rindex(b"\n") + 1
            offset += len(chunk)
    return lines, good


def iter_records(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    cur = conn.execute("SELECT run, data FROM records ORDER BY id")
    while True:
        rows = cur.fetchmany(1000)
        if not rows:
            return
        for run, data in rows:
            rec = json.loads(data)
            rec["run"] = run
            yield rec


def open_state(
    path: str,
    config: CrawlConfig | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    resume_only: bool = False,
) -> tuple[CrawlConfig, SqliteStore]:
    """Create or resume the crawl state at `path`.

    - New file (missing or empty): `config` is required; it is saved with `overrides` applied.
    - Existing file: the saved config, then the concurrency and paused flag saved at the
      last stop (`start_paused`), then `overrides` (only what the user set explicitly on
      the command line) win.  `config` is ignored, except that its roots are added to
      the saved ones when they differ (the caller adds them; already-seen roots are no-ops).
    - `resume_only`: a missing file is an error rather than a new crawl.

    Returns the effective config and the open store.  Check `store.finished` (nothing
    to do), `store.resumed` and `store.resumed_records`.  Raises StateError.
    """
    overrides = dict(overrides or {})
    if config is not None and overrides:
        config = dataclasses.replace(config, **overrides)
    initial = {"config": config_to_json(config)} if config is not None else None
    store = SqliteStore.open(path, create=not resume_only and config is not None, settings=initial)
    try:
        if store.resumed:
            saved = store.config
            if saved is None:
                raise StateError(f"{path}: corrupt state file (no saved config)")
            session: dict[str, Any] = {}
            if "concurrency" in store.settings:
                session["concurrency"] = int(store.settings["concurrency"])
            if "paused" in store.settings:
                session["start_paused"] = bool(store.settings["paused"])
            if config is not None and "roots" not in overrides:
                extra = tuple(r for r in config.roots if r not in saved.roots)
                if extra:
                    session["roots"] = saved.roots + extra
            effective = dataclasses.replace(saved, **{**session, **overrides})
        else:
            assert config is not None
            effective = config
        if not store.finished:
            store.save_config(effective)
            store.set_setting("status", STATUS_RUNNING)
            store.flush()
    except BaseException:
        store.close()
        raise
    return effective, store
