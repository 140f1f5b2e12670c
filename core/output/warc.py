"""A WARC 1.1 archive: request and response (or revisit) records for every HTTP response
received, in rotated files with their CDXJ index.

How records are written (a thread), when a URL may count as done, rotation, revisits and
the index: WarcSink's docstring. File names and a killed run's files: core/output/warcfiles.py.
"""
from __future__ import annotations

import asyncio
import hashlib
import io
import os
import socket
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders  # type: ignore[import-untyped]  # warcio has no type hints
from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]  # (same)

from ..secrets import redact_pairs
from . import cdxj
from .dedup import Digests
from .provenance import payload_digest
from .records import Record
from .warcfiles import Claimed, Series, finish_abandoned, repair_tail, write_lines

__all__ = ["DEFAULT_MAX_SIZE", "WarcSink", "parse_size", "repair_tail"]

MAX_QUEUED_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_SIZE = 1 << 30  # 1 GiB, as Heritrix's and Browsertrix's default
PUBLISH_EVERY = 32  # records written between two flushes when the queue never empties
_DROP = {"content-encoding", "transfer-encoding", "content-length"}
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
GZIP_LEVEL = 3  # ISA-L's levels are 0-3; 3 is its smallest output
try:
    from isal import isal_zlib as _zlib  # type: ignore[import-not-found,unused-ignore]  # optional at run time

    def _gzip(data: Any) -> bytes:
        return bytes(_zlib.compress(data, GZIP_LEVEL, wbits=31))
except ImportError:  # a platform without isal's wheels: the standard library, its default level
    import zlib

    def _gzip(data: Any) -> bytes:
        return zlib.compress(data, 6, wbits=31)


def parse_size(text: str) -> int:
    """`1G`, `500M`, `64K`, `1048576` (binary units; a trailing `B` or `iB` allowed)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    number = t[: -1] if unit else t
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (examples: 1G, 500M, 64K)") from None
    size = int(value * _UNITS[unit])
    if size < 4096:
        raise ValueError(f"too small: {text!r} (at least 4K)")
    return size


class WarcSink:
    """The crawler calls `response(...)` for every response (redirects included) on a sink that
    has the method; `write(record)` and `close()` make it a regular Sink.

    Records are built and gzipped (one gzip member per record, as the spec recommends) in a
    writer thread, so a 10 MB body never stalls the event loop; zlib releases the GIL, so
    compression runs on the other core. The queue to the thread is bounded in bytes; above
    the bound `response()` waits (back-pressure beats unbounded memory).

    **Done only once written.** `response()` returns an awaitable that completes when the
    records are written to the file (flushed to the OS, not only buffered: a kill -9 cannot
    lose them; a power cut can, as it can the state file's last commits). The crawler awaits
    it before the URL's Record is emitted and the URL marked done, so after any number of
    kills every URL the state calls done has its response or revisit in the archive. The
    thread flushes whenever its queue empties (or every PUBLISH_EVERY records) and wakes the
    loop once for every worker waiting: one flush and one wake-up per burst, not per page.

    **Rotation.** Files `NAME-00000.warc.gz`, `NAME-00001.warc.gz`, ... (core/output/warcfiles.py),
    each opening with a `warcinfo` (software, format, the crawl's settings as given in `info`,
    secrets already redacted by the caller), closed at a record boundary once `max_size`
    is passed. Each writer claims its own next files: resumes and processes never share one.

    **Revisits.** A 2xx response with a non-empty, uncut payload whose digest was archived
    before (core/output/dedup.py) is written as a `revisit` (WARC 1.1 identical-payload-digest
    profile, WARC-Refers-To-Target-URI, WARC-Refers-To-Date, WARC-Refers-To when known): its
    HTTP headers, no body. `dedup=False` writes every payload in full.

    **Index.** Each record's CDXJ line is made as it is written; a finished file's lines go
    sorted to `NAME-0000N.cdxj`, and all of them are merged into `NAME.cdxj` at each rotation
    and at close (core/output/cdxj.py).

    aiohttp hands us the decoded body, so the stored HTTP headers are rewritten to match it:
    Content-Encoding and Transfer-Encoding are dropped (kept as X-Crawltop-Orig-Content-Encoding
    / -Transfer-Encoding) and Content-Length is the stored length. A body cut by --max-bytes
    gets `WARC-Truncated: length`. Secrets are redacted (core/secrets.py `redact_pairs`).
    """

    def __init__(self, path: str, *, info: dict[str, Any] | None = None, max_size: int = DEFAULT_MAX_SIZE,
                 dedup: bool = True, dedup_from: Iterable[str] = (), digests: Digests | None = None) -> None:
        self.series = Series.of(os.fspath(path))
        self.max_size = max_size
        self.dedup = dedup
        self.info = dict(info or {})
        # a killed run's files, cut to their last whole record, indexed and renamed
        self.repaired = finish_abandoned(self.series, cdxj.index_warc)
        self.digests = digests if digests is not None else Digests()
        if dedup:
            for part in (*self.series.index_parts(), *dedup_from):
                self.digests.load_cdxj(part)
        self.files: list[str] = []  # the files this writer finished, in order
        self.responses = self.revisits = 0
        self._file: Claimed | None = None
        self._buffer = io.BytesIO()  # one record, uncompressed (writer thread only)
        self._writer: Any = None
        self._lines: list[str] = []  # the current file's index lines
        self._records_in_file = 0
        self._queue: deque[tuple | None] = deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self._closed = False
        self._ticket = 0  # responses handed to the thread
        self._durable = 0  # of which written to the file
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._wake_pending = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.redacted: set[str] = set()  # header names whose values never reach the archive
        self._open_next()
        if self.repaired:
            cdxj.merge(self.series)
        self._thread = threading.Thread(target=self._run, name="crawltop-warc", daemon=True)
        self._thread.start()

    @property
    def path(self) -> str:
        """The file being written now (`.open` until it is finished)."""
        return self._file.path if self._file is not None else ""

    def redact_headers(self, names: set[str]) -> None:
        """Called by the crawler with its --header names: their values are secrets."""
        self.redacted |= {n.lower() for n in names}

    # -- Sink ------------------------------------------------------------------------
    def write(self, record: Record) -> None:
        """Records live in JSONL / SQLite; the archive holds what was received."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._cond:
            self._queue.append(None)
            self._cond.notify_all()
        self._thread.join()
        try:
            self._finish_file(last=True)
            cdxj.merge(self.series)
        except OSError as exc:
            self._error = self._error or exc
        if self._error is not None:
            raise OSError(f"{self.series.stem}: writing the WARC failed: {self._error}") from self._error

    # -- called by the crawler per HTTP response ------------------------------------------
    def response(
        self,
        url: str,
        status: int,
        reason: str,
        headers: list[tuple[str, str]],
        body: bytes,
        request_headers: list[tuple[str, str]],
        *,
        truncated: bool | None = None,
        method: str = "GET",
        digest: str | None = None,
    ) -> asyncio.Future[None] | None:
        """Queue the records; the future (None outside a loop, or if already written)
        completes once they are written to the file."""
        if self._closed:
            return None
        with self._cond:
            while self._queued_bytes > MAX_QUEUED_BYTES and self._error is None:
                self._cond.wait()
            self._ticket += 1
            ticket = self._ticket
            self._queue.append((url, status, reason, list(headers), bytes(body), list(request_headers),
                                truncated, method, digest, ticket))
            self._queued_bytes += len(body)
            self._cond.notify_all()
        try:
            loop = self._loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        fut: asyncio.Future[None] = loop.create_future()
        self._waiting.append((ticket, fut))
        return fut

    def _wake(self) -> None:
        """On the loop: complete the futures of everything written so far."""
        self._wake_pending = False
        durable, error = self._durable, self._error
        waiting = self._waiting
        while waiting and (waiting[0][0] <= durable or error is not None):
            fut = waiting.popleft()[1]
            if not fut.done():
                if error is not None:
                    fut.set_exception(OSError(f"writing the WARC failed: {error}"))
                else:
                    fut.set_result(None)

    def flush(self) -> None:
        """Wait until everything queued is written to the file (blocks)."""
        with self._cond:
            ticket = self._ticket
            while self._durable < ticket and self._error is None and self._thread.is_alive():
                self._cond.wait(0.05)

    # -- writer thread -------------------------------------------------------------------
    def _publish(self, ticket: int) -> None:
        """Flush the file and let the loop know `ticket` and all before it are written."""
        if self._file is not None and self._error is None:
            try:
                self._file.fh.flush()
            except OSError as exc:
                self._error = exc
        with self._cond:
            self._durable = ticket
            self._cond.notify_all()
        loop = self._loop
        if self._waiting and not self._wake_pending and loop is not None:
            self._wake_pending = True
            try:
                loop.call_soon_threadsafe(self._wake)
            except RuntimeError:  # the loop is closed: nobody waits any more
                self._wake_pending = False

    def _run(self) -> None:
        unpublished = 0
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                item = self._queue[0]
            if item is None:
                with self._cond:
                    self._queue.popleft()
                    self._cond.notify_all()
                return
            try:
                if self._error is None:
                    self._write_pair(*item[:9])
                    if self._file is not None and self._file.fh.tell() >= self.max_size:
                        self._rotate()
            except BaseException as exc:  # disk full: surfaced to the waiting workers and at close
                self._error = exc
            unpublished += 1
            with self._cond:
                self._queue.popleft()
                self._queued_bytes -= len(item[4])
                empty = not self._queue
                self._cond.notify_all()
            if empty or unpublished >= PUBLISH_EVERY or self._error is not None:
                self._publish(item[9])
                unpublished = 0

    def _open_next(self) -> None:
        """Claim the next file and write its warcinfo."""
        from .. import __version__ as version  # late: the package imports this module

        self._file = Claimed(self.series)
        self._writer = WARCWriter(self._buffer, gzip=False, warc_version="1.1")
        self._lines = []
        self._records_in_file = 0
        fields = {"software": f"crawltop/{version}", "format": "WARC File Format 1.1",
                  "conformsTo": CONFORMS_TO, "isPartOf": self.series.stem,
                  "hostname": socket.gethostname(), "crawltop-pid": str(os.getpid())}  # which writer wrote it
        fields.update(self.info)
        name = os.path.basename(self._file.final)
        self._write(self._writer.create_warcinfo_record(name, fields))
        self._file.fh.flush()

    def _finish_file(self, *, last: bool = False) -> None:
        """Close the current file: its index part, then the name without `.open`. A file that
        got no record (a resume with nothing left to fetch) is removed rather than kept."""
        f = self._file
        if f is None:
            return
        self._file = None
        if last and self._records_in_file == 0:
            f.fh.close()
            os.unlink(f.path)
            return
        f.fh.flush()
        write_lines(self.series.cdxj(f.number), self._lines)
        f.finish()
        self.files.append(f.final)

    def _write(self, record: Any) -> None:
        """One record, one gzip member (the spec's advice: a reader can seek to any record).
        warcio serialises it into a buffer; we compress it with ISA-L (`isal`) when it is
        installed: 12x less CPU than warcio's zlib level 9 for 10% more bytes (BENCHMARKS.md)."""
        buf = self._buffer
        buf.seek(0)
        buf.truncate()
        self._writer.write_record(record)
        assert self._file is not None
        self._file.fh.write(_gzip(buf.getbuffer()))

    def _rotate(self) -> None:
        self._finish_file()
        cdxj.merge(self.series)
        self._open_next()

    def _write_pair(
        self,
        url: str,
        status: int,
        reason: str,
        headers: list[tuple[str, str]],
        body: bytes,
        request_headers: list[tuple[str, str]],
        truncated: bool | None,
        method: str,
        digest: str | None,
    ) -> None:
        stored: list[tuple[str, str]] = []
        orig: list[tuple[str, str]] = []
        declared_length: int | None = None
        encoded = False
        content_type: str | None = None
        for name, value in headers:
            low = name.lower()
            if low in _DROP:
                if low == "content-length":
                    try:
                        declared_length = int(value)
                    except ValueError:
                        pass
                else:
                    encoded = encoded or low == "content-encoding"
                    orig.append((f"X-Crawltop-Orig-{name}", value))
                continue
            if low == "content-type":
                content_type = value
            stored.append((name, value))
        stored.extend(orig)
        stored = redact_pairs(stored, request=False)  # Set-Cookie values: session credentials
        stored.append(("Content-Length", str(len(body))))
        if truncated is None:
            # Without a word from the crawler: a plain body shorter than announced was cut.
            truncated = not encoded and declared_length is not None and len(body) < declared_length
        if digest is None:
            digest = payload_digest(hashlib.sha1(body, usedforsecurity=False))

        writer = self._writer
        http_headers = StatusAndHeaders(f"{status} {reason or ''}".strip(), stored, protocol="HTTP/1.1")
        warc_headers = {"WARC-Payload-Digest": digest}  # the crawler's hash of these bytes: not hashed twice
        if truncated:
            warc_headers["WARC-Truncated"] = "length"
        resp = writer.create_warc_record(
            url,
            "response",
            payload=io.BytesIO(body),
            length=len(body),
            http_headers=http_headers,
            warc_headers_dict=warc_headers,
        )
        mime: str | None = cdxj.mime_of(content_type)
        original = None
        if self.dedup and body and not truncated and 200 <= status < 300:
            # the first copy anywhere (this writer, the series, --dedup-from, the other
            # processes of a shared crawl) or this one, which becomes the first
            original = self.digests.first(digest, url, resp.rec_headers.get_header("WARC-Date"),
                                          resp.rec_headers.get_header("WARC-Record-ID"))
        if original is not None:
            refers_uri, refers_date, refers_id = original
            extra = {"WARC-Refers-To": refers_id} if refers_id else {}
            resp = writer.create_revisit_record(url, digest, refers_uri, refers_date,
                                                http_headers=http_headers, warc_headers_dict=extra)
            mime = "warc/revisit"
            self.revisits += 1
        else:
            self.responses += 1
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        req_list = redact_pairs(request_headers, self.redacted)  # Authorization, Cookie, --header
        if not any(n.lower() == "host" for n, _ in req_list):
            req_list.insert(0, ("Host", parts.netloc))
        req_headers = StatusAndHeaders(f"{method} {target}", req_list, protocol="HTTP/1.1", is_http_request=True)
        req = writer.create_warc_record(url, "request", http_headers=req_headers)
        rec_id = resp.rec_headers.get_header("WARC-Record-ID")
        req.rec_headers.add_header("WARC-Concurrent-To", rec_id)
        assert self._file is not None
        fh = self._file.fh
        offset = fh.tell()
        self._write(resp)
        length = fh.tell() - offset
        self._write(req)
        self._records_in_file += 1
        date = resp.rec_headers.get_header("WARC-Date")
        self._lines.append(cdxj.line(url, date, mime, str(status), digest, length, offset,
                                     os.path.basename(self._file.final)))
