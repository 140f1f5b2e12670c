"""Opening, resuming, locking and closing a SqliteStore, and its settings.

`open_state()` (core/resume.py) builds on this; this module never imports the store
itself, so imports run one way: resume -> store -> store_open."""
from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from typing import Any, Self

from .bloom import BloomFilter
from .config import CrawlConfig
from .state import (
    _HOSTS_TABLE,
    _SCHEMA,
    _SQL,
    SCHEMA_VERSION,
    STATUS_FINISHED,
    STATUS_RUNNING,
    StateError,
    _check_header,
    _connect,
    _has_tables,
    _read_settings,
    config_from_json,
    config_to_json,
)


class StoreOpen:
    """The lifecycle and settings side of SqliteStore (a mixin: the attributes are set
    up by SqliteStore.__init__)."""

    # ---------------------------------------------------------------- open / close

    @classmethod
    def open(cls, path: str, *, create: bool = True, settings: Mapping[str, Any] | None = None) -> Self:
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
            offset = time.time() - time.monotonic()
            for key, data in conn.execute("SELECT key, data FROM hosts"):
                try:
                    saved = json.loads(data)
                except ValueError:
                    continue  # one bad row costs that host its history, not the resume
                if isinstance(saved, dict):
                    self.hosts.restore(key, saved, offset)
            self.settings["runs"] = self.run
            self.resumed_records = conn.execute("SELECT count(*) FROM records").fetchone()[0]
            self._seq = conn.execute("SELECT coalesce(max(seq), 0) FROM urls").fetchone()[0]
            queued = conn.execute("SELECT count(*) FROM urls WHERE state = 0").fetchone()[0]
            self._spilled = queued
            self._unfinished = queued
            total = conn.execute("SELECT count(*) FROM urls").fetchone()[0]
            self._bloom = BloomFilter(total * 2)
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

    def __enter__(self) -> Self:
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
