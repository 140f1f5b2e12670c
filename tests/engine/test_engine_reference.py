"""The reference crawler's behaviours, against a real server on 127.0.0.1."""
from __future__ import annotations

from aiohttp import web
from support.crawl import crawl
from support.sites import page, redirect, slow_site


async def test_missing_page_is_recorded_as_404(serve) -> None:
    site = await serve({"/": page("/nope")})
    _, sink = await crawl(site.url + "/", robots=False)
    rec = sink.by_url()[site.url + "/nope"]
    assert rec.status == 404 and rec.error is None
    assert len(sink.records) == 2


async def test_link_cycle_fetches_each_page_once(serve) -> None:
    site = await serve({"/": page("/a"), "/a": page("/b"), "/b": page("/", "/a")})
    _, sink = await crawl(site.url + "/", robots=False)
    assert sorted(r.url for r in sink.records) == [site.url + p for p in ("/", "/a", "/b")]
    assert site.hits == {"/": 1, "/a": 1, "/b": 1}


async def test_other_host_not_followed(serve) -> None:
    other = await serve({"/": page("/x")})
    other_url = other.url.replace("127.0.0.1", "localhost")
    site = await serve({"/": page(other_url + "/", "/in")})
    crawler, sink = await crawl(site.url + "/", robots=False)
    assert {r.url for r in sink.records} == {site.url + "/", site.url + "/in"}
    assert other.hits == {}
    assert sink.by_url()[site.url + "/"].num_urls == 1


async def test_exclude_regex(serve) -> None:
    site = await serve({"/": page("/keep", "/skip/1", "/skip/2")})
    _, sink = await crawl(site.url + "/", robots=False, exclude=(r"/skip/",))
    assert {r.url for r in sink.records} == {site.url + "/", site.url + "/keep"}


async def test_redirect_chain_followed_by_hand(serve) -> None:
    site = await serve({"/": page("/r1"), "/r1": redirect("/r2", 301), "/r2": redirect("r3", 307),
                        "/r3": redirect("/final", 308), "/final": page()})
    _, sink = await crawl(site.url + "/", robots=False)
    recs = sink.by_url()
    assert recs[site.url + "/r1"].next_url == site.url + "/r2"
    assert recs[site.url + "/r2"].status == 307
    assert recs[site.url + "/r3"].next_url == site.url + "/final"
    assert recs[site.url + "/final"].status == 200
    assert len(sink.records) == 5


async def test_redirect_limit(serve) -> None:
    routes = {"/": page("/r0")} | {f"/r{i}": redirect(f"/r{i + 1}") for i in range(6)}
    site = await serve(routes)
    _, sink = await crawl(site.url + "/", robots=False, max_redirect=2)
    recs = sink.by_url()
    assert recs[site.url + "/r2"].error.startswith("TooManyRedirects")
    assert site.url + "/r3" not in recs
    assert recs[site.url + "/r2"].next_url == site.url + "/r3"


async def test_redirect_cycle_ends_in_a_merge(serve) -> None:
    site = await serve({"/": page("/a"), "/a": redirect("/b"), "/b": redirect("/a")})
    crawler, sink = await crawl(site.url + "/", robots=False)
    recs = sink.by_url()
    assert recs[site.url + "/b"].merged is True
    assert crawler.stats.merges == 1
    assert site.hits["/a"] == 1 and site.hits["/b"] == 1


async def test_redirect_merge_fetches_target_once(serve) -> None:
    site = await serve({"/": page("/t", "/x", "/y"), "/x": redirect("/t", 301),
                        "/y": redirect("/t", 302), "/t": page()})
    crawler, sink = await crawl(site.url + "/", robots=False)
    recs = sink.by_url()
    assert recs[site.url + "/x"].merged and recs[site.url + "/y"].merged
    assert crawler.stats.merges == 2
    assert site.hits["/t"] == 1
    assert [m.target for m in crawler.stats.recent_merges] == [site.url + "/t"] * 2


async def test_concurrency_cap_holds(serve) -> None:
    site = await serve(slow_site(40, 0.05))
    await crawl(site.url + "/", robots=False, concurrency=4)
    assert site.max_in_flight == 4


async def test_retry_after_dropped_connection(serve) -> None:
    async def flaky(request: web.Request) -> web.Response:
        if site.hits["/flaky"] <= 2:  # two drops: aiohttp itself retries once on a reused connection
            request.transport.abort()  # type: ignore[union-attr]  (what is written after is lost)
        return web.Response(text="ok", content_type="text/html")

    site = await serve({"/": page("/flaky"), "/flaky": flaky})
    crawler, sink = await crawl(site.url + "/", robots=False)
    rec = sink.by_url()[site.url + "/flaky"]
    assert rec.status == 200 and rec.error is None
    assert 2 <= rec.tries <= 3 and crawler.stats.retries == rec.tries - 1


async def test_gives_up_after_max_tries(serve) -> None:
    async def dead(request: web.Request) -> web.Response:
        request.transport.abort()  # type: ignore[union-attr]
        return web.Response(text="never")

    site = await serve({"/": page("/dead"), "/dead": dead})
    _, sink = await crawl(site.url + "/", robots=False, max_tries=3)
    rec = sink.by_url()[site.url + "/dead"]
    assert rec.status is None and rec.tries == 3
    assert rec.error.startswith(("ServerDisconnectedError", "ClientOSError", "ClientPayloadError"))
    assert 3 <= site.hits["/dead"] <= 6  # aiohttp may retry a reused connection once itself


async def test_charset_from_header_then_meta_then_default(serve) -> None:
    async def latin(request: web.Request) -> web.Response:
        return web.Response(body="<a href='/caf\xe9'>x</a>".encode("latin-1"),
                            headers={"Content-Type": "text/html; charset=ISO-8859-1"})

    async def meta(request: web.Request) -> web.Response:
        return web.Response(body='<meta charset="windows-1251"><p>\u041f</p>'.encode("cp1251"),
                            headers={"Content-Type": "text/html"})

    site = await serve({"/": page("/latin", "/meta", "/plain"), "/latin": latin, "/meta": meta,
                        "/plain": page()})
    _, sink = await crawl(site.url + "/", robots=False)
    recs = sink.by_url()
    assert recs[site.url + "/latin"].encoding == "iso-8859-1"
    assert site.url + "/caf%C3%A9" in recs  # decoded right, then re-encoded as UTF-8
    assert recs[site.url + "/meta"].encoding == "windows-1251"
    assert recs[site.url + "/plain"].encoding == "utf-8"


async def test_non_html_is_recorded_not_parsed(serve) -> None:
    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=b"%PDF <a href='/secret'>", content_type="application/pdf")

    site = await serve({"/": page("/doc.pdf"), "/doc.pdf": pdf, "/secret": page()})
    _, sink = await crawl(site.url + "/", robots=False)
    rec = sink.by_url()[site.url + "/doc.pdf"]
    assert rec.content_type == "application/pdf" and rec.num_urls == 0 and rec.size == 23
    assert "/secret" not in site.hits


async def test_non_http_links_ignored(serve) -> None:
    site = await serve({"/": page("mailto:a@b.c", "javascript:alert(1)", "tel:123", "ftp://x/y",
                                  "data:text/html,hi", "#frag", "/ok#frag", "/ok?a=1&amp;b=2")})
    _, sink = await crawl(site.url + "/", robots=False)
    assert {r.url for r in sink.records} == {site.url + "/", site.url + "/ok", site.url + "/ok?a=1&b=2"}


async def test_redirects_and_merges_are_kept_apart_in_the_stats(serve) -> None:
    site = await serve({"/": page("/t", "/x", "/chain"), "/x": redirect("/t"), "/chain": redirect("/t2"),
                        "/t": page(), "/t2": page()})
    crawler, _ = await crawl(site.url + "/", robots=False)
    snap = crawler.stats.snapshot()
    assert [(e.source, e.target) for e in snap.recent_redirects] == [(site.url + "/chain", site.url + "/t2")]
    assert [(e.source, e.target) for e in snap.recent_merges] == [(site.url + "/x", site.url + "/t")]
