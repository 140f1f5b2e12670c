"""Sitemaps: found per origin, fetched as ordinary frontier items, read safely.

How a sitemap gets in, the guessed /sitemap.xml probe and what its record looks like: `Sitemaps`;
the parsing safety rules: `parse`.
"""
from __future__ import annotations

import asyncio
import io
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp

from .. import errors
from ..output.provenance import hop
from ..parsing.urls import canonical
from .fetch import read_capped

if TYPE_CHECKING:
    from ..monitor.stats import Stats
    from ..output.records import Record
    from ..queueing.item import Item
    from ..queueing.scope import Scope
    from .fetch import Response
    from .robots import Robots

SITEMAP_MAX_BYTES = 50 * 1024 * 1024  # the sitemaps.org limit, uncompressed
MAX_ENTRIES = 50_000  # the sitemaps.org limit per file
MAX_NESTING = 3  # sitemap files from a root: named/guessed, listed by an index, one more
IN_THREAD = 1024 * 1024  # parse bodies bigger than this off the event loop
_GZIP = b"\x1f\x8b"
_ROOTS = {"urlset": "urlset", "sitemapindex": "index"}
SNIFF_BYTES = 16 * 1024  # what a probe reads of a guessed /sitemap.xml to judge it
_SITEMAP_ROOT = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?(?:urlset|sitemapindex)[\s>/]")


@dataclass(slots=True)
class Parsed:
    kind: str = "urlset"  # urlset | index | text | html
    urls: list[str] = field(default_factory=list)
    error: str | None = None


def is_sitemap(discovery: str) -> bool:
    """A sitemap file's hop path ends in M, maybe followed by redirects."""
    return discovery.rstrip("R").endswith("M")


def nesting(discovery: str) -> int:
    return discovery.count("M")


def inflate(body: bytes, cap: int = SITEMAP_MAX_BYTES) -> bytes:
    """Gunzip at most cap bytes; SitemapError beyond (a bomb) or on a broken stream."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out: list[bytes] = []
    size = 0
    data = body
    try:
        while data:
            chunk = d.decompress(data, 1024 * 1024)
            size += len(chunk)
            if size > cap:
                raise errors.SitemapError(f"larger than {cap // 2**20} MiB uncompressed")
            out.append(chunk)
            data = d.unconsumed_tail
            if d.eof:
                break
    except zlib.error as exc:
        raise errors.SitemapError(f"broken gzip: {exc}") from None
    if not d.eof:
        raise errors.SitemapError("gzip stream ends early")
    return b"".join(out)


def parse(body: bytes, cap: int = SITEMAP_MAX_BYTES, max_entries: int = MAX_ENTRIES) -> Parsed:
    """Entries of a sitemap body (XML urlset or index, plain text, gzipped or not).

    Safety: XML is parsed incrementally by defusedxml's iterparse with DTDs forbidden, so
    entity expansion (billion laughs), external entities and network access cannot happen;
    gzip (by magic bytes, whatever the Content-Type says) is inflated in bounded steps.
    """
    if body[:2] == _GZIP:
        try:
            body = inflate(body, cap)
        except errors.SitemapError as exc:
            return Parsed(error=str(exc))
    elif len(body) > cap:
        return Parsed(error=f"larger than {cap // 2**20} MiB")
    head = body[:512].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith((b"<!doctype html", b"<html")):
        return Parsed(kind="html", error="an HTML page, not a sitemap")
    if head.startswith(b"<"):
        return _xml(body, max_entries)
    return _text(body, max_entries)


def looks_like_sitemap(head: bytes) -> bool:
    """Judge a sitemap by its first bytes: an XML urlset or index, or a URL per line."""
    if head[:2] == _GZIP:
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, SNIFF_BYTES)
        except zlib.error:
            return False
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:512].lower().startswith((b"<!doctype html", b"<html")):
        return False
    if text.startswith(b"<"):
        return _SITEMAP_ROOT.search(text) is not None
    first = text.split(b"\n", 1)[0].strip().decode("utf-8", errors="replace")
    return first.lower().startswith(("http://", "https://")) and canonical(first) is not None


def _xml(body: bytes, max_entries: int) -> Parsed:
    # Imported here, on the first sitemap read: XML parsing is RSS that a crawl whose hosts have
    # no sitemap never needs (docs/benchmarks/memory.md, "Peak memory on large pages, continued").
    from xml.etree.ElementTree import ParseError

    from defusedxml import DefusedXmlException  # type: ignore[import-untyped]  # types-defusedxml is not a dependency
    from defusedxml.ElementTree import iterparse  # type: ignore[import-untyped]  # (same)

    out = Parsed()
    root = None
    try:
        for event, elem in iterparse(io.BytesIO(body), events=("start", "end"), forbid_dtd=True):
            name = elem.tag.rpartition("}")[2]
            if root is None:
                root = elem
                if name not in _ROOTS:
                    out.error = f"not a sitemap: root element <{name[:40]}>"
                    return out
                out.kind = _ROOTS[name]
                continue
            if event != "end":
                continue
            if name == "loc":
                url = canonical((elem.text or "").strip())
                if url is not None:
                    if len(out.urls) >= max_entries:
                        out.error = f"more than {max_entries:,} entries; the rest were not read"
                        return out
                    out.urls.append(url)
            elif name in ("url", "sitemap"):
                root.clear()  # what was read is no longer needed: memory stays flat
    except (ParseError, DefusedXmlException) as exc:
        out.error = f"malformed XML: {type(exc).__name__}: {str(exc)[:200]}"
        return out
    if root is None:
        out.error = "empty sitemap"
    return out


def _text(body: bytes, max_entries: int) -> Parsed:
    out = Parsed(kind="text")
    bad = 0
    for line in body.decode("utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        url = canonical(line) if line.lower().startswith(("http://", "https://")) else None
        if url is None:
            bad += 1
        elif len(out.urls) >= max_entries:
            out.error = f"more than {max_entries:,} entries; the rest were not read"
            break
        else:
            out.urls.append(url)
    if bad and not out.urls:
        out.error = "not a sitemap: neither XML nor a list of URLs"
    elif bad:
        out.error = f"{bad} lines are not http(s) URLs"
    elif not out.urls and not out.error:
        out.error = "empty sitemap"
    return out


class Sitemaps:
    """Per-crawl: which origins were visited, and reading fetched sitemaps into the frontier.

    Named sitemaps: the first time a worker takes a URL of an origin (scheme://host:port),
    `visit()` reads the `Sitemap:` lines of its robots.txt (the same cached fetch that decides
    robots rules) and queues each one in scope. A sitemap is then a frontier item like any
    other (session, politeness, retries, robots, size cap, exactly one Record); only its body
    is read here instead of being parsed as HTML.

    The guessed /sitemap.xml, a probe that leaves no trace (lychee, Scrapy and
    Heritrix don't invent records for URLs nobody named either): with no sitemap named (or
    `--no-robots`), once the origin has answered one request (`answered()`, after any HTTP
    response), the worker probes it: one GET, never retried, robots.txt obeyed, redirects
    followed within scope, reading only its first SNIFF_BYTES. Only if that looks like a
    sitemap is /sitemap.xml queued (discovery `M`, via null) and recorded like a named one.
    A 404, an HTML page or a network error leaves no record and spends no --max-pages budget;
    it only counts in `stats.sitemap_probes`. An origin that never answers is never probed.
    The probe is a side request like robots.txt: it does not wait for the host's --delay.
    Each process probes an origin once per run.

    Records: the hop path ends in `M` (`MM` for one listed by an index, `MMM` one level
    deeper); `via` is the robots.txt that named it, the index that listed it, or null for a
    guessed /sitemap.xml. `num_urls` counts its in-scope entries and `num_new_urls` those it
    queued; the entries' paths end in `S` and their `via` is the sitemap. A sitemap that is
    not XML or text, malformed, over SITEMAP_MAX_BYTES uncompressed, over MAX_ENTRIES, or an
    index nested deeper than MAX_NESTING gets `error_kind: bad-sitemap` and the crawl goes on;
    entries read before a parse error are kept.
    """

    def __init__(
        self,
        *,
        robots: Robots | None,
        scope: Scope,
        admit: Callable[[str, int, int, str | None, str], bool],
        max_redirect: int,
        max_depth: int | None,
        session: aiohttp.ClientSession | None = None,
        stats: Stats | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._robots = robots
        self._scope = scope
        self._admit = admit
        self._max_redirect = max_redirect
        self._max_depth = max_depth
        self._origins: set[str] = set()
        self._session = session  # None: no probes (the guessed /sitemap.xml is queued like a named one)
        self._stats = stats
        self._timeout = aiohttp.ClientTimeout(total=timeout * 3, sock_connect=timeout, sock_read=timeout)
        self._guess: set[str] = set()  # origins whose /sitemap.xml waits for their first answer

    async def visit(self, url: str) -> None:
        """On an origin's first URL: queue the sitemaps robots.txt names; with none, the
        origin waits for its first answer to have /sitemap.xml probed (`answered()`)."""
        origin = url[: url.find("/", url.find("//") + 2)]
        if origin in self._origins:
            return
        self._origins.add(origin)
        named: list[str] = []
        if self._robots is not None:
            rules = await self._robots.rules(origin)
            if rules is not None:
                named = [u for u in (canonical(s) for s in rules.sitemaps) if u is not None]
        if named:
            for u in dict.fromkeys(named):
                if self._scope.allows(u):
                    self._admit(u, self._max_redirect, 0, origin + "/robots.txt", "M")
        elif self._session is None:
            self._admit(origin + "/sitemap.xml", self._max_redirect, 0, None, "M")
        else:
            self._guess.add(origin)

    def wants_probe(self, url: str) -> bool:
        """The origin of `url` answered and its /sitemap.xml is still to be probed."""
        return bool(self._guess) and url[: url.find("/", url.find("//") + 2)] in self._guess

    async def answered(self, url: str) -> None:
        """The origin of `url` answered a request: probe its /sitemap.xml now, once."""
        if not self._guess:
            return
        origin = url[: url.find("/", url.find("//") + 2)]
        if origin not in self._guess:
            return
        self._guess.discard(origin)
        guess = origin + "/sitemap.xml"
        if not self._scope.allows(guess):
            return
        if self._robots is not None and not (await self._robots.check(guess))[0]:
            return
        if self._stats is not None:
            self._stats.sitemap_probes += 1
        if await self._sniff(guess) and self._admit(guess, self._max_redirect, 0, None, "M"):
            if self._stats is not None:
                self._stats.sitemap_found += 1

    async def _sniff(self, url: str) -> bool:
        """One GET, never retried: True if the answer looks like a sitemap."""
        assert self._session is not None
        try:
            async with self._session.get(url, timeout=self._timeout, max_redirects=self._max_redirect) as resp:
                if resp.status != 200 or not self._scope.allows(str(resp.url)):
                    return False
                head, _ = await read_capped(resp, SNIFF_BYTES)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError, UnicodeError):
            return False
        return looks_like_sitemap(head)

    async def read(self, item: Item, resp: Response, record: Record) -> None:
        """Queue a fetched sitemap's entries; errors go on its record."""
        if resp.status != 200:
            return
        body = resp.body
        parsed = await asyncio.to_thread(parse, body) if len(body) > IN_THREAD else parse(body)
        if parsed.kind == "html" and item.via is None and item.discovery == "M":
            return  # the guessed /sitemap.xml of a site without one: a soft 404, no error
        urls = [u for u in parsed.urls if self._scope.allows(u)]
        record.num_urls = len(urls)
        if parsed.error:
            record.fail(errors.SitemapError(parsed.error))
        elif resp.truncated:
            record.fail(errors.SitemapError("cut at --max-bytes; entries after the cut were not read"))
        if parsed.kind == "index":
            if nesting(item.discovery) >= MAX_NESTING:
                record.fail(errors.SitemapError(
                    f"index nested deeper than {MAX_NESTING}; its {len(urls)} sitemaps were not fetched"))
                return
            path, depth = hop(item.discovery, "M"), item.depth
        else:
            if self._max_depth is not None and item.depth + 1 > self._max_depth:
                return
            path, depth = hop(item.discovery, "S"), item.depth + 1
        via, left = item.url, self._max_redirect
        record.num_new_urls = sum(self._admit(u, left, depth, via, path) for u in urls)
