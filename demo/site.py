"""The bundled demo site: a deterministic local website that exercises every path of the crawler.

Every response is a pure function of the request path and query (seeded per page), so
a crawl of it always yields the same records and `EXPECTED` can be stated exactly.
Nothing here touches the network beyond 127.0.0.1.
"""
from __future__ import annotations

import asyncio
import functools
import gzip
import html
import random
import re
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urldefrag, urljoin, urlsplit, urlunsplit

from aiohttp import web

from . import app

SECTIONS = ("news", "world", "science", "tech", "arts", "sports", "travel", "food", "health", "business")
ARTICLES = 190  # per section
PER_PAGE = 19
INDEX_PAGES = ARTICLES // PER_PAGE  # /news/, /news/?page=2&sort=new, ...
LATENCY_MS = (40, 480)  # ~2,550 fetches at concurrency 10: about a minute and a quarter
SLOW_SECONDS = 2.0
STALL_SECONDS = 45.0  # longer than the crawler's default 30 s timeout, on purpose
SLOW = ("/slow/1/", "/slow/2/")
STALL = "/stall/"
BROKEN = ("/broken/", "/api/status")  # always 500, however often retried
# A second host the demo serves on 127.0.0.2 (no DNS query, ever): external links are checked
# once and never followed; one fragment names nothing there. Its /partner/more/ must never be
# fetched.
EXT_ADDRESS = "127.0.0.2"
EXTERNAL = ("{ext}/partner/", "{ext}/partner/#top-stories", "{ext}/gone/", "{ext}/partner/#no-such-section")
# Requisites: every HTML page loads the stylesheet and the logo; an article its section's
# photo in a srcset. The stylesheet loads a background and a font that is missing; the arts
# section's 2x photo is missing: one broken thing on 190 pages (`crawltop report`).
STYLESHEET, LOGO = "/static/site.css", "/static/logo.png"
CSS_REFS = ("/static/img/paper.png", "/static/fonts/demo.woff")
MISSING_STATIC = ("/static/fonts/demo.woff", "/static/photos/arts@2x.jpg")
_PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
ROBOTS = "User-agent: *\nDisallow: /private/\n"
# Sitemaps (named by robots.txt): an index, a gzipped urlset and a plain-text one. The
# archive pages are linked from nowhere: only the sitemap finds them; /archive/2019/ is
# gone (a 404 whose `via` is the sitemap). No redirect source or target is listed, so
# the merge argument below still holds.
SITEMAP_INDEX = "/sitemaps/index.xml"
ARCHIVE = ("/archive/2023/", "/archive/2024/", "/archive/2025/")
SITEMAPS: dict[str, tuple[str, tuple[str, ...]]] = {
    SITEMAP_INDEX: ("index", ("/sitemaps/sections.xml.gz", "/sitemaps/archive.txt")),
    "/sitemaps/sections.xml.gz": ("urlset", ("/", *(f"/{s}/" for s in SECTIONS), "/about/", "/contact/")),
    "/sitemaps/archive.txt": ("text", (*ARCHIVE, "/archive/2019/")),
}
FILES: dict[str, tuple[str, bytes]] = {
    "/files/report.pdf": ("application/pdf", b"%PDF-1.4\n% demo report\n" + bytes(range(256)) * 8 + b"\n%%EOF\n"),
    "/data.json": ("application/json", b'{"site": "crawltop demo", "sections": %d}' % len(SECTIONS)),
}
# Why every merge is order-independent: a crawler marks a URL seen when it queues it,
# and "/" is the only URL in flight until its links are queued, all at once. So a
# redirect target linked from "/" is always seen before any redirect to it is fetched
# (always a merge), and every other redirect target is reachable through exactly one
# redirect and no link (never a merge), except /loop/b -> /loop/a: b is only reached by
# fetching a, so a is always seen by then (always a merge). test_demo_site re-walks the
# model in random orders to check this.
# Merge sources (linked from articles only, depth >= 2): /old/1-5 -> /about/,
# /index.html -> /, /latest/ -> /news/, and the slashless /<section>, /about -> .../
REDIRECTS: dict[str, tuple[int, str]] = {
    **{f"/old/{i}": (code, "/about/") for i, code in enumerate((301, 302, 307, 308, 301), 1)},
    "/index.html": (301, "/"),
    "/latest/": (302, "/news/"),
    "/chain/1": (302, "/chain/2"),
    "/chain/2": (307, "{origin}/chain/3"),  # absolute Location
    "/chain/3": (308, "end"),  # relative Location -> /chain/end
    "/loop/a": (302, "/loop/b"),
    "/loop/b": (301, "a"),
    "/moved/": (308, "/gone/"),  # redirect to a 404
}
# Pages that each article links one of, round-robin, so all are reached from depth >= 2.
SPECIALS = (
    *(f"/old/{i}" for i in range(1, 6)), "/chain/1", "/loop/a", "/latest/", "/moved/",
    *SLOW, STALL, *BROKEN, *FILES, "/intl/latin1/", "/intl/meta/",
    *(f"/private/report-{k}/" for k in range(8)), *(f"/missing/{k}/" for k in range(6)),
)
# A calendar trap, as real sites have: every month links the 84 months of the years
# around it, so the queue fills with /calendar/?month=... query variants and the queue
# view flags it (`u`). Bounded, so the demo still ends and EXPECTED stays exact: months
# outside CALENDAR_YEARS are never linked (a real endless calendar is in tests/support/trapsite.py).
CALENDAR = "/calendar/"
CALENDAR_YEARS = (2000, 2039)
CALENDAR_START = "2026-01"  # linked from the home page
_MONTH = re.compile(r"(\d{4})-(\d{2})")
_ARTICLE = re.compile(r"/([a-z]+)/art-(\d+)/")
_PRIVATE = re.compile(r"/private/report-(\d+)/")


@dataclass(frozen=True, slots=True)
class Reply:
    """One response, as data: the server renders it and the EXPECTED walk reads its links."""

    status: int
    title: str = ""
    links: tuple[tuple[str, str], ...] = ()  # (href exactly as written in the HTML, text)
    base: str | None = None
    text: str = ""
    location: str | None = None
    content_type: str = "text/html"
    charset: str | None = "utf-8"  # None: declared only by <meta charset>
    meta_charset: str | None = None
    body: bytes | None = None  # non-HTML payload
    photo: str | None = None  # an article's section: its photo, with a 2x in srcset


def requisites(r: Reply) -> tuple[str, ...]:
    """What an HTML reply loads to show itself (render() writes them), root-relative."""
    if r.body is not None or r.location is not None:
        return ()
    photos = (f"/static/photos/{r.photo}.jpg", f"/static/photos/{r.photo}@2x.jpg") if r.photo else ()
    return (STYLESHEET, LOGO, *photos)


@dataclass(frozen=True, slots=True)
class Expected:
    """What a full default crawl from / records (host scope, robots obeyed, max-redirect 10).

    urls == pages + requisites + externals + files + redirects + not_found + server_errors
            + robots_blocked + sitemaps.
    `pages` includes the stall page, which only completes when stall_seconds is shorter
    than the crawler's timeout (fast mode); otherwise it ends as a timeout error.
    """

    urls: int
    pages: int
    requisites: int  # requisite URLs that answered 200 (404s are in not_found)
    externals: int  # external links that answered 200 (404s are in not_found)
    missing_fragments: int  # (page, link#fragment) pairs whose fragment names nothing
    files: int
    redirects: int
    merges: int
    not_found: int
    server_errors: int
    robots_blocked: int
    sitemaps: int


def latency(path: str) -> float:
    """Seconds a page takes in normal mode: fixed per path, so runs are comparable."""
    lo, hi = LATENCY_MS
    return (lo + zlib.crc32(path.encode()) % (hi - lo + 1)) / 1000


def _nav() -> list[tuple[str, str]]:
    return [("/", "Home"), *((f"/{s}/", s.title()) for s in SECTIONS)]


def _article(s: int, n: int, origin: str, ext: str) -> Reply:
    sec = SECTIONS[s]
    rng = random.Random(f"42:{sec}:{n}")
    based = n % 10 == 3  # these pages carry <base href> pointing at their section
    base = None if not based else (f"/{sec}/" if n % 20 == 3 else f"{origin}/{sec}/")
    up = "" if based else "../"  # relative links are written against the effective base
    links = [("#top", "Top"), *_nav(), (f"/{sec}" if n % 7 == 0 else up or "./", f"All {sec}")]
    links += [(f"{up}art-{m}/", "Previous" if m < n else "Next") for m in (n - 1, n + 1) if 0 <= m < ARTICLES]
    for m in rng.sample([m for m in range(ARTICLES) if m != n], 4):
        links.append((f"{up}art-{m}/" + ("#comments" if m % 3 == 0 else ""), f"Related {m}"))
    for _ in range(2):
        t, m = rng.randrange(len(SECTIONS)), rng.randrange(ARTICLES)
        links.append((f"{origin}/{SECTIONS[t]}/art-{m}/", f"More from {SECTIONS[t]}"))
    if n % 37 == 0:
        links.append((f"{up}art-{ARTICLES + s}/", "Deleted story"))  # 404
    links += [("mailto:editor@example.invalid", "Mail"), ("javascript:void(0)", "Share"),
              ("tel:+15555550100", "Call"), ("/about" if n % 5 == 0 else "/about/", "About"),
              ("/contact/", "Contact"), (SPECIALS[(s * ARTICLES + n) % len(SPECIALS)], "See also")]
    if n % 11 == 0:
        links.append(("/index.html", "Front page"))
    if n % 4 == 0:
        links.append((EXTERNAL[n // 4 % len(EXTERNAL)].format(ext=ext), "Elsewhere"))
    words = " ".join(rng.choice(("crawl", "queue", "asyncio", "worker", "redirect", "robots")) for _ in range(40))
    return Reply(200, f"{sec.title()} article {n}", tuple(links), base, words, photo=sec)


def _index(s: int, page: int) -> Reply:
    sec = SECTIONS[s]

    def at(k: int) -> str:  # query-only relative hrefs, with &amp; as HTML requires
        return "./" if k == 1 else f"?page={k}&amp;sort=new"

    links = [*_nav(), (f"/search/?q={sec}&amp;lang=en", "Search")]
    links += [(f"art-{m}/", f"Article {m}") for m in range((page - 1) * PER_PAGE, page * PER_PAGE)]
    pager = {1, page - 1, page + 1, INDEX_PAGES} & set(range(1, INDEX_PAGES + 1)) - {page}
    links += [(at(k), f"Page {k}") for k in sorted(pager)]
    return Reply(200, f"{sec.title()}, page {page}", tuple(links))


def _calendar(month: str) -> Reply | None:
    m = _MONTH.fullmatch(month)
    lo, hi = CALENDAR_YEARS
    if not m or not lo <= int(m[1]) <= hi or not 1 <= int(m[2]) <= 12:
        return None
    y = int(m[1])
    links = [("/", "Home")]
    links += [(f"?month={yy:04d}-{mm:02d}", f"{yy}-{mm:02d}")
              for yy in range(max(lo, y - 3), min(hi, y + 3) + 1) for mm in range(1, 13)]
    return Reply(200, f"Events, {month}", tuple(links), text="No events this month.")


def _page(path: str, query: Mapping[str, str], origin: str, ext: str = "") -> Reply | None:
    """The 200 HTML page at path, or None."""
    simple = [*_nav(), ("/about/", "About")]
    if path == "/":
        featured = [(f"{sec}/art-0/", f"Top {sec} story") for sec in SECTIONS]
        return Reply(200, "crawltop demo", (*_nav(), ("/about/", "About"), ("/contact/", "Contact"), *featured,
                                            (f"{CALENDAR}?month={CALENDAR_START}", "Events")))
    if path in ("/about/", "/contact/", "/chain/end", STALL, *SLOW, *ARCHIVE):
        extra = [("mailto:hello@example.invalid", "Mail"), ("tel:+15555550100", "Call")]
        return Reply(200, path.strip("/").title(), (*simple, *extra), text="A page of the demo site.")
    if path == "/intl/latin1/":
        return Reply(200, "Latin-1", tuple(simple), text="Café crème, naïve jalapeño, Straße.", charset="iso-8859-1")
    if path == "/intl/meta/":
        return Reply(200, "Meta charset", tuple(simple), text="“Smart quotes” – and a € sign.",
                     charset=None, meta_charset="windows-1252")
    if path == CALENDAR and set(query) == {"month"}:
        return _calendar(query["month"])
    if path == "/search/" and query.get("q") in SECTIONS:
        return Reply(200, f"Search: {query['q']}", tuple((f"/{query['q']}/art-{m * 37}/", "Hit") for m in range(5)))
    if m := _PRIVATE.fullmatch(path):  # robots-disallowed; links one level deeper so a leak shows
        deeper = ((f"/private/report-{int(m[1]) + 100}/", "More"),) if int(m[1]) < 100 else ()
        return Reply(200, "Private", deeper)
    if (sec := path.strip("/")) in SECTIONS and path == f"/{sec}/":
        if query.get("page", "").isdigit() and query.get("sort") == "new":
            page = int(query["page"])
        else:
            page = 1 if not query else 0
        return _index(SECTIONS.index(sec), page) if 1 <= page <= INDEX_PAGES else None
    if (m := _ARTICLE.fullmatch(path)) and m[1] in SECTIONS and int(m[2]) < ARTICLES:
        return _article(SECTIONS.index(m[1]), int(m[2]), origin, ext)
    return None


def route(path: str, query: Mapping[str, str], origin: str, ext: str = "") -> Reply:
    """Pure: the reply for a request, used by both the server and the EXPECTED walk.
    `ext` is the origin of the second host (external links)."""
    if path in REDIRECTS:
        code, loc = REDIRECTS[path]
        return Reply(code, location=loc.format(origin=origin))
    if path == "/robots.txt":
        return Reply(200, body=f"{ROBOTS}Sitemap: {origin}{SITEMAP_INDEX}\n".encode(), content_type="text/plain")
    if path in SITEMAPS:
        return _sitemap(path, origin)
    if path in FILES:
        ctype, body = FILES[path]
        return Reply(200, body=body, content_type=ctype, charset=None)
    if static := _static(path):
        return static
    if path in BROKEN:
        return Reply(500, "500 Internal Server Error")
    if page := _page(path, query, origin, ext):
        return page
    if not path.endswith("/") and _page(path + "/", {}, origin, ext):
        return Reply(301, location=path + "/")  # trailing-slash redirect
    return Reply(404, "404 Not Found")


def _static(path: str) -> Reply | None:
    """The requisites: a stylesheet, images, a font (some missing, on purpose)."""
    if path == STYLESHEET:
        css = (f"body {{ background: url(img/paper.png) }}\n"
               f"@font-face {{ font-family: demo; src: url(\"{CSS_REFS[1]}\") }}\n")
        return Reply(200, body=css.encode(), content_type="text/css", charset=None)
    if path in MISSING_STATIC or not path.startswith("/static/"):
        return None
    if path in (LOGO, CSS_REFS[0]) or (path.startswith("/static/photos/") and path.removeprefix(
            "/static/photos/").removesuffix(".jpg").removesuffix("@2x") in SECTIONS and path.endswith(".jpg")):
        return Reply(200, body=_PNG, content_type="image/png" if path.endswith(".png") else "image/jpeg",
                     charset=None)
    return None


def ext_route(path: str) -> Reply:
    """The second host: a partner page with one section id, and a page that is gone."""
    if path == "/partner/":
        return Reply(200, "Partner", (("/partner/more/", "More"),), text="Top stories",
                     body=b'<!DOCTYPE html><html><head><title>Partner</title></head><body>'
                          b'<h2 id="top-stories">Top stories</h2><a href="/partner/more/">More</a></body></html>')
    return Reply(404, "404 Not Found", body=b"<html><body>gone</body></html>")


def _sitemap(path: str, origin: str) -> Reply:
    kind, entries = SITEMAPS[path]
    urls = [origin + e for e in entries]
    if kind == "text":
        return Reply(200, body="".join(u + "\n" for u in urls).encode(), content_type="text/plain", charset=None)
    tag, item = ("sitemapindex", "sitemap") if kind == "index" else ("urlset", "url")
    xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<{tag} xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
           + "".join(f"  <{item}><loc>{html.escape(u)}</loc></{item}>\n" for u in urls) + f"</{tag}>\n").encode()
    if path.endswith(".gz"):
        return Reply(200, body=gzip.compress(xml, mtime=0), content_type="application/gzip", charset=None)
    return Reply(200, body=xml, content_type="application/xml", charset=None)


def sitemap_entries(path: str, origin: str) -> list[str]:
    """The absolute URLs a demo sitemap lists (what a crawler reads from it)."""
    return [origin + e for e in SITEMAPS[path][1]]


def render(r: Reply) -> bytes:
    """The HTML bytes, in the page's own encoding."""
    if r.body is not None:
        return r.body
    head = f'<meta charset="{r.meta_charset}">' if r.meta_charset else ""
    head += f'<base href="{r.base}">' if r.base else ""
    head += f'<link rel="stylesheet" href="{STYLESHEET}">'
    items = "\n".join(f'<li><a href="{href}">{text}</a></li>' for href, text in r.links)
    photo = (f'<img src="/static/photos/{r.photo}.jpg" srcset="/static/photos/{r.photo}.jpg 1x, '
             f'/static/photos/{r.photo}@2x.jpg 2x" alt="">\n' if r.photo else "")
    comments = '<section id="comments"><h2>Comments</h2></section>\n' if r.photo else ""
    doc = (f"<!DOCTYPE html>\n<html><head>{head}<title>{r.title}</title></head>\n<body id=\"top\">"
           f'<img src="{LOGO}" alt="crawltop demo"><h1>{r.title}</h1>\n{photo}<p>{r.text}</p>\n'
           f"<ul>\n{items}\n</ul>\n{comments}</body></html>\n")
    return doc.encode(r.charset or r.meta_charset or "utf-8")


@dataclass(slots=True)
class _Settings:
    fast: bool
    stall_seconds: float
    ext: str = ""  # the second host's origin, once it listens


_SETTINGS = web.AppKey("demo_settings", _Settings)


async def _handle(request: web.Request) -> web.StreamResponse:
    cfg = request.app[_SETTINGS]
    path = request.path
    if path.startswith("/app/"):  # the section JavaScript builds: linked from nowhere in the model
        status, ctype, body = app.reply(path)
        if not cfg.fast:
            await asyncio.sleep(latency(path))
        return web.Response(status=status, body=body, headers={"Content-Type": ctype})
    r = route(path, request.query, f"{request.scheme}://{request.host}", cfg.ext)
    if not cfg.fast:
        await asyncio.sleep(latency(path) + (SLOW_SECONDS if path in SLOW else 0.0))
    body = render(r)
    ctype = r.content_type + (f"; charset={r.charset}" if r.charset and r.body is None else "")
    if path == STALL:  # headers and half the body, then silence: only a timeout ends it
        resp = web.StreamResponse(status=200, headers={"Content-Type": ctype})
        resp.content_length = len(body)
        await resp.prepare(request)
        await resp.write(body[: len(body) // 2])
        await asyncio.sleep(cfg.stall_seconds)
        await resp.write(body[len(body) // 2 :])
        await resp.write_eof()
        return resp
    headers = {"Content-Type": ctype} | ({"Location": r.location} if r.location else {})
    return web.Response(status=r.status, body=body if r.location is None else b"", headers=headers)


def make_app(*, fast: bool = False, stall_seconds: float | None = None) -> web.Application:
    """fast=True drops all latency (benchmarks, tests) but keeps every URL, so counts match."""
    app = web.Application()
    stall = stall_seconds if stall_seconds is not None else 0.0 if fast else STALL_SECONDS
    app[_SETTINGS] = _Settings(fast, stall)
    app.router.add_get("/{tail:.*}", _handle)
    return app


async def _handle_ext(request: web.Request) -> web.StreamResponse:
    r = ext_route(request.path)
    return web.Response(status=r.status, body=render(r), content_type="text/html")


class DemoSite:
    """The demo site on 127.0.0.1 at a free port, and its second host (external links) on
    127.0.0.2, inside the caller's event loop."""

    def __init__(self, *, fast: bool = False, stall_seconds: float | None = None) -> None:
        self.app = make_app(fast=fast, stall_seconds=stall_seconds)
        self.port = 0
        self.ext = ""
        self._runner: web.AppRunner | None = None
        self._ext_runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    async def start(self) -> None:
        # No access log (it would scribble over the TUI); cancel handlers whose client
        # left, and don't wait long on shutdown, so a stalled request can't hold us.
        ext = web.Application()
        ext.router.add_get("/{tail:.*}", _handle_ext)
        self._ext_runner = web.AppRunner(ext, access_log=None, shutdown_timeout=0.5)
        await self._ext_runner.setup()
        await web.TCPSite(self._ext_runner, EXT_ADDRESS, 0).start()
        self.ext = f"http://{EXT_ADDRESS}:{self._ext_runner.addresses[0][1]}"
        self.app[_SETTINGS].ext = self.ext
        self._runner = web.AppRunner(self.app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        for runner in (self._runner, self._ext_runner):
            if runner is not None:
                await runner.cleanup()
        self._runner = self._ext_runner = None

    async def __aenter__(self) -> DemoSite:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _canon(url: str, host: str) -> str | None:
    """A crawler's canonical form: no fragment, lower-case host; None if not on `host`."""
    parts = urlsplit(urldefrag(url)[0])
    if parts.scheme not in ("http", "https") or parts.netloc.lower() != host:
        return None
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path or "/", parts.query, ""))


def _ids(url: str, origin: str, ext: str) -> set[str] | None:
    """The element ids of a 200 HTML page of the model; None if the URL is no such page."""
    parts = urlsplit(url)
    if url.startswith(ext):
        return {"top-stories"} if parts.path == "/partner/" else None
    r = route(parts.path, dict(parse_qsl(parts.query)), origin, ext)
    if r.status != 200 or r.body is not None or parts.path.startswith("/private/"):
        return None
    return {"top", "comments"} if r.photo else {"top"}


def _walk_missing() -> set[tuple[str, str]]:
    missing: set[tuple[str, str]] = set()
    _walk(missing=missing)
    return missing


def _walk(order: random.Random | None = None, edges: dict[str, set[str]] | None = None,
          missing: set[tuple[str, str]] | None = None) -> Expected:
    """Crawl the model in BFS order, or any random order: the counts must not change.
    A whole crawl (the CLI's default): requisites, external links checked, fragments.
    With `edges`, every URL found is mapped to all the URLs that link, redirect, list or load it."""
    origin, ext = "http://127.0.0.1:8080", "http://127.0.0.2:8081"
    start = [origin + "/", origin + SITEMAP_INDEX]  # the root, and the sitemap its robots.txt names
    seen, todo, n = set(start), list(start), Counter[str]()
    requisite: set[str] = set()
    missing = set() if missing is None else missing
    while todo:
        url = todo.pop(order.randrange(len(todo)) if order else 0)
        parts = urlsplit(url)
        if url.startswith(ext):  # external: one request, never followed
            n["externals" if ext_route(parts.path).status == 200 else "not_found"] += 1
            continue
        if parts.path.startswith("/private/"):
            n["robots_blocked"] += 1
            continue
        r = route(parts.path, dict(parse_qsl(parts.query)), origin, ext)
        loads: list[str] = []
        if url in requisite:
            n["requisites" if r.status == 200 else "not_found"] += 1
            hrefs, base = [], url
            if parts.path == STYLESHEET:
                loads = [urljoin(url, u) for u in CSS_REFS]
        elif parts.path in SITEMAPS:
            n["sitemaps"] += 1
            hrefs, base = sitemap_entries(parts.path, origin), url
        elif r.location is not None:
            n["redirects"] += 1
            hrefs, base = [r.location], url
        else:
            kind = {404: "not_found", 500: "server_errors"}.get(r.status, "files" if r.body else "pages")
            n[kind] += 1
            hrefs, base = [html.unescape(h) for h, _ in r.links], urljoin(url, r.base or "")
            if r.status != 500:
                loads = [urljoin(url, u) for u in requisites(r)]
        for href in hrefs:
            absolute = urljoin(base, href)
            target = _canon(absolute, "127.0.0.1:8080")
            outside = target is None and _canon(absolute, "127.0.0.2:8081")
            frag = urldefrag(absolute)[1]
            if frag and frag != "top" and r.location is None and (target or outside):
                ids = _ids(target or outside or "", origin, ext)
                if ids is not None and frag not in ids:
                    missing.add((url, absolute))
            if target is None:
                if not outside or r.location is not None:
                    continue
                target = outside
            if edges is not None:
                edges.setdefault(target, set()).add(url)
            if target in seen:
                n["merges"] += r.location is not None
            else:
                seen.add(target)
                todo.append(target)
        for target in loads:
            if edges is not None:
                edges.setdefault(target, set()).add(url)
            if target not in seen:
                seen.add(target)
                requisite.add(target)
                todo.append(target)
    fields = ("pages", "requisites", "externals", "files", "redirects", "merges", "not_found", "server_errors",
              "robots_blocked", "sitemaps")
    return Expected(urls=len(seen), missing_fragments=len(missing), **{f: n[f] for f in fields})


def referrers(origin: str, ext: str) -> dict[str, set[str]]:
    """Every URL of a full crawl -> the pages, redirects and sitemaps that point to it or
    load it (robots-blocked pages are never fetched, so they point nowhere); fragment links
    keep their fragment as a URL of their own (`page#frag`) beside the page's."""
    edges: dict[str, set[str]] = {}
    _walk(edges=edges)
    model, model_ext = "http://127.0.0.1:8080", "http://127.0.0.2:8081"

    def real(u: str) -> str:
        return u.replace(model, origin, 1).replace(model_ext, ext, 1)
    return {real(t): {real(s) for s in src} for t, src in edges.items()}


def missing_fragments(origin: str, ext: str) -> dict[str, set[str]]:
    """`target#fragment` -> the pages whose link names an element the target lacks."""
    out: dict[str, set[str]] = {}
    for page, link in _walk_missing():
        out.setdefault(link.replace("http://127.0.0.2:8081", ext, 1), set()).add(
            page.replace("http://127.0.0.1:8080", origin, 1))
    return out


EXPECTED: Expected  # computed on first access (~1 s), not at import: the CLI imports this


@functools.cache
def _expected() -> Expected:
    return _walk()


def __getattr__(name: str) -> Expected:
    if name == "EXPECTED":
        return _expected()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
