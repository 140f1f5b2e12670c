"""One HTTP attempt, with the body capped, and the retry policy around attempts."""
from __future__ import annotations

import codecs
import functools
import io
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
from multidict import CIMultiDictProxy

from ..monitor.sanitize import clean
from ..output.provenance import new_hasher, payload_digest
from ..parsing.cuts import CutPage, cuts, worth_cutting
from ..parsing.defuse import slim_pieces, tag_heavy
from .budget import LARGE, BodyBudget
from .steps import HOOKS

REDIRECTS = frozenset((301, 302, 303, 307, 308))
HTML_TYPES = frozenset(("text/html", "application/xhtml+xml"))
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.I)


@dataclass(slots=True)
class Response:
    status: int
    reason: str
    headers: CIMultiDictProxy[str]
    body: bytes
    truncated: bool
    content_type: str | None  # the header as sent (cleaned), parameters kept; None if absent
    mime: str  # aiohttp's parse of it, lower-case type/subtype: decides HTML or not
    charset: str | None
    request_headers: CIMultiDictProxy[str]  # not copied: only a WARC sink reads them
    digest: str | None = None  # sha1 of the body as stored, WARC's form (core/output/provenance.py)
    held: int = 0  # bytes taken from the crawl's BodyBudget for this body: give them back once parsed
    # What a browser adds (core/fetching/browser.py); aiohttp leaves both unset:
    # the page's HTML once its scripts ran (links are read from it), and every other URL the
    # page loaded, each claimed for this crawl, with its own answer (core/fetching/fetcher.py).
    dom: str | None = None
    loaded: list[Loaded] | None = None
    error: Exception | None = None  # the browser could not finish the page (a hung tab): why
    moved: str | None = None  # where a script sent the page (location = ...): its redirect
    browser: dict[str, int] | None = None  # the tab's requests, failed requests and bytes

    @property
    def is_html(self) -> bool:
        return self.mime in HTML_TYPES


@dataclass(slots=True)
class Loaded:
    """A URL a page loaded in the browser (an image, a script, a fetch()), claimed for the
    crawl when its request went out: it ends in a Record of its own from this answer, never
    a second request. `response` None: no answer, and `error` says why."""

    url: str
    letter: str  # its hop letter as a requisite of the page (core/output/provenance.py)
    via: str  # the page, or the URL that redirected to it
    redirected: bool  # reached by a redirect (its hop is R)
    response: Response | None = None
    error: str | None = None


async def fetch_once(
    session: aiohttp.ClientSession, url: str, max_bytes: int, reading: Callable[[], None],
    sent: Callable[[], None] | None = None, phase: Callable[[str], None] | None = None,
    budget: BodyBudget | None = None,
) -> Response:
    """GET without following redirects; read at most max_bytes of (decoded) body.
    `sent` is called when the request's headers are written, `phase` as the request moves
    on (core/fetching/steps.py), `reading` once the response's headers are in. A body of
    LARGE bytes or more is read only once `budget` lets it (core/fetching/budget.py); the
    Response's `held` says what it took, for the caller to give back once it is parsed."""
    token = HOOKS.set((sent, phase) if sent is not None or phase is not None else None)
    try:
        return await _get(session, url, max_bytes, reading, budget)
    finally:
        HOOKS.reset(token)


async def _get(session: aiohttp.ClientSession, url: str, max_bytes: int, reading: Callable[[], None],
               budget: BodyBudget | None) -> Response:
    async with session.get(url, allow_redirects=False) as resp:
        reading()
        sha1 = new_hasher()
        held = 0
        over: Callable[[], Awaitable[None]] | None = None
        if budget is not None and max_bytes >= LARGE:
            length = resp.content_length
            if length is None or "Content-Encoding" in resp.headers:  # decoded size unknown

                async def over() -> None:
                    nonlocal held
                    held = await budget.take(budget.limit)
            elif length >= LARGE:
                held = await budget.take(min(length, max_bytes))
        try:
            body, truncated = await read_capped(resp, max_bytes, sha1, over)
        except BaseException:
            if budget is not None:
                budget.give(held)
            raise
        try:
            charset = resp.charset
        except (ValueError, LookupError):
            charset = None
        return Response(
            status=resp.status,
            reason=resp.reason or "",
            headers=resp.headers,
            body=body,
            truncated=truncated,
            content_type=_raw_content_type(resp.headers.get("Content-Type")),
            mime=resp.content_type,
            charset=charset,
            request_headers=resp.request_info.headers,
            digest=payload_digest(sha1),
            held=held,
        )


def _raw_content_type(value: str | None) -> str | None:
    """What the server said, even if it is no MIME type (`foo`): records report, not judge."""
    return None if value is None else clean(value, 200)


async def read_capped(resp: aiohttp.ClientResponse, cap: int, sha1: Any = None,
                      over: Callable[[], Awaitable[None]] | None = None) -> tuple[bytes, bool]:
    """(body, truncated): at most cap bytes. StreamReader.read(n) returns what is buffered,
    so one read is not enough; loop until EOF or the cap.  A hasher given as sha1 sees
    exactly the bytes kept, chunk by chunk as they arrive (the payload digest). `over` is
    awaited once, when LARGE bytes have been read (a body of unknown size waits there for
    the crawl's BodyBudget). From LARGE bytes on, chunks go into a BytesIO: its buffer grows
    in place and getvalue() hands it over uncopied, where joining a list of chunks held
    the chunks and the body at once, twice the body (docs/benchmarks/memory.md, "Peak memory on
    large pages, continued")."""
    chunks: list[bytes] = []
    into: io.BytesIO | None = None
    size = 0
    truncated = False
    while True:
        if size >= LARGE and into is None:
            into = io.BytesIO()
            into.writelines(chunks)
            chunks.clear()
            if over is not None:
                await over()
        chunk = await resp.content.read(cap - size + 1)
        if not chunk:
            break
        if size + len(chunk) > cap:
            chunk, truncated = chunk[: cap - size], True
        if sha1 is not None:
            sha1.update(chunk)
        if into is None:
            chunks.append(chunk)
        else:
            into.write(chunk)
        size += len(chunk)
        if truncated:
            break
    return (b"".join(chunks) if into is None else into.getvalue()), truncated


def retryable(status: int) -> bool:
    return status == 429 or status >= 500


def backoff(base: float, attempt: int, cap: float) -> float:
    """Exponential with full jitter around the middle, so retries don't stampede."""
    return min(cap, base * 2 ** (attempt - 1) * random.uniform(0.5, 1.5))


def retry_after(value: str | None, cap: float) -> float | None:
    """Seconds from a Retry-After header (delta or HTTP date), capped; None if unusable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(cap, float(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return min(cap, max(0.0, (when - datetime.now(UTC)).total_seconds()))


def decode(resp: Response, parts: bool = True) -> tuple[str | bytes | CutPage, str, bool]:
    """(text to parse, encoding, slimmed): header charset, then <meta charset>, then utf-8.

    UTF-8 (or plain ASCII) bodies stay bytes: that is what Lexbor parses, so a str copy
    (up to 4 bytes a character) and its re-encoding are saved; invalid sequences become
    U+FFFD either way. A large one is cut in CutPage where core/parsing/cuts.py finds it safe
    (with `parts`), to be slimmed (if tag-heavy) and parsed a part at a time. Otherwise a
    tag-heavy body is slimmed here (core/parsing/defuse.py), which keeps its links and drops
    most of its parse tree; its resp.body is then emptied before the slim copy is joined
    (the sinks and the digest have had it), so the two are not in memory at once.
    `slimmed`: tags were (or will be) defused, so the page's ids are not all known."""
    body, encoding = resp.body, _encoding(resp)
    heavy = tag_heavy(body) and _ascii_compatible(encoding)
    utf8 = _codec(encoding) == "utf-8" or (body.isascii() and _ascii_compatible(encoding))
    if parts and utf8 and worth_cutting(body):
        bounds = cuts(body)
        if bounds:
            return CutPage(body, bounds, heavy), encoding, heavy
    slimmed = False
    if heavy:
        pieces = slim_pieces(body)
        if pieces is not None:  # the body goes before the join: the pieces hold all of it
            resp.body = body = b""
            body, slimmed = b"".join(pieces), True
            del pieces
    if utf8:
        return body, encoding, slimmed
    return body.decode(encoding, errors="replace"), encoding, slimmed


def _encoding(resp: Response) -> str:
    for candidate in (resp.charset, _meta_charset(resp.body)):
        if candidate and _codec(candidate):
            return candidate.lower()
    return "utf-8"


@functools.lru_cache(maxsize=64)
def _codec(name: str) -> str | None:
    """Python's name for a text encoding; None for unknown ones and for rot13 and the like."""
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError):
        return None
    return info.name if getattr(info, "_is_text_encoding", True) else None  # bytes.decode's test


@functools.lru_cache(maxsize=64)
def _ascii_compatible(name: str) -> bool:
    """ASCII bytes mean ASCII in every state (so slim() may read them, and an ASCII body
    is its own text): not UTF-16/32 or EBCDIC, nor ISO-2022, HZ or UTF-7, whose escapes
    change what the bytes after them mean."""
    try:
        return _ASCII_PROBE.decode(name, "replace") == _ASCII_PROBE.decode("ascii")
    except (LookupError, ValueError):
        return False


_ASCII_PROBE = bytes(range(128)) + b"\x1b$B<a\x1b(B ~{<a~} +ADw-"


def _meta_charset(body: bytes) -> str | None:
    m = _META_CHARSET.search(body[:4096])
    return m.group(1).decode("ascii") if m else None
