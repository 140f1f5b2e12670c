"""CDXJ, pywb's index format: one line per response or revisit record,
`SURT-key 14-digit-timestamp {"url", "mime", "status", "digest", "length", "offset", "filename"}`,
sorted bytewise, so pywb (and every CDX server) replays the WARCs without `wb-manager add`.

The fields and their form are cdxj-indexer's (webrecorder's own indexer, which the tests
run for comparison); the SURT key is the `surt` package's, as both use. The WARC writer
(core/output/warc.py) makes the lines as it writes, so indexing costs no second read;
a file finished after a kill is indexed by reading it (`index_warc`).
"""
from __future__ import annotations

import fcntl
import heapq
import json
import os
from collections.abc import Iterator
from contextlib import ExitStack

import surt  # type: ignore[import-untyped]  # surt has no type hints
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]  # (same)

from ..localfile import MB, lines
from .warcfiles import Series


def timestamp(warc_date: str) -> str:
    """`2026-11-26T03:20:00.123456Z` -> `20261126032000` (warcio's iso_date_to_timestamp)."""
    return "".join(c for c in warc_date[:19] if c.isdigit())


def iso_date(ts: str) -> str:
    """The inverse, for WARC-Refers-To-Date from an index: `20261126032000` -> ISO 8601."""
    ts = (ts + "00000000000000")[:14]
    return f"{ts[:4]}-{ts[4:6]}-{ts[6:8]}T{ts[8:10]}:{ts[10:12]}:{ts[12:14]}Z"


def key(url: str) -> str:
    try:
        return str(surt.surt(url))
    except Exception:  # an URL surt cannot read: indexed as it is (cdxj-indexer does the same)
        return url


def line(url: str, warc_date: str, mime: str | None, status: str | None, digest: str | None,
         length: int, offset: int, filename: str) -> str:
    fields: dict[str, str] = {"url": url}
    if mime:
        fields["mime"] = mime
    if status:
        fields["status"] = status
    if digest:
        fields["digest"] = digest
    fields.update(length=str(length), offset=str(offset), filename=filename)
    return f"{key(url)} {timestamp(warc_date)} {json.dumps(fields)}"


def mime_of(content_type: str | None) -> str | None:
    if not content_type:
        return None
    return content_type.replace(";", " ").split()[0].strip() if content_type.strip() else None


def index_warc(path: str, filename: str) -> list[str]:
    """Lines for every response and revisit record of a WARC file (unsorted)."""
    out: list[str] = []
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        for rec in it:
            if rec.rec_type not in ("response", "revisit"):
                continue
            h = rec.rec_headers
            http = rec.http_headers
            mime = "warc/revisit" if rec.rec_type == "revisit" else mime_of(
                http.get_header("Content-Type") if http else None)
            status = http.get_statuscode() if http else None
            url, date, digest = h.get_header("WARC-Target-URI"), h.get_header("WARC-Date"), \
                h.get_header("WARC-Payload-Digest")
            rec.content_stream().read()
            it.read_to_end(rec)
            out.append(line(url, date or "", mime, status, digest, it.get_record_length(),
                            it.get_record_offset(), filename))
    return out


def merge(series: Series) -> str | None:
    """The crawl's one index, `NAME.cdxj`, merged (sorted) from every finished file's part.
    Serialised by a lock: the last writer to finish sees every part closed before it."""
    target = series.cdxj()
    lock = os.open(series.directory, os.O_RDONLY)  # the directory itself: no lock file left behind
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        parts = series.index_parts()
        if not parts:
            return None
        tmp = f"{target}.tmp{os.getpid()}"
        with ExitStack() as stack, open(tmp, "w", encoding="utf-8") as out:
            files = [stack.enter_context(open(p, encoding="utf-8")) for p in parts]
            out.writelines(heapq.merge(*files))
        os.replace(tmp, target)
    finally:
        os.close(lock)
    return target


def read(path: str) -> Iterator[tuple[str, str, dict[str, str]]]:
    """(key, timestamp, fields) of each line of a CDXJ file; bad lines skipped, and nothing
    after a line of more than 1 MB (no index holds one: `/dev/zero`, a binary)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for raw in lines(fh, MB):  # a line past 1 MB: not an index, nothing more is read
            if raw is None:
                return
            parts = raw.rstrip("\n").split(" ", 2)
            if len(parts) != 3 or not parts[2].startswith("{"):
                continue
            try:
                fields = json.loads(parts[2])
            except ValueError:
                continue
            if isinstance(fields, dict):
                yield parts[0], parts[1], fields
