"""The crawl state file's format: its SQLite schema and statements, validation of an existing
file, the saved config as JSON, and read-only access (export, inspection).

Crash safety is at the PRAGMAs of core/storage/state_file.py; what makes a file unusable: `_read_settings`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from ..config import CrawlConfig
from ..errors import StateError
from ..secrets import redact_config

SCHEMA_VERSION = 2  # 2: urls.via and urls.discovery added
SQLITE_MAGIC = b"SQLite format 3\x00"

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
    tries INTEGER NOT NULL,
    via TEXT,
    discovery TEXT NOT NULL DEFAULT ''
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
INSERT INTO urls(url, state, seq, redirects_left, depth, tries, via, discovery)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
       json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]'),
       json_extract(value, '$[6]'), json_extract(value, '$[7]')
FROM json_each(?) WHERE 1
ON CONFLICT(url) DO UPDATE SET
    state = excluded.state,
    seq = iif(excluded.seq >= 0, excluded.seq, urls.seq),
    redirects_left = excluded.redirects_left, depth = excluded.depth, tries = excluded.tries,
    via = excluded.via, discovery = excluded.discovery
"""
_INSERT_RECORDS = """
INSERT INTO records(run, url, data)
SELECT ?, json_extract(value, '$.url'), value FROM json_each(?)
"""
_SQL = {
    "setting": "INSERT OR REPLACE INTO settings(key, value) VALUES (?, ?)",
    "host": "INSERT OR REPLACE INTO hosts(key, data) VALUES (?, ?)",
    "host_default": "DELETE FROM hosts WHERE key = ?",
}
# Per-host politeness state (core/queueing/hosts.py Hosts.saved): only hosts that differ from the
# defaults have a row. Added to older files of this schema version when they are opened.
_HOSTS_TABLE = "CREATE TABLE IF NOT EXISTS hosts(key TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID"

STATUS_RUNNING, STATUS_STOPPED, STATUS_FINISHED = "running", "stopped", "finished"


# -- config <-> JSON -------------------------------------------------------------

_TUPLE_FIELDS = {f.name for f in dataclasses.fields(CrawlConfig) if str(f.type).startswith("tuple")}


def config_to_json(config: CrawlConfig) -> str:
    """The settings as stored (state file, Redis): header values and proxy credentials
    redacted (core/secrets.py), so no secret is ever written down."""
    return json.dumps(dataclasses.asdict(redact_config(config)), sort_keys=True)


def config_from_json(text: str) -> CrawlConfig:
    raw = json.loads(text)
    names = {f.name for f in dataclasses.fields(CrawlConfig)}
    kwargs: dict[str, Any] = {
        k: (tuple(v) if k in _TUPLE_FIELDS and v is not None else v) for k, v in raw.items() if k in names
    }
    return CrawlConfig(**kwargs)


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
    """The settings of an existing file, or StateError. Reads only.

    Schema version SCHEMA_VERSION. A file that is not SQLite, is corrupt, is not a crawltop
    state, or has another schema version raises `StateError` and is never written to.
    """
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
