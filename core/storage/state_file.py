"""An open state file: the lock that keeps a second crawltop out, the schema written
or checked, the settings, what the open found (a resume, the run number, in-flight URLs
turned back into queued ones) and the read connection.

The format itself is core/storage/schema.py; the frontier held in the file is core/storage/store.py,
which hands `open()` a loader for its own tables, so this module never imports the
store and imports run one way: open_state -> store -> state_file -> schema."""
from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import StateError
from .schema import (
    _HOSTS_TABLE,
    _SCHEMA,
    _SQL,
    SCHEMA_VERSION,
    STATUS_RUNNING,
    _check_header,
    _connect,
    _has_tables,
    _read_settings,
)


class StateFile:
    """One state file, from `open()` to `close()`.  Called from the event loop's thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.settings: dict[str, Any] = {}
        self.run = 1
        self.resumed = False  # the file held a crawl before this open
        self.resumed_records = 0  # records carried over from earlier runs
        self.recovered_in_flight = 0  # in-flight URLs turned back into queued ones at open
        self.rconn: sqlite3.Connection | None = None  # reads: the seen set's last resort, export
        self._lock_fd: int | None = None

    def open(self, *, create: bool, settings: Mapping[str, Any],
             load: Callable[[sqlite3.Connection], None]) -> None:
        """Open (resume) or create the file. `settings` are written with the schema, in
        the same transaction, when the file is new (so a kill can't leave half a file);
        on a resume `load` reads the frontier back over the same connection."""
        path = self.path
        exists = _check_header(path)
        if not exists and not create:
            raise StateError(f"{path}: no such state file")
        conn = _connect(path)
        try:
            if exists and not _has_tables(conn, path):
                exists = False  # an empty database (killed while being created): nothing to lose
            if not exists and not create:
                raise StateError(f"{path}: no such state file")
            if exists:
                self.settings = _read_settings(conn, path)
            self._lock()
            self._setup(conn, exists, settings, load)
        except BaseException:
            conn.close()
            self.unlock()
            raise
        conn.close()
        self.rconn = _connect(path)
        self.rconn.execute("PRAGMA cache_size = -8000")

    def _lock(self) -> None:
        path = self.path
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

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _setup(self, conn: sqlite3.Connection, exists: bool, settings: Mapping[str, Any],
               load: Callable[[sqlite3.Connection], None]) -> None:
        try:
            # Crash safety. WAL with synchronous=NORMAL: a committed batch survives kill -9 (the
            # WAL is in the OS page cache; only a power cut can lose the last commits), so a
            # kill loses at most the batches not yet committed (the last few hundred ms).
            # Items popped but not finished are stored as in flight; `open` turns them back
            # into queued items, so they are fetched again. Records and the `done` marks of
            # their URLs are in the same or consecutive batches, so a URL refetched after a
            # kill duplicates a Record only if that Record was committed and its `done` was
            # not: at most one per worker.
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            if not exists:
                self.settings = {"schema": SCHEMA_VERSION, "runs": 1, "created": time.time(),
                                 "status": STATUS_RUNNING, **settings}
                conn.execute("BEGIN")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(_HOSTS_TABLE)
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
            conn.execute(_HOSTS_TABLE)
            conn.execute("COMMIT")
            load(conn)
            self.settings["runs"] = self.run
            self.resumed_records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{self.path}: corrupt state file ({exc})") from exc

    def close(self) -> None:
        """Close the read connection and release the lock (the writer has stopped)."""
        if self.rconn is not None:
            self.rconn.close()
        self.unlock()
