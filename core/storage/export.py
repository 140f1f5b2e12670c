"""Export the records of a state file (`--state`) to JSON lines or CSV.

Reads only: the state file may belong to a crawl that is running (WAL lets a reader
see every committed batch) or that was killed.  Each row is a Record's fields, in
the order they were written, plus `run` (1 for the first run, 2 for the first resume...);
a CSV row also has its `outcome` (core/outcomes.py), and both count outcomes into a `Tally`
the command prints, in the words every other surface uses.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
from collections.abc import Iterable, Iterator
from typing import IO

from ..jsonfast import dumps_str
from ..outcomes import Tally
from ..output.records import Record
from .store import iter_records, read_state

RECORD_FIELDS = [f.name for f in dataclasses.fields(Record)]
CSV_FIELDS = [*RECORD_FIELDS, "run", "outcome"]


def _records(source: str | Iterable[dict]) -> Iterator[dict]:
    """A state file's records, or records given (a cluster's stream: core/cluster/records.py)."""
    if not isinstance(source, str):
        yield from source
        return
    _settings, conn = read_state(source)
    try:
        yield from iter_records(conn)
    finally:
        conn.close()


def _open_out(path: str, newline: str | None = None) -> IO[str]:
    if path == "-":
        import sys

        return os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8", newline=newline)
    return open(path, "w", encoding="utf-8", newline=newline)


def export_jsonl(state_path: str | Iterable[dict], out_path: str, tally: Tally | None = None) -> int:
    """Write one JSON object per record; returns how many."""
    n = 0
    with _open_out(out_path) as out:
        for rec in _records(state_path):
            if tally is not None:
                tally.add(rec.get("status"), rec.get("error_kind"), rec.get("error"))
            out.write(dumps_str(rec) + "\n")
            n += 1
    return n


def export_csv(state_path: str | Iterable[dict], out_path: str, tally: Tally | None = None) -> int:
    """Write a header row and one row per record (empty cell for None); returns how many."""
    n = 0
    tally = tally if tally is not None else Tally()
    with _open_out(out_path, newline="") as out:
        writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for rec in _records(state_path):
            row = {k: _cell(rec.get(k)) for k in CSV_FIELDS}
            row["outcome"] = tally.add(rec.get("status"), rec.get("error_kind"), rec.get("error"))
            writer.writerow(row)
            n += 1
    return n


def _cell(value: object) -> object:
    """A CSV cell: nothing for null, JSON for the lists (referrers, findings)."""
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list) else value
