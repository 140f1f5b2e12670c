"""Whole pages: every requisite fetched, every link checked once, every page's own
directives obeyed, dead hosts left alone. Real servers on 127.0.0.1-4, counted at the server."""
from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from aiohttp import web
from support.crawl import crawl
from support.sites import Handler, page
from support.wholesite import Dropper, body, whole_site
from warcio.archiveiterator import ArchiveIterator

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.output.provenance import referrer_letter
from crawltop.core.output.warc import WarcSink
from crawltop.core.parsing.css import css_refs, srcset_urls
from crawltop.core.parsing.page import LinkExtractor
from crawltop.core.queueing.kinds import directives, requisite_hops
from crawltop.core.reporting.linkcheck import analyse

WHOLE = {"requisites": True, "external": True, "fragments": True, "max_tries": 2}
REQUISITES = ("/style.css", "/favicon.ico", "/imported.css", "/app.js", "/logo.png", "/small.png", "/pic.webp",
              "/pic-big.webp", "/pic.png", "/clip.mp4", "/poster.png", "/subs.vtt", "/bg-attr.png", "/bg-style.png",
              "/bg-css.png", "/font.woff", "/nf.png")
MISSING = ("/missing.js", "/missing-2x.png", "/missing-bg.png")


async def test_every_kind_is_fetched_once_and_recorded_as_its_kind() -> None:
    async with whole_site() as h:
        crawler, sink = await crawl(h.site.url + "/", **WHOLE)
        site, ext = h.site, h.ext
    recs = sink.by_url()
    assert len(recs) == len(sink.records)  # one Record per URL
    for path in (*REQUISITES, *MISSING):
        assert site.hits.get(path) == 1, path
        assert recs[site.url + path].kind == "requisite", path
    assert {recs[site.url + p].status for p in MISSING} == {404}
    assert "/commented.png" not in site.hits and "/feed.xml" not in site.hits  # a CSS comment, rel=alternate
    # external links: one request each, never followed; the iframe of the same page is that one URL
    assert ext.hits.get("/ok.html") == 1 and ext.hits.get("/gone") == 1 and ext.hits.get("/ext.png") == 1
    assert "/deeper" not in ext.hits
    assert recs[ext.url + "/ok.html"].kind == "external" and recs[ext.url + "/gone"].status == 404
    assert recs[ext.url + "/ext.png"].kind == "requisite"
    assert recs[h.refused + "/x"].error_kind == "connect" and recs[h.drop.url + "/y"].kind == "external"
    # directives: a nofollow page's links are never requested, its requisites are
    assert "/secret-meta" not in site.hits and "/secret-header" not in site.hits
    assert recs[site.url + "/nofollow-meta"].robots == "noindex,nofollow"
    assert recs[site.url + "/nofollow-header"].robots == "nofollow"
    assert recs[site.url + "/refreshed"].discovery == "LR"  # a meta refresh is a redirect-like hop
    assert site.hits.get("/other") == 1  # rel=nofollow on one link: recorded, still followed
    home = recs[site.url + "/"]
    assert home.title == "Home page" and home.canonical == site.url + "/" and home.nofollow_links == 1
    assert recs[site.url + "/bg-css.png"].discovery == "KU" and recs[site.url + "/font.woff"].discovery == "UU"
    kinds = Counter(r.kind for r in sink.records)
    s = crawler.stats
    assert (s.pages, s.requisites, s.externals) == (kinds["page"], kinds["requisite"], 2)


async def test_the_report_names_every_broken_thing_with_what_refers_to_it() -> None:
    async with whole_site() as h:
        _, sink = await crawl(h.site.url + "/", **WHOLE)
        site, ext, refused, drop = h.site.url, h.ext.url, h.refused, h.drop.url
    report = analyse(r.to_dict() for r in sink.records)
    found = {(b.url, b.reason, b.tag, b.via) for links in report.broken.values() for b in links}
    root = site + "/"
    assert found == {
        (site + "/missing-page", "404", "a", root),
        (site + "/missing-2x.png", "404", "srcset", root),
        (site + "/missing-bg.png", "404", "css url()", site + "/style.css"),
        (site + "/missing.js", "404", "script", root),
        (ext + "/gone", "404", "a", root),
        (refused + "/x", "connection refused", "a", root),
        (drop + "/y", "connection reset by the server", "a", root),
        (site + "/page2#absent", "no id", "#fragment", root),
        (ext + "/ok.html#nope", "no id", "#fragment", root),
        (root + "#nowhere", "no id", "#fragment", root),
    }


async def test_the_warc_holds_every_requisite(tmp_path) -> None:
    path = str(tmp_path / "site.warc.gz")
    async with whole_site() as h:
        crawler = Crawler(CrawlConfig(roots=(h.site.url + "/",), backoff=0.01, timeout=5.0, **WHOLE),  # type: ignore[arg-type]
                          sinks=[WarcSink(path)])
        await asyncio.wait_for(crawler.crawl(), 60)
        site, ext = h.site.url, h.ext.url
    responses = set()
    for warc in tmp_path.glob("site-*.warc.gz"):  # rotated files: a WARC series
        with open(warc, "rb") as fh:
            responses |= {r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(fh)
                          if r.rec_type in ("response", "revisit")}
    assert {site + p for p in REQUISITES} <= responses and ext + "/ext.png" in responses


async def test_each_kind_can_be_turned_off() -> None:
    async with whole_site() as h:
        _, sink = await crawl(h.site.url + "/", max_tries=2)  # the engine's defaults: all three off
        assert {r.kind for r in sink.records} == {"page"}
        assert not h.ext.hits and "/logo.png" not in h.site.hits and h.drop.connections == 0
        assert all(not r.missing_fragments for r in sink.records)
        # robots off: the page's own nofollow is ignored too
        _, sink = await crawl(h.site.url + "/", max_tries=2, robots=False)
        assert h.site.hits.get("/secret-meta") == 1 and h.site.hits.get("/secret-header") == 1


async def test_a_host_that_drops_every_connection_is_left_alone(serve) -> None:
    drop = Dropper()
    await drop.start("127.0.0.4")
    try:
        site = await serve({"/": page(*[f"{drop.url}/u{i}" for i in range(30)])})
        _, sink = await crawl(site.url + "/", external=True, concurrency=10, backoff=0.2)
    finally:
        await drop.stop()
    assert len(sink.records) == 31
    kinds = Counter(r.error_kind for r in sink.records if r.url.startswith(drop.url))
    assert sum(kinds.values()) == 30 and kinds["host-retired"] >= 20, kinds
    # robots.txt is the host's first strike: one request at a time after it, five strikes in all
    # (aiohttp opens a second connection when the first is dropped before any answer)
    assert drop.connections <= 20, drop.connections


def test_css_and_srcset_parsing() -> None:
    css = """@import "a.css"; @import url('b.css'); /* url(c.png) */ x { background: URL( d.png ) }
    y { src: url(data:font/woff;base64,AAA=) } z { background: url("e f.png") } w { mask: url(#m) }"""
    assert css_refs(css) == ["a.css", "b.css", "d.png", "e f.png"]
    assert css_refs("p { color: red }") == []
    assert srcset_urls("a.png 1x, b.png 2x,c.png, data:image/png;base64,x 3x, d(1).png 480w") == [
        "a.png", "b.png", "c.png", "d(1).png"]
    assert srcset_urls(" a,b.png 100w ") == ["a,b.png"]


@pytest.mark.parametrize("path, letter, hops", [("", "", 0), ("L", "L", 0), ("LRR", "L", 0), ("LI", "I", 1),
                                                ("LKU", "U", 2), ("LKRU", "U", 2), ("R", "R", 0),
                                                ("3+LLI", "I", 1), ("LE", "E", 1)])
def test_hop_paths_say_the_kind(path: str, letter: str, hops: int) -> None:
    assert referrer_letter(path) == letter and requisite_hops(path) == hops


def test_robots_directives() -> None:
    assert directives("NOINDEX, nofollow".lower(), [], "crawltop") == "noindex,nofollow"
    assert directives("", ["googlebot: nofollow", "crawltop: noindex", "none"], "crawltop") == "noindex,none"
    assert directives("", ["unavailable_after: 2030-01-01"], "crawltop") == "unavailable_after: 2030-01-01"


HEADS = [  # (head markup, title, robots, canonical, refresh)
    ("<title> A  b </title><title>second</title><link rel='Preload CANONICAL' href=' /c '><link rel=canonical href=/d>"
     "<meta NAME=Robots content='NoIndex, nofollow'><meta http-equiv=REFRESH content='5; url=/r'>"
     "<meta http-equiv=refresh content=0;url=/s>", "A b", "noindex,nofollow", "http://h.test/c", "http://h.test/r"),
    # one element that is both: read as robots, as a walk of the head's children read it (not twice)
    ("<meta name=robots http-equiv=refresh content=noarchive><meta name=robots content=nosnippet>",
     None, "noarchive,nosnippet", None, None),
    # in a <noscript> (lexbor parses with scripting off: its content is markup) or in the body: not read
    ("<noscript><link rel=canonical href=/n><meta name=robots content=nofollow></noscript>"
     "<link rel=stylesheet href=/s.css></head><body><meta name=robots content=noindex><title>no</title>",
     None, "", None, None),
    ("<link rel=canonical>", None, "", "http://h.test/p", None),  # no href: the page itself
]


@pytest.mark.parametrize("head, title, robots, canonical, refresh", HEADS)
def test_the_head_gives_title_robots_canonical_and_refresh(head, title, robots, canonical, refresh) -> None:
    refs = LinkExtractor().read(f"<html><head>{head}</head><body><a href=/x>x</a></body></html>".encode(),
                                "http://h.test/p", lambda h: True)
    assert (refs.title, refs.robots, refs.canonical, refs.refresh) == (title, robots, canonical, refresh)
    assert refs.links == {"http://h.test/x"}


async def test_a_stylesheet_chain_is_bounded(serve) -> None:
    """A hostile stylesheet importing the next forever: at most 5 requisite hops from the page."""
    def sheet(i: int) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(text=f'@import "/c/{i + 1}.css";', content_type="text/css")
        return handler

    site = await serve({"/": page(extra='<link rel="stylesheet" href="/c/0.css">'),
                        **{f"/c/{i}.css": sheet(i) for i in range(50)}})
    _, sink = await crawl(site.url + "/", requisites=True)
    assert sorted(r.url.rsplit("/", 1)[1] for r in sink.records if r.kind == "requisite") == [
        f"{i}.css" for i in range(5)]


def test_hostile_css_is_linear() -> None:
    """`url(` and 200 KB of spaces: 29 s with a backtracking regex, milliseconds possessive."""
    assert css_refs("url(" + " " * 200_000) == []
    assert css_refs("a { background: Url(x.png) }") == ["x.png"]


async def test_include_and_exclude_bound_external_checks_too(serve) -> None:
    """A link on the site that --include leaves out is not an external link; a meta refresh
    that --exclude names is never fetched."""
    home = ('<html><head><meta http-equiv="refresh" content="0; url=/docs/skip"></head><body>'
            '<a href="/docs/a">a</a><a href="/blog/b">b</a></body></html>')
    site = await serve({"/": body(home), "/docs/a": page(), "/blog/b": page(), "/docs/skip": page()})
    _, sink = await crawl(site.url + "/", external=True, requisites=True, include=("/docs/", r"/$"))
    assert site.hits.get("/docs/skip") == 1  # the refresh is read (and followed) without --exclude
    _, sink = await crawl(site.url + "/", external=True, requisites=True, include=("/docs/", r"/$"),
                          exclude=("skip",))
    assert site.hits.get("/docs/a") == 2 and "/blog/b" not in site.hits and site.hits.get("/docs/skip") == 1
    assert {r.kind for r in sink.records} == {"page"}
