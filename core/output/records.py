"""One Record per URL that entered the queue, and the sinks that keep them."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import IO, Protocol, runtime_checkable

from ..errors import describe, error_kind
from ..jsonfast import dumps, dumps_str
from ..secrets import scrub


@dataclass(slots=True, kw_only=True)
class Record:
    """The reference crawler's FetchStatistic, plus depth, tries, timing and truncation,
    and where the URL came from (docs/records.md says what each means):
    `via` the page whose link first queued it or the URL that redirected to it (None for
    roots), `discovery` its hop path (core/output/provenance.py), `fetched_at` when its last
    request went out (UTC ISO 8601, ms), `digest` the payload's WARC-Payload-Digest,
    `error_kind` a code from core.errors.KINDS beside the human `error`; `kind` and the fields
    after it: docs/records.md, "Whole pages"."""

    url: str
    status: int | None = None
    next_url: str | None = None
    merged: bool = False
    error: str | None = None
    content_type: str | None = None
    encoding: str | None = None
    size: int = 0
    num_urls: int = 0
    num_new_urls: int = 0
    depth: int = 0
    tries: int = 0
    elapsed_ms: float = 0.0
    truncated: bool = False
    via: str | None = None
    discovery: str = ""
    fetched_at: str | None = None
    digest: str | None = None
    error_kind: str | None = None
    # Whole pages (core/queueing/kinds.py, core/queueing/findings.py): what the URL
    # was reached as, what an HTML page says of itself, and what a link check found.
    kind: str = ""  # page | requisite | external (set by the crawler when the Record is written)
    title: str | None = None
    canonical: str | None = None
    robots: str | None = None  # meta robots and X-Robots-Tag directives, e.g. "noindex,nofollow"
    nofollow_links: int = 0  # its links with rel=nofollow, by href (followed all the same)
    referrers: list[list[str]] | None = None  # a broken URL's other referrers: [page, tag]
    referrers_more: int = 0  # and how many more pages referred to it
    broken_links: list[list[str]] | None = None  # a page's links to URLs already recorded broken: [url, tag]
    missing_fragments: list[list[str]] | None = None  # [page, target, fragment] found when this was written
    # --browser: what the page's tab did (core/fetching/pagedone.py): {"requests", "failed", "bytes"}
    browser: dict[str, int] | None = None

    def fail(self, exc: BaseException, message: str | None = None) -> None:
        """Set the human error and its stable kind together."""
        self.error = scrub(message if message is not None else describe(exc))  # no secret in a record
        self.error_kind = error_kind(exc)

    def to_dict(self) -> dict[str, object]:
        """Every field; the findings (SPARSE) only when there are any (most records have
        none, and a line per URL should not carry a row of nulls)."""
        d = dict(zip(FIELDS, _VALUES(self), strict=True))
        for name in SPARSE:
            if not d[name]:
                del d[name]
        return d

    def to_json(self) -> str:
        return dumps_str(self.to_dict())


FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Record))
_VALUES = attrgetter(*FIELDS)  # every field's value in one call in C
SPARSE = ("title", "canonical", "robots", "nofollow_links", "referrers", "referrers_more", "broken_links",
          "missing_fragments", "browser")


class Sink(Protocol):
    def write(self, record: Record) -> None: ...
    def close(self) -> None: ...


@runtime_checkable
class ResponseSink(Sink, Protocol):
    """A sink that also keeps each HTTP response (core/output/warc.py): the crawler asks with
    isinstance once a crawl starts, and builds the arguments only for such sinks."""

    def response(self, url: str, status: int, reason: str, headers: list[tuple[str, str]], body: bytes,
                 request_headers: list[tuple[str, str]], *, truncated: bool | None = None,
                 method: str = "GET", digest: str | None = None) -> Awaitable[None] | None:
        """Keep one response; what it returns, if anything, is awaited before the URL
        counts as done (the WARC: written to the file)."""

    def flush(self) -> None:
        """Block until every response handed over is kept (a stop's last moment)."""


@runtime_checkable
class Redacting(Protocol):
    """A sink told which request header names hold secrets (--header values)."""

    def redact_headers(self, names: set[str]) -> None: ...


_BUFFER = 1 << 20


class JsonlSink:
    """Streams records as JSON lines, flushed at most every FLUSH_EVERY seconds.

    A flush per record cost a few percent of a fast crawl; a kill -9 now loses at most
    the last fraction of a second of lines, up to its 1 MB buffer (a clean stop loses nothing).
    """

    FLUSH_EVERY = 0.2

    def __init__(self, path: str) -> None:
        # orjson's bytes as they are: no decode, no re-encode; a 1 MB buffer, so the lines go
        # out at the flush (every FLUSH_EVERY) in a few writes, not a write per 8 KB
        self._fh: IO[bytes] = open(path, "wb", buffering=_BUFFER)
        self._flushed = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None

    def write(self, record: Record) -> None:
        self._fh.write(dumps(record.to_dict()) + b"\n")
        if time.monotonic() - self._flushed >= self.FLUSH_EVERY:
            self._flush()
        elif self._timer is None:  # a quiet spell (paused, slow servers) must not hold lines back
            self._timer = asyncio.get_running_loop().call_later(self.FLUSH_EVERY, self._flush)

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._fh.closed:
            self._fh.flush()
        self._flushed = time.monotonic()

    def close(self) -> None:
        self._flush()
        self._fh.close()
