"""The writer thread of a SqliteStore: batches handed over from the event loop, applied
in order in one transaction each, and the JSON-lines output written after each commit.

Why a thread, and how batches are cut and applied: StoreWriter's docstring.
"""
from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO

from ..output.records import Record
from .schema import _INSERT_RECORDS, _SQL, _UPSERT, _connect
from .state_file import StateFile

# A URL's row as the batch holds it: (url, state, seq, redirects_left, depth, tries, via, discovery).
Row = tuple[str, int, int, int, int, int, str | None, str]
# One batch: URL rows by URL, records, settings (key, JSON) and host states (key, JSON or None).
Batch = tuple[dict[str, Row], list[Record], list[tuple[str, str]], list[tuple[str, str | None]]]
# What the thread hands back to a refill or a scan: (url, redirects_left, depth, tries, via,
# discovery, seq).
QueuedRow = tuple[str, int, int, int, str | None, str, int]
Deliver = Callable[[list[QueuedRow]], None]


class StoreWriter:
    """The current batch, the batches handed over but not yet committed, and the thread
    that commits them.  Everything here but the thread's own methods is called from the
    event loop's thread; when to cut a batch is the store's call (core/storage/store.py).

    Every write (queue a URL, mark it in flight, mark it done, keep a Record) is recorded in
    an in-memory batch on the event loop (a dict or list store), handed to the thread every
    FLUSH_INTERVAL seconds or FLUSH_OPS operations, and applied in one transaction.
    A dedicated thread rather than `run_in_executor` per batch because:
    - sqlite3 connections are bound to a thread, and SQLite has exactly one writer anyway;
    - batches must be applied in order, which a single FIFO thread gives for free;
    - the commit (and its fsync of the WAL) runs without the GIL, off the loop.
    Batches are cut only at loop-callback boundaries (`call_soon` / `call_later`), so what one
    synchronous stretch does (a worker's `write` of a Record and its `done`) lands in the
    same transaction. A batch holds each touched URL's final state (add + pop + done is one
    row), applied as one upsert over `json_each` plus one insert for its records: SQLite does
    the rows in C with the GIL released (`executemany` re-takes the GIL for every row, which a
    busy event loop turns into a convoy).

    With `attach_jsonl()` the JSON-lines output is written right after each commit, so it
    never runs ahead of the state; a resume copies over what a kill left unwritten, and the
    file ends up equal to `crawltop export`.
    """

    def __init__(self, state: StateFile, apply: Callable[[sqlite3.Connection, Batch], None]) -> None:
        self._state = state
        self._apply_batch = apply  # the store's _apply, which tests replace to fill the disk
        self.rows: dict[str, Row] = {}
        self.recs: list[Record] = []
        self.sets: list[tuple[str, str]] = []
        self.nops = 0  # operations in the current batch
        self.uncommitted: deque[dict[str, Row]] = deque()  # the thread pops after commit
        self.error: BaseException | None = None  # the first failed write
        # Called from the writer thread on the first failed write; must be thread-safe.
        self.on_error: Callable[[BaseException], None] | None = None
        self.jsonl: TextIO | None = None  # text file the thread appends committed records to
        self.jsonl_caught_up = 0  # records copied from the state into the JSONL at attach
        self._cmds: deque[Any] = deque()
        self._cmd_ready = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="crawltop-store", daemon=True)
        self._thread.start()

    def hand_over(self, hosts: list[tuple[str, str | None]]) -> None:
        """Hand the current batch (and `hosts`) to the thread and start a new one."""
        batch: Batch = (self.rows, self.recs, self.sets, hosts)
        self.uncommitted.append(self.rows)
        self.rows, self.recs, self.sets, self.nops = {}, [], [], 0
        self.submit(("batch", batch))

    def pending(self, url: str) -> bool:
        """The URL is in a batch handed over but not yet committed."""
        return any(url in urls for urls in tuple(self.uncommitted))

    def submit(self, cmd: Any) -> None:
        with self._cmd_ready:
            self._cmds.append(cmd)
            self._cmd_ready.notify()

    def sync(self) -> None:
        """Wait until everything handed over so far is committed (blocks)."""
        done = threading.Event()
        self.submit(("sync", done.set))
        done.wait()

    async def async_sync(self) -> None:
        """Wait until everything handed over so far is committed, without blocking the loop."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(_resolve, fut, None)
            except RuntimeError:
                pass

        self.submit(("sync", wake))
        await fut

    def refill(self, after: int, limit: int, deliver: Deliver) -> None:
        """Queued rows after seq `after`, in queue order, to `deliver` (on the thread)."""
        self.submit(("refill", after, limit, deliver))

    def scan(self, predicate: Callable[[str], bool], deliver: Deliver) -> None:
        """Every queued row whose URL matches, in queue order, to `deliver` (on the thread)."""
        self.submit(("scan", predicate, deliver))

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def stop(self) -> None:
        """Stop the thread after what was handed over, and close the JSON-lines file."""
        self.submit(None)
        self.join()
        if self.jsonl is not None:
            self.jsonl.close()

    # ---------------------------------------------------------------- the thread

    def _main(self) -> None:
        conn = _connect(self._state.path)
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
                        if self.error is None:
                            self._apply_batch(conn, cmd[1])
                    except BaseException as exc:  # disk full, I/O error: surfaced by flush/close
                        self.error = exc
                        if self.on_error is not None:  # and at once to the crawl, which stops
                            self.on_error(exc)
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass
                    finally:
                        self.uncommitted.popleft()
                elif kind == "sync":
                    cmd[1]()
                elif kind == "refill":
                    _, after, limit, deliver = cmd
                    try:
                        rows = conn.execute(
                            "SELECT url, redirects_left, depth, tries, via, discovery, seq FROM urls"
                            " WHERE state = 0 AND seq > ? ORDER BY seq LIMIT ?",
                            (after, limit),
                        ).fetchall()
                    except BaseException as exc:
                        self.error = exc
                        rows = []
                    deliver(rows)
                elif kind == "scan":  # remove_matching: queued rows only in SQLite
                    _, predicate, deliver = cmd
                    try:
                        rows = [row for row in conn.execute(
                            "SELECT url, redirects_left, depth, tries, via, discovery, seq FROM urls"
                            " WHERE state = 0 ORDER BY seq") if predicate(row[0])]
                    except BaseException as exc:
                        self.error = exc
                        rows = []
                    deliver(rows)
        finally:
            conn.close()

    def apply(self, conn: sqlite3.Connection, batch: Batch) -> None:
        """Commit one batch in one transaction, then append its records to the JSONL."""
        rows, recs, sets, hosts = batch
        rows_json = json.dumps(list(rows.values()), ensure_ascii=False, separators=(",", ":")) if rows else None
        lines = [r.to_json() for r in recs]
        recs_json = "[" + ",".join(lines) + "]" if lines else None
        conn.execute("BEGIN")
        if rows_json:
            conn.execute(_UPSERT, (rows_json,))
        if recs_json:
            conn.execute(_INSERT_RECORDS, (self._state.run, recs_json))
        if sets:
            conn.executemany(_SQL["setting"], sets)
        if hosts:
            conn.executemany(_SQL["host"], [(k, v) for k, v in hosts if v is not None])
            conn.executemany(_SQL["host_default"], [(k,) for k, v in hosts if v is None])
        conn.execute("COMMIT")
        if lines and self.jsonl is not None:  # after the commit: the JSONL never runs ahead
            self.jsonl.write("\n".join(lines) + "\n")
            self.jsonl.flush()

    # ---------------------------------------------------------------- JSON lines

    def attach_jsonl(self, path: str) -> None:
        """Start the JSON-lines file (see SqliteStore.attach_jsonl; everything is committed)."""
        if not self._state.resumed or not os.path.exists(path):
            self.jsonl = open(path, "w", encoding="utf-8")
            if self._state.resumed:  # the file is gone: rewrite it from the state
                self._copy_records_to_jsonl(0)
            return
        have, good = _count_lines(path)
        with open(path, "r+b") as fh:
            fh.truncate(good)
        self.jsonl = open(path, "a", encoding="utf-8")
        self._copy_records_to_jsonl(have)

    def _copy_records_to_jsonl(self, after_id: int) -> None:
        rconn, jsonl = self._state.rconn, self.jsonl
        assert rconn is not None and jsonl is not None
        cur = rconn.execute("SELECT data FROM records WHERE id > ? ORDER BY id", (after_id,))
        while rows := cur.fetchmany(1000):
            jsonl.write("".join(data + "\n" for (data,) in rows))
            self.jsonl_caught_up += len(rows)
        jsonl.flush()


def _resolve(fut: asyncio.Future[Any], value: Any) -> None:
    """Set a future's result unless it is already done (a callback for the loop)."""
    if not fut.done():
        fut.set_result(value)


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
