"""`--browser`: what a tab's requests are recorded from, Chromium's own network stack paused
through DevTools `Fetch` (core/fetching/devtools.py, core/fetching/tabroutes.py), against real
aiohttp sites on 127.0.0.1, counted at the server.
"""
from __future__ import annotations

import argparse
import asyncio
import gzip
import statistics
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from support.crawl import crawl
from support.proxy import Proxy
from support.sites import Handler, Site, held, page, redirect, serving, slow
from support.spasite import PNG
from test_browser import BROWSER, crawl_warc
from warcio.archiveiterator import ArchiveIterator

from crawltop.cli.options import browser_options

pytestmark = pytest.mark.chromium  # skipped without Chromium, failed with CI set (tests/conftest.py)


class AnySite(Site):
    """A Site that answers every method (a script's POST), each request kept with its method."""

    METHODS = "*"

    def __init__(self, routes: dict[str, Handler]) -> None:
        super().__init__(routes)
        self.methods: list[tuple[str, str]] = []

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.methods.append((request.method, request.path))
        return await super()._dispatch(request)



@pytest.fixture
async def serve_any() -> AsyncIterator[Callable[..., Awaitable[Site]]]:
    async with serving(AnySite) as start:
        yield start


def warc_pairs(base: Path) -> dict[tuple[str, str], Any]:
    """(record type, URL) -> (http headers, payload) of every record in the series' files."""
    out: dict[tuple[str, str], Any] = {}
    for path in sorted(base.parent.glob(base.name.replace(".warc.gz", "-*.warc.gz"))):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("response", "request"):
                    out[(rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI"))] = (
                        rec.http_headers, rec.rec_headers, rec.content_stream().read())
    return out


def _js(text: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=text, content_type="application/javascript")
    return handler


async def _script_crawl(serve, script: str, routes: dict[str, Handler], warc: Path) -> tuple[Any, dict[str, Any]]:
    """A page whose /app.js runs `script`, `routes` beside it, crawled with the browser into
    `warc`: its site, and its Records by URL."""
    site = await serve({"/": page(extra='<script src="/app.js"></script>'), "/app.js": _js(script), **routes})
    _, sink = await crawl_warc(site.url + "/", warc, **BROWSER, requisites=True)
    return site, sink.by_url()


async def test_a_scripts_post_is_recorded_with_its_method_and_sent_once(serve_any, tmp_path):
    """A script's POST goes out once, from Chromium (the server sees POST), and its Record and
    WARC request record say POST; the page's other requests are GETs, one each."""
    async def save(request: web.Request) -> web.StreamResponse:
        got = await request.read()
        return web.json_response({"method": request.method, "got": got.decode()})

    script = 'fetch("/api/save", {method: "POST", body: "x=1"}).then(r => r.json());'
    warc = tmp_path / "post.warc.gz"
    site, by = await _script_crawl(serve_any, script, {"/api/save": save}, warc)
    base = site.url
    saved = by[base + "/api/save"]
    assert saved.status == 200 and saved.kind == "requisite" and saved.via == base + "/", saved
    assert [m for m in site.methods if m[1] != "/robots.txt"] == [("GET", "/"), ("GET", "/app.js"),
                                                                 ("POST", "/api/save")], site.methods
    records = warc_pairs(warc)
    request_line = records[("request", base + "/api/save")][0].protocol
    assert request_line == "POST", request_line
    assert records[("request", base + "/app.js")][0].protocol == "GET"
    assert b'"method": "POST"' in records[("response", base + "/api/save")][2]


async def test_a_body_over_max_bytes_is_cut_there_and_marked_truncated(serve, tmp_path):
    """The tab's script is 300 kB, --max-bytes 100 kB: its Record keeps 100,000 bytes, truncated,
    and its WARC record says `WARC-Truncated: length`; the server saw one request."""
    big = "/*" + "x" * 300_000 + "*/"
    site = await serve({"/": page(extra='<script src="/big.js"></script>'), "/big.js": _js(big)})
    base = site.url
    warc = tmp_path / "big.warc.gz"
    _, sink = await crawl_warc(base + "/", warc, **BROWSER, requisites=True, max_bytes=100_000)
    rec = sink.by_url()[base + "/big.js"]
    assert rec.status == 200 and rec.truncated and rec.size == 100_000, rec
    _, headers, body = warc_pairs(warc)[("response", base + "/big.js")]
    assert headers.get_header("WARC-Truncated") == "length" and len(body) == 100_000
    assert site.hits["/big.js"] == 1


async def test_a_gzip_answer_is_recorded_decoded_by_the_warcs_rules(serve, tmp_path):
    """Chromium hands the body decoded: the WARC keeps it so, its Content-Encoding as
    X-Crawltop-Orig-Content-Encoding and Content-Length the stored length (read with warcio)."""
    data = b'{"items": [' + b", ".join(b'"item %d"' % n for n in range(500)) + b"]}"

    async def zipped(request: web.Request) -> web.StreamResponse:
        return web.Response(body=gzip.compress(data), headers={"Content-Encoding": "gzip",
                                                              "Content-Type": "application/json"})

    script = 'fetch("/data.json").then(r => r.json());'
    warc = tmp_path / "gzip.warc.gz"
    site, by = await _script_crawl(serve, script, {"/data.json": zipped}, warc)
    base = site.url
    rec = by[base + "/data.json"]
    assert rec.status == 200 and rec.size == len(data) and not rec.truncated, rec
    http, _, body = warc_pairs(warc)[("response", base + "/data.json")]
    assert body == data
    assert http.get_header("Content-Encoding") is None
    assert http.get_header("X-Crawltop-Orig-Content-Encoding") == "gzip"
    assert http.get_header("Content-Length") == str(len(data))
    assert site.hits["/data.json"] == 1


async def test_frames_and_workers_requests_pass_the_rules_before_they_reach_a_server(serve, tmp_path):
    """An excluded host's iframe, the same host loaded by a sandboxed srcdoc frame, by another
    site's frame (a same-origin frame's redirect) and by a dedicated worker: none reaches that
    server (counted there): Chromium keeps every frame in the page's renderer. The worker's allowed fetch is
    recorded as the page's requisite, once."""
    barred = await serve({"/frame": page(), "/x.png": page(), "/y.png": page(), "/w.json": page()}, "127.0.0.3")
    # another site's frame, reached by a redirect of a same-origin one: a renderer of its own
    # under site isolation, whose requests the tab's session would never see
    other = await serve({"/frame": page(extra=f'<img src="{barred.url}/y.png">')}, "127.0.0.2")
    worker = f'fetch("/from-worker.json"); fetch("{barred.url}/w.json");'
    frames = (f'<iframe src="{barred.url}/frame"></iframe><iframe src="/hop"></iframe>'
              f'<iframe sandbox="allow-scripts" srcdoc="<img src=&quot;{barred.url}/x.png&quot;>"></iframe>'
              '<script>new Worker("/worker.js");</script>')

    async def json_answer(request: web.Request) -> web.StreamResponse:
        return web.json_response({})

    site = await serve({"/": page(extra=frames), "/worker.js": _js(worker), "/from-worker.json": json_answer,
                        "/hop": redirect(other.url + "/frame")})
    base = site.url
    _, sink = await crawl(base + "/", **BROWSER, requisites=True, exclude=(r"127\.0\.0\.3",))
    by = sink.by_url()
    assert barred.hits == {}, barred.hits
    assert other.hits.get("/frame") == 1, other.hits  # the redirected frame did load: its image was refused
    fetched = by[base + "/from-worker.json"]
    assert fetched.status == 200 and fetched.kind == "requisite" and site.hits["/from-worker.json"] == 1, fetched


async def test_the_browsers_requests_go_through_the_proxy_with_its_credentials(serve, tmp_path):
    """--proxy with a user and password: the page's own request (aiohttp) and every request
    its tab makes (Chromium, loopback included) go through the proxy, which saw each URL once
    with its credentials; Chromium's first try without them was refused and answered."""
    script = 'fetch("/data.json");'

    async def json_answer(request: web.Request) -> web.StreamResponse:
        return web.json_response({})

    site = await serve({"/": page(extra='<script src="/app.js"></script><img src="/logo.png">'),
                        "/app.js": _js(script), "/data.json": json_answer, "/logo.png": page()})
    base = site.url
    proxy = await Proxy("crawler", "pr0xy-pw").start()
    try:
        _, sink = await crawl(base + "/", **BROWSER, requisites=True,
                              proxy=f"http://crawler:pr0xy-pw@127.0.0.1:{proxy.port}")
    finally:
        await proxy.stop()
    by = sink.by_url()
    for p in ("/", "/app.js", "/data.json", "/logo.png"):
        assert by[base + p].status == 200, by[base + p]
    through = [url for url, _ in proxy.seen]
    for p in ("/", "/app.js", "/data.json", "/logo.png"):
        assert through.count(base + p) == 1, (p, through)
    assert {p: n for p, n in site.hits.items() if p != "/robots.txt"} == dict.fromkeys(
        ("/", "/app.js", "/data.json", "/logo.png"), 1), site.hits
    assert proxy.refused >= 1  # Chromium asks without credentials first; the tab answered the challenge


def test_the_command_line_takes_proxy_and_refuses_dns_server_with_the_browser(tmp_path):
    """--browser --proxy reaches the crawl; --browser --dns-server is one line and exit 2 (Chromium
    resolves with the system's resolver), nothing started."""
    args = argparse.Namespace(browser=True, proxy="http://127.0.0.1:3128", dns_servers=[], command="crawl")
    assert browser_options(args)["browser"] is True
    done = subprocess.run([sys.executable, "-m", "crawltop.cli", "crawl", "http://127.0.0.1:9/", "--headless",
                           "--browser", "--dns-server", "127.0.0.1:53"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "--dns-server" in lines[0], done.stderr


async def _png(request: web.Request) -> web.StreamResponse:
    return web.Response(body=PNG, content_type="image/png")


def _gaps(site: Site) -> list[float]:
    times = sorted(t for t, _ in site.times)
    return [b - a for a, b in zip(times, times[1:], strict=False)]


async def test_a_tabs_requests_wait_for_their_hosts_turns(serve):
    """--delay 0.4: the page's requisites on its own host and on another host arrive at each
    server at least the delay apart (timestamps taken by the servers), robots.txt and the
    page's own request included; each is recorded once."""
    other = await serve({f"/o{n}.png": _png for n in range(2)}, "127.0.0.2")
    imgs = "".join(f'<img src="/i{n}.png">' for n in range(4)) + "".join(
        f'<img src="{other.url}/o{n}.png">' for n in range(2))
    site = await serve({"/": page(extra=imgs), **{f"/i{n}.png": _png for n in range(4)}})
    _, sink = await crawl(site.url + "/", **BROWSER, requisites=True, delay=0.4)
    by = sink.by_url()
    for url in [*(f"{site.url}/i{n}.png" for n in range(4)), *(f"{other.url}/o{n}.png" for n in range(2))]:
        assert by[url].status == 200 and by[url].kind == "requisite", by[url]
    assert len(site.times) == 6 and len(other.times) == 3, (site.times, other.times)  # robots.txt first
    # A server stamps a request when its handler runs, late by up to a loaded machine's lag,
    # which shortens the gap after a late stamp: the span of a server's stamps loses at most
    # one lag, while one request let through early would cost it a whole delay.
    for server in (site, other):
        gaps = _gaps(server)
        assert sum(gaps) >= 0.4 * len(gaps) - 0.1, (gaps, server.times)
        assert statistics.median(gaps) >= 0.4 - 0.03, (gaps, server.times)
        for i, gap in enumerate(gaps):  # a short gap only after a late one: the two still two delays
            if gap < 0.3:
                assert i > 0 and gaps[i - 1] + gap >= 0.8 - 0.1, (i, gaps, server.times)


async def test_per_host_holds_for_a_tabs_requests(serve):
    """--per-host 1: the page's slow requisites on its host go one at a time beside the page
    (its worker's slot lent to its tab), and those on another host one at a time too."""
    other = await serve({f"/o{n}.png": slow(0.3, _png) for n in range(3)}, "127.0.0.2")
    imgs = "".join(f'<img src="/i{n}.png">' for n in range(3)) + "".join(
        f'<img src="{other.url}/o{n}.png">' for n in range(3))
    site = await serve({"/": page(extra=imgs), **{f"/i{n}.png": slow(0.3, _png) for n in range(3)}})
    _, sink = await crawl(site.url + "/", **BROWSER, requisites=True, per_host=1)
    by = sink.by_url()
    assert all(by[f"{site.url}/i{n}.png"].status == 200 for n in range(3)), sink.records
    assert all(by[f"{other.url}/o{n}.png"].status == 200 for n in range(3)), [
        (r.url, r.status, r.error) for r in sink.records]
    assert site.max_in_flight == 1 and other.max_in_flight == 1, (site.max_in_flight, other.max_in_flight)


async def test_a_request_the_page_gives_up_frees_its_hosts_turn(serve):
    """--per-host 1: the page aborts a fetch() the server never answers; the slot it held on
    the page's host is free again at once, so the images waiting behind it load in the tab
    (not refused at the end of their wait), and the given-up URL's Record says why."""
    release = asyncio.Event()
    # the images start while the fetch() holds the host's one slot (so the page is never idle
    # meanwhile: they are in flight, waiting for their turn), and it is given up after
    script = ('const c = new AbortController(); fetch("/hang", {signal: c.signal}).catch(() => {});'
              'setTimeout(() => { for (let n = 0; n < 3; n++) { const i = new Image();'
              ' i.src = "/i" + n + ".png"; document.body.appendChild(i); } }, 20);'
              'setTimeout(() => c.abort(), 150);')
    site = await serve({"/": page(extra='<script src="/app.js"></script>'), "/app.js": _js(script),
                        "/hang": held(release), **{f"/i{n}.png": _png for n in range(3)}})
    try:
        _, sink = await crawl(site.url + "/", **BROWSER, requisites=True, per_host=1, page_timeout=8.0)
    finally:
        release.set()
    by = sink.by_url()
    home = by[site.url + "/"]
    assert home.browser is not None and home.browser["failed"] == 1, home.browser  # the aborted fetch() alone
    for n in range(3):
        assert by[f"{site.url}/i{n}.png"].status == 200 and site.hits[f"/i{n}.png"] == 1
    hang = by[site.url + "/hang"]
    assert hang.status is None and "gave the request up" in (hang.error or ""), hang


async def test_an_answer_whose_body_never_comes_whole_is_a_failure_not_an_empty_answer(serve, tmp_path):
    """The server sends a script's headers (Content-Length 5,000) then drops the connection
    mid-body: its Record says the load failed, in words, never a complete 200 of what came;
    a 204 is recorded as it is, with no body."""
    async def cut(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/javascript", "Content-Length": "5000"})
        await resp.prepare(request)
        await resp.write(b"/*" + b"x" * 500)
        assert request.transport is not None
        request.transport.abort()
        return resp

    async def empty(request: web.Request) -> web.StreamResponse:
        return web.Response(status=204)

    script = 'fetch("/nothing").catch(() => {});'
    site = await serve({"/": page(extra='<script src="/cut.js"></script>'
                                        '<script src="/app.js"></script>'),
                        "/cut.js": cut, "/app.js": _js(script), "/nothing": empty})
    base = site.url
    warc = tmp_path / "cut.warc.gz"
    _, sink = await crawl_warc(base + "/", warc, **BROWSER, requisites=True, robots=False)
    by = sink.by_url()
    cut_js = by[base + "/cut.js"]
    assert cut_js.status is None and "body" in (cut_js.error or ""), (cut_js.status, cut_js.size, cut_js.error)
    assert site.hits["/cut.js"] == 1
    nothing = by[base + "/nothing"]
    assert nothing.status == 204 and nothing.error is None and nothing.size == 0, nothing
    assert by[base + "/"].status == 200 and len(sink.records) == len(by)


async def test_a_request_going_out_unrecorded_gives_its_hosts_turn_back(serve_any):
    """--per-host 1: the page's script POSTs to one URL three times (the first is claimed and
    recorded; the others go out unrecorded, their answers never paused), then loads an image
    on the same host: each unrecorded request's end frees the host's one slot (told by the
    session's Network events), so the image loads in the tab, nothing refused."""
    async def api(request: web.Request) -> web.StreamResponse:
        return web.json_response({"ok": True})

    script = ('(async () => { for (let n = 0; n < 3; n++) await fetch("/api", {method: "POST", body: "n"});'
              ' const i = new Image(); i.src = "/i.png"; document.body.appendChild(i); })();')
    site = await serve_any({"/": page(extra='<script src="/app.js"></script>'), "/app.js": _js(script),
                            "/api": api, "/i.png": _png})
    base = site.url
    _, sink = await crawl(base + "/", **BROWSER, requisites=True, per_host=1, page_timeout=20.0, robots=False)
    by = sink.by_url()
    home = by[base + "/"]
    assert home.error is None and home.browser is not None and home.browser["failed"] == 0, home
    assert by[base + "/api"].status == 200 and by[base + "/i.png"].status == 200, sink.records
    assert [m for m in site.methods if m[1] == "/api"] == [("POST", "/api")] * 3, site.methods
    assert [m for m in site.methods if m[1] == "/i.png"] == [("GET", "/i.png")], site.methods
