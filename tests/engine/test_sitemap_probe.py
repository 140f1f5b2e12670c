"""The guessed /sitemap.xml is a quiet probe, not a URL of the crawl: no record unless it is a sitemap,
only after the origin answered, never retried, no --max-pages budget spent. Real servers
on 127.0.0.1, the real engine; the CLI for the headless summary and the `status` JSON."""
from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
import time

from aiohttp import web
from support.crawl import crawl
from support.sites import page, slow

from crawltop.core.fetching.sitemaps import looks_like_sitemap
from crawltop.core.sockets.protocol import headline

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*locs: str) -> bytes:
    return (f'<?xml version="1.0"?>\n<urlset {NS}>' + "".join(f"<url><loc>{u}</loc></url>" for u in locs)
            + "</urlset>").encode()


def body(data: bytes, ctype: str = "application/xml", status: int = 200):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=data, content_type=ctype, status=status)
    return handler


def test_looks_like_sitemap() -> None:
    assert looks_like_sitemap(urlset("http://a/1"))
    assert looks_like_sitemap(b'<?xml version="1.0"?><!-- x --><sm:sitemapindex xmlns:sm="y">')
    assert looks_like_sitemap(gzip.compress(urlset("http://a/1")))
    assert looks_like_sitemap(b"\xef\xbb\xbfhttp://a/1\nhttp://a/2\n")
    assert not looks_like_sitemap(b"<!DOCTYPE html><html><body>404</body></html>")
    assert not looks_like_sitemap(b"<?xml version='1.0'?><rss/>")
    assert not looks_like_sitemap(b"Not found")
    assert not looks_like_sitemap(b"\x1f\x8b garbage")


async def test_max_pages_1_on_a_site_without_a_sitemap_gives_one_record(serve) -> None:
    site = await serve({"/": page("/a", "/b"), "/a": page(), "/b": page()})
    crawler, sink = await crawl(site.url + "/", sitemaps=True, max_pages=1)
    assert [r.url for r in sink.records] == [site.url + "/"]
    assert site.hits.get("/sitemap.xml") == 1 and crawler.stats.sitemap_probes == 1
    # a failed probe spends no budget: with 3 pages allowed, all three are crawled
    crawler, sink = await crawl(site.url + "/", sitemaps=True, max_pages=3)
    assert sorted(r.url.removeprefix(site.url) for r in sink.records) == ["/", "/a", "/b"]


async def test_a_failed_probe_leaves_no_record_and_no_error_and_is_not_retried(serve) -> None:
    for answer in (body(b"nope", "text/plain", 404), body(b"<html><body>soft 404</body></html>", "text/html"),
                   body(b"busy", "text/plain", 503), body(b"<rss/>")):
        site = await serve({"/": page("/a"), "/a": page(), "/sitemap.xml": answer})
        crawler, sink = await crawl(site.url + "/", sitemaps=True, max_tries=4)
        assert sorted(r.url.removeprefix(site.url) for r in sink.records) == ["/", "/a"]
        assert site.hits["/sitemap.xml"] == 1  # never retried, even a 503
        s = crawler.stats.snapshot()
        assert (s.errors, s.sitemap_probes, s.sitemap_found, s.records) == (0, 1, 0, 2)


async def test_a_probe_that_resets_the_connection_leaves_no_trace(serve) -> None:
    async def reset(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.abort()  # a network error on the guess
        return web.Response()

    site = await serve({"/": page(), "/sitemap.xml": reset})
    crawler, sink = await crawl(site.url + "/", sitemaps=True)
    assert [r.url for r in sink.records] == [site.url + "/"]
    assert (crawler.stats.errors, crawler.stats.sitemap_probes) == (0, 1)
    # aiohttp re-sends once when a reused keep-alive connection drops (RFC 9112 9.3.1), as
    # for any request; no crawl-level retry (--max-tries 4 would make it 4 or more)
    assert site.hits["/sitemap.xml"] in (1, 2)


async def test_the_probe_waits_for_the_origins_first_answer_and_obeys_robots(serve) -> None:
    order: list[str] = []

    late_root = slow(0.3, text="<html></html>")  # a probe that did not wait would overtake it

    async def slow_root(request: web.Request) -> web.StreamResponse:
        order.append("/")
        return await late_root(request)

    async def sitemap(request: web.Request) -> web.Response:
        order.append("/sitemap.xml")
        return web.Response(body=urlset(), content_type="application/xml")

    site = await serve({"/": slow_root, "/sitemap.xml": sitemap})
    await crawl(site.url + "/", sitemaps=True, robots=False)
    assert order[:2] == ["/", "/sitemap.xml"]  # asked only after the root's answer came

    site = await serve({"/": page(), "/sitemap.xml": sitemap,
                        "/robots.txt": body(b"User-agent: *\nDisallow: /sitemap.xml\n", "text/plain")})
    crawler, sink = await crawl(site.url + "/", sitemaps=True)
    assert "/sitemap.xml" not in site.hits and len(sink.records) == 1


async def test_a_probe_that_finds_a_sitemap_gives_its_record_and_its_urls_are_crawled(serve) -> None:
    site = await serve({"/": page(), "/hidden": page("/deeper"), "/deeper": page()})
    site.routes["/sitemap.xml"] = body(gzip.compress(urlset(site.url + "/hidden")), "application/x-gzip")
    crawler, sink = await crawl(site.url + "/", sitemaps=True)
    rec = {r.url.removeprefix(site.url): r for r in sink.records}
    assert set(rec) == {"/", "/sitemap.xml", "/hidden", "/deeper"}
    m = rec["/sitemap.xml"]
    assert (m.status, m.error, m.via, m.discovery, m.num_new_urls) == (200, None, None, "M", 1)
    assert (rec["/hidden"].discovery, rec["/deeper"].discovery) == ("MS", "MSL")
    assert (crawler.stats.sitemap_probes, crawler.stats.sitemap_found) == (1, 1)
    status = headline(crawler.stats.snapshot(), False)  # what `crawltop ctl NAME status` prints
    assert (status["sitemap_probes"], status["sitemap_found"]) == (1, 1)


async def _silent_server(paths: list[str]) -> tuple[asyncio.AbstractServer, int]:
    """Accepts, reads the request line, never answers: a host that times out."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        paths.append(line.decode(errors="replace").split(" ")[1] if line.count(b" ") >= 2 else "?")
        try:
            await reader.read()  # until the client gives up
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_an_unreachable_root_gives_one_record_as_fast_as_without_sitemaps() -> None:
    # refused: nothing listens on this port (bound, then closed)
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    times = {}
    for sitemaps in (True, False):
        t0 = time.monotonic()
        _, sink = await crawl(f"http://127.0.0.1:{port}/", sitemaps=sitemaps, max_tries=3, backoff=0.3)
        times[sitemaps] = time.monotonic() - t0
        assert len(sink.records) == 1 and sink.records[0].error_kind == "connect"
    assert times[True] < times[False] * 1.5 + 1.0, times

    # times out: the probe is never sent, the one record is the root's
    paths: list[str] = []
    server, port = await _silent_server(paths)
    try:
        for sitemaps in (True, False):
            t0 = time.monotonic()
            _, sink = await crawl(f"http://127.0.0.1:{port}/", sitemaps=sitemaps, max_tries=2, timeout=0.5)
            times[sitemaps] = time.monotonic() - t0
            assert len(sink.records) == 1 and sink.records[0].error_kind == "timeout"
    finally:
        server.close()
    # each crawl: robots.txt's silence is the first strike, the root's the second, and a host
    # that never answered retires after two: one try of the root, never a probe
    assert "/sitemap.xml" not in paths and paths.count("/") == 2, paths
    assert times[True] < times[False] * 1.5 + 1.0, times


async def test_headless_summary_and_status_json_show_sitemap_probes(serve, tmp_path) -> None:
    site = await serve({"/": page()})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawltop", "crawl", site.url + "/", "--headless", "-o", str(tmp_path / "r.jsonl"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**_env(tmp_path)})
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err
    assert "sitemap probes 1 (0 found)" in out.decode()
    assert "errors: 0" in out.decode()
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert [json.loads(x)["url"] for x in lines] == [site.url + "/"]


def _env(tmp_path) -> dict[str, str]:
    import os

    return {**os.environ, "CRAWLTOP_RUN_DIR": str(tmp_path / "run")}
