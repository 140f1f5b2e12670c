"""Sitemaps, read safely: index + gzip + text, bombs, malformed XML, entity expansion, scope,
against real servers on 127.0.0.1 with the real engine."""
from __future__ import annotations

import gzip

from aiohttp import web
from support.crawl import crawl
from support.sites import page, redirect

from crawltop.core.fetching.sitemaps import MAX_NESTING, inflate, parse

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://x/&lol9;</loc></url></urlset>"""
XXE = b"""<?xml version="1.0"?>
<!DOCTYPE u [<!ENTITY e SYSTEM "file:///etc/passwd">]>
<urlset><url><loc>http://x/&e;</loc></url></urlset>"""


def urlset(*locs: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>'
            + "".join(f"<url><loc>{loc}</loc><lastmod>2026-01-01</lastmod></url>" for loc in locs)
            + "</urlset>").encode()


def index(*locs: str) -> bytes:
    return (f'<?xml version="1.0"?><sitemapindex {NS}>'
            + "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs) + "</sitemapindex>").encode()


def body(data: bytes, ctype: str = "application/xml"):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=data, content_type=ctype)
    return handler


def bomb(size: int = 200 * 2**20) -> bytes:
    return gzip.compress(b"\0" * size, compresslevel=9)


# -- parsing ---------------------------------------------------------------------------

def test_parse_urlset_index_text_and_gzip() -> None:
    assert parse(urlset("http://a/1", "http://a/2")).urls == ["http://a/1", "http://a/2"]
    p = parse(index("http://a/s1.xml"))
    assert (p.kind, p.urls, p.error) == ("index", ["http://a/s1.xml"], None)
    p = parse(b"http://a/1\n\nhttps://a/2\r\n")
    assert (p.kind, p.urls, p.error) == ("text", ["http://a/1", "https://a/2"], None)
    assert parse(gzip.compress(urlset("http://a/z"))).urls == ["http://a/z"]
    assert parse(b"\xef\xbb\xbf" + urlset("http://a/bom")).urls == ["http://a/bom"]


def test_gzip_bomb_is_stopped_at_the_cap() -> None:
    data = bomb()
    assert len(data) < 300_000
    p = parse(data)
    assert p.urls == [] and "larger than 50 MiB uncompressed" in (p.error or "")
    assert parse(data[: len(data) // 2]).error  # a cut stream is an error too, not a hang
    assert inflate(gzip.compress(b"abc")) == b"abc"


def test_malformed_xml_keeps_what_came_before() -> None:
    p = parse(urlset("http://a/1", "http://a/2")[:-20] + b"<url><loc>oops")
    assert p.urls == ["http://a/1", "http://a/2"] and p.error.startswith("malformed XML")


def test_entity_expansion_and_external_entities_are_refused() -> None:
    for data in (BILLION_LAUGHS, XXE):
        p = parse(data)
        assert p.urls == [] and "DTDForbidden" in (p.error or ""), p


def test_not_a_sitemap() -> None:
    assert parse(b"<html><body>hi</body></html>").kind == "html"
    assert "root element <rss>" in (parse(b"<rss><channel/></rss>").error or "")
    assert parse(bytes(range(256)) * 4).error
    assert parse(b"").error == "empty sitemap"


def test_entry_cap() -> None:
    p = parse(urlset(*(f"http://a/{i}" for i in range(12))), max_entries=10)
    assert len(p.urls) == 10 and "more than 10 entries" in p.error


# -- crawling -------------------------------------------------------------------------

async def test_index_gzip_and_text_sitemaps_feed_the_frontier(serve) -> None:
    routes = {
        "/": page("/p2"),
        "/p1": page(), "/p2": page(), "/p4": page(),
        "/p3": redirect("/p4", 301),
        "/private/x": page(),
    }
    site = await serve(routes)
    u = site.url
    routes["/robots.txt"] = body(
        f"User-agent: *\nDisallow: /private/\nSitemap: {u}/maps/index.xml\n"
        "Sitemap: http://elsewhere.invalid/sitemap.xml\n".encode(), "text/plain")
    routes["/maps/index.xml"] = body(index(f"{u}/maps/a.xml.gz", f"{u}/maps/b.txt", "http://elsewhere.invalid/c.xml"))
    routes["/maps/a.xml.gz"] = body(gzip.compress(urlset(f"{u}/p1", f"{u}/p2", "http://elsewhere.invalid/x",
                                                         f"{u}/private/x")), "application/x-gzip")
    routes["/maps/b.txt"] = body(f"{u}/p3\n".encode(), "text/plain")
    _, sink = await crawl(u + "/", sitemaps=True)
    rec = {r.url.removeprefix(u): r for r in sink.records}
    assert not any("elsewhere" in url for url in rec)  # out of scope: never fetched, no record
    assert set(rec) == {"/", "/p1", "/p2", "/p3", "/p4", "/private/x", "/maps/index.xml", "/maps/a.xml.gz",
                        "/maps/b.txt"}
    assert "/sitemap.xml" not in rec  # robots.txt named one: nothing guessed
    idx = rec["/maps/index.xml"]
    assert (idx.via, idx.discovery, idx.num_urls, idx.num_new_urls, idx.error) == (
        u + "/robots.txt", "M", 2, 2, None)
    a = rec["/maps/a.xml.gz"]
    assert (a.via, a.discovery, a.num_urls, a.error) == (u + "/maps/index.xml", "MM", 3, None)
    assert (rec["/p1"].via, rec["/p1"].discovery) == (u + "/maps/a.xml.gz", "MMS")
    assert (rec["/p3"].via, rec["/p3"].discovery) == (u + "/maps/b.txt", "MMS")
    assert (rec["/p4"].via, rec["/p4"].discovery) == (u + "/p3", "MMSR")
    # sitemap entries pass robots like links do
    assert (rec["/private/x"].error_kind, rec["/private/x"].discovery) == ("robots", "MMS")
    assert rec["/p2"].discovery in ("L", "MMS")  # whichever queued it first
    assert all(r.error is None for p, r in rec.items() if p != "/private/x")


async def test_guessed_sitemap_without_robots_and_a_missing_one(serve) -> None:
    site = await serve({"/": page("/a"), "/a": page(), "/sitemap.xml": body(urlset())})
    site.routes["/sitemap.xml"] = body(urlset(site.url + "/only-in-sitemap"))
    site.routes["/only-in-sitemap"] = page()
    crawler, sink = await crawl(site.url + "/", robots=False, sitemaps=True)
    rec = {r.url.removeprefix(site.url): r for r in sink.records}
    assert (rec["/sitemap.xml"].via, rec["/sitemap.xml"].discovery) == (None, "M")
    assert (rec["/only-in-sitemap"].via, rec["/only-in-sitemap"].discovery) == (site.url + "/sitemap.xml", "MS")
    assert (crawler.stats.sitemap_probes, crawler.stats.sitemap_found) == (1, 1)

    # the /sitemap.xml guess is a quiet probe: a guess that finds nothing leaves no record, only the probe count
    other = await serve({"/": page()})
    crawler, sink = await crawl(other.url + "/", sitemaps=True)
    assert [r.url for r in sink.records] == [other.url + "/"]
    assert other.hits["/sitemap.xml"] == 1
    assert (crawler.stats.sitemap_probes, crawler.stats.sitemap_found, crawler.stats.errors) == (1, 0, 0)

    _, sink = await crawl(other.url + "/", sitemaps=False)
    assert [r.url for r in sink.records] == [other.url + "/"]


async def test_broken_sitemaps_get_an_error_and_the_crawl_goes_on(serve) -> None:
    site = await serve({"/": page("/a"), "/a": page(), "/ok": page()})
    u = site.url
    maps = {
        "/bomb.xml.gz": body(bomb(), "application/gzip"),
        "/bad.xml": body(urlset(f"{u}/ok")[:-12] + b"<url><loc>"),
        "/lol.xml": body(BILLION_LAUGHS),
        "/rss.xml": body(b"<rss/>"),
        "/junk.bin": body(bytes(range(1, 256)) * 100, "application/octet-stream"),
        "/html.xml": body(b"<!DOCTYPE html><html><body>not here</body></html>", "text/html"),
    }
    site.routes.update(maps)
    site.routes["/robots.txt"] = body("".join(f"Sitemap: {u}{p}\n" for p in maps).encode(), "text/plain")
    _, sink = await crawl(u + "/", sitemaps=True)
    rec = {r.url.removeprefix(u): r for r in sink.records}
    assert set(rec) == {"/", "/a", "/ok", *maps}
    for path in maps:
        assert rec[path].error_kind == "bad-sitemap" and rec[path].status == 200, path
    assert "larger than 50 MiB" in rec["/bomb.xml.gz"].error
    assert "DTDForbidden" in rec["/lol.xml"].error
    assert "malformed XML" in rec["/bad.xml"].error
    assert (rec["/ok"].via, rec["/ok"].discovery) == (u + "/bad.xml", "MS")  # read before the error: kept
    assert rec["/a"].error is None


async def test_index_nesting_is_capped(serve) -> None:
    site = await serve({"/": page()})
    u = site.url
    site.routes["/robots.txt"] = body(f"Sitemap: {u}/i1.xml\n".encode(), "text/plain")
    for n in range(1, 6):
        site.routes[f"/i{n}.xml"] = body(index(f"{u}/i{n + 1}.xml"))
    _, sink = await crawl(u + "/", sitemaps=True)
    rec = {r.url.removeprefix(u): r for r in sink.records}
    assert set(rec) == {"/", *(f"/i{n}.xml" for n in range(1, MAX_NESTING + 1))}
    deepest = rec[f"/i{MAX_NESTING}.xml"]
    assert deepest.discovery == "M" * MAX_NESTING and deepest.error_kind == "bad-sitemap"
    assert "nested deeper than 3" in deepest.error


async def test_sitemap_fetches_use_the_crawls_retries_and_robots(serve) -> None:
    """A failing sitemap is retried like a page; one disallowed by robots.txt is not fetched."""
    calls = []

    async def flaky(request: web.Request) -> web.Response:
        calls.append(request.path)
        if len(calls) == 1:
            return web.Response(status=503)
        return web.Response(body=urlset(site.url + "/from-map"), content_type="application/xml")

    site = await serve({"/": page(), "/from-map": page(), "/maps/s.xml": flaky, "/private/s.xml": body(urlset())})
    site.routes["/robots.txt"] = body(
        (f"User-agent: *\nDisallow: /private/\nSitemap: {site.url}/maps/s.xml\n"
         f"Sitemap: {site.url}/private/s.xml\n").encode(),
        "text/plain")
    _, sink = await crawl(site.url + "/", sitemaps=True, max_tries=3)
    rec = {r.url.removeprefix(site.url): r for r in sink.records}
    assert rec["/maps/s.xml"].tries == 2 and rec["/maps/s.xml"].num_new_urls == 1
    assert rec["/from-map"].discovery == "MS"
    assert rec["/private/s.xml"].error_kind == "robots" and "/private/s.xml" not in site.hits
