"""A WARC 1.1 sink: one request and one response record per HTTP response received.

How records are written (a thread), which headers are rewritten or redacted, and how an
archive is resumed: WarcSink's docstring.
"""
from __future__ import annotations

import io
import os
import threading
from collections import deque
from typing import Any
from urllib.parse import urlsplit

from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]  # warcio has no type hints
from warcio.statusandheaders import StatusAndHeaders  # type: ignore[import-untyped]  # (same)
from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]  # (same)

from ..secrets import redact_pairs
from .records import Record

MAX_QUEUED_BYTES = 64 * 1024 * 1024
_DROP = {"content-encoding", "transfer-encoding", "content-length"}


def _valid_length(path: str) -> int:
    """Offset just past the last complete record of an existing WARC file."""
    good = 0
    try:
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh)
            for record in it:
                record.content_stream().read()
                it.read_to_end(record)
                good = it.get_record_offset() + it.get_record_length()
    except Exception:
        pass
    return good


def repair_tail(path: str) -> int:
    """Cut a partial record off the end of a WARC file; returns the bytes removed."""
    size = os.path.getsize(path)
    good = _valid_length(path)
    if good < size:
        with open(path, "r+b") as fh:
            fh.truncate(good)
    return size - good


class WarcSink:
    """The crawler calls `response(...)` for every response (redirects included) on a sink that
    has the method; `write(record)` and `close()` make it a regular Sink.

    Records are built and gzipped (one gzip member per record, as the spec recommends) in a
    writer thread, so a 10 MB body never stalls the event loop; zlib releases the GIL, so
    compression runs on the other core. The queue to the thread is bounded in bytes; above
    the bound `response()` waits (back-pressure beats unbounded memory).

    aiohttp hands us the decoded body, so the stored HTTP headers are rewritten to match it:
    Content-Encoding and Transfer-Encoding are dropped (kept as X-Crawltop-Orig-Content-Encoding
    / -Transfer-Encoding) and Content-Length is the stored length. A body cut by --max-bytes
    gets `WARC-Truncated: length`. Secrets are redacted (core/secrets.py `redact_pairs`).

    Opening an existing archive appends to it (a resumed crawl); a partial record at the end
    (the process was killed mid-write) is cut off first (`repair_tail`).
    """

    def __init__(self, path: str, *, append: bool = True, info: dict[str, Any] | None = None) -> None:
        self.path = os.fspath(path)
        existing = append and os.path.exists(self.path) and os.path.getsize(self.path) > 0
        if existing:
            repair_tail(self.path)
        self._fh = open(self.path, "ab" if existing else "wb")
        self._writer = WARCWriter(self._fh, gzip=True, warc_version="1.1")
        self.responses = 0
        self._queue: deque[tuple | None] = deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self._closed = False
        self.redacted: set[str] = set()  # header names whose values never reach the archive
        if not existing:
            from .. import __version__ as version  # late: the package imports this module

            fields = {"software": f"crawltop/{version}", "format": "WARC File Format 1.1"}
            fields.update(info or {})
            self._writer.write_record(self._writer.create_warcinfo_record(os.path.basename(self.path), fields))
            self._fh.flush()
        self._thread = threading.Thread(target=self._run, name="crawltop-warc", daemon=True)
        self._thread.start()

    def redact_headers(self, names: set[str]) -> None:
        """Called by the crawler with its --header names (issue 21): their values are secrets."""
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
        self._fh.close()
        if self._error is not None:
            raise OSError(f"{self.path}: writing the WARC failed: {self._error}") from self._error

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
    ) -> None:
        if self._closed:
            return
        item = (url, status, reason, list(headers), bytes(body), list(request_headers), truncated, method)
        with self._cond:
            while self._queued_bytes > MAX_QUEUED_BYTES and self._error is None:
                self._cond.wait()
            self._queue.append(item)
            self._queued_bytes += len(body)
            self._cond.notify_all()
        self.responses += 1

    def flush(self) -> None:
        """Wait until everything queued is on disk (blocks)."""
        with self._cond:
            while self._queue and self._error is None:
                self._cond.wait(0.05)
        self._fh.flush()

    # -- writer thread -------------------------------------------------------------------
    def _run(self) -> None:
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
                    self._write_pair(*item)
            except BaseException as exc:  # disk full: surfaced at close
                self._error = exc
            with self._cond:
                self._queue.popleft()
                self._queued_bytes -= len(item[4])
                if not self._queue:
                    try:
                        self._fh.flush()
                    except OSError as exc:
                        self._error = exc
                self._cond.notify_all()

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
    ) -> None:
        stored: list[tuple[str, str]] = []
        orig: list[tuple[str, str]] = []
        declared_length: int | None = None
        encoded = False
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
            stored.append((name, value))
        stored.extend(orig)
        stored = redact_pairs(stored, request=False)  # Set-Cookie values: session credentials
        stored.append(("Content-Length", str(len(body))))
        if truncated is None:
            # Without a word from the crawler: a plain body shorter than announced was cut.
            truncated = not encoded and declared_length is not None and len(body) < declared_length

        warc_headers = {"WARC-Truncated": "length"} if truncated else {}
        http_headers = StatusAndHeaders(f"{status} {reason or ''}".strip(), stored, protocol="HTTP/1.1")
        resp = self._writer.create_warc_record(
            url,
            "response",
            payload=io.BytesIO(body),
            length=len(body),
            http_headers=http_headers,
            warc_headers_dict=warc_headers,
        )
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        req_list = redact_pairs(request_headers, self.redacted)  # Authorization, Cookie, --header
        if not any(n.lower() == "host" for n, _ in req_list):
            req_list.insert(0, ("Host", parts.netloc))
        req_headers = StatusAndHeaders(f"{method} {target}", req_list, protocol="HTTP/1.1", is_http_request=True)
        req = self._writer.create_warc_record(url, "request", http_headers=req_headers)
        self._writer.write_request_response_pair(req, resp)
