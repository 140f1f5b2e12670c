"""The writer thread of a SqliteStore: batches handed over from the event loop, applied
in order in one transaction each, and the JSON-lines output written after each commit.

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
"""
from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import time
from typing import Any

from .state import _INSERT_RECORDS, _SQL, _UPSERT, StateError, _connect


class StoreWriter:
    """The writer side of SqliteStore (a mixin: the attributes are set up by
    SqliteStore.__init__).  Everything here but the thread's own methods is called
    from the event loop's thread."""

    def _flush(self) -> None:
        """Hand the current batch to the writer thread (never blocks)."""
        self._flush_soon = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._nops:
            return
        hosts: list[tuple[str, str | None]] = []
        if self._dirty_hosts:  # host states as they are now (one row per host per batch)
            offset = time.time() - time.monotonic()
            for key, h in self._dirty_hosts.items():
                saved = self.hosts.saved(h, offset)
                hosts.append((key, json.dumps(saved, separators=(",", ":")) if saved else None))
            self._dirty_hosts = {}
        batch = (self._rows, self._recs, self._sets, hosts)
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
                            "SELECT url, redirects_left, depth, tries, via, discovery, seq FROM urls"
                            " WHERE state = 0 AND seq > ? ORDER BY seq LIMIT ?",
                            (after, limit),
                        ).fetchall()
                    except BaseException as exc:
                        self._error = exc
                        rows = []
                    deliver(rows)
                elif kind == "scan":  # remove_matching: queued rows only in SQLite
                    _, predicate, deliver = cmd
                    try:
                        rows = [row for row in conn.execute(
                            "SELECT url, redirects_left, depth, tries, via, discovery, seq FROM urls"
                            " WHERE state = 0 ORDER BY seq") if predicate(row[0])]
                    except BaseException as exc:
                        self._error = exc
                        rows = []
                    deliver(rows)
        finally:
            conn.close()

    def _apply(self, conn: sqlite3.Connection, batch: tuple) -> None:
        rows, recs, sets, hosts = batch
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
        if hosts:
            conn.executemany(_SQL["host"], [(k, v) for k, v in hosts if v is not None])
            conn.executemany(_SQL["host_default"], [(k,) for k, v in hosts if v is None])
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
