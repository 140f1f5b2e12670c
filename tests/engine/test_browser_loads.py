"""`--browser`: what a page loaded in its tab gets its Records whatever one of them does
(core/processing.py): a surprise while one load's Record is made fails that Record only;
each load's WARC request record holds the headers Chromium's network stack really sent.
Real Chromium, a real aiohttp site on 127.0.0.1, the archive read with warcio."""
from __future__ import annotations

import gzip
from collections.abc import Awaitable
from pathlib import Path

import pytest
from aiohttp import web
from support.crawl import ListSink
from support.sites import page
from support.spasite import PNG
from test_browser import BROWSER, crawl_warc
from test_browser_devtools import warc_pairs

from crawltop.core import CrawlConfig, Crawler

pytestmark = pytest.mark.chromium  # skipped without Chromium, failed with CI set (tests/conftest.py)


class RefusingOnce(ListSink):
    """A sink that keeps responses and fails on the first image it is handed (a disk that
    refuses one write): the crawl must go on, and every other load keep its Record."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: str | None = None

    def response(self, url: str, status: int, reason: str, headers: list[tuple[str, str]], body: bytes,
                 request_headers: list[tuple[str, str]], *, truncated: bool | None = None,
                 method: str = "GET", digest: str | None = None) -> Awaitable[None] | None:
        if self.refused is None and url.endswith(".png"):
            self.refused = url
            raise ValueError("no room for this one")
        return None

    def flush(self) -> None:
        pass


async def _png(request: web.Request) -> web.StreamResponse:
    return web.Response(body=PNG, content_type="image/png")


async def test_a_load_whose_record_fails_leaves_the_later_loads_theirs(serve):
    imgs = [f"/i{n}.png" for n in range(4)]
    site = await serve({"/": page(extra="".join(f'<img src="{p}">' for p in imgs)), **{p: _png for p in imgs}})
    sink = RefusingOnce()
    crawler = Crawler(CrawlConfig(roots=(site.url + "/",), requisites=True, backoff=0.01, timeout=5.0, robots=False,
                                  **BROWSER), sinks=[sink])
    await crawler.crawl()
    by = sink.by_url()
    assert len(sink.records) == len(by)  # one Record each
    assert sink.refused is not None and by[sink.refused].error_kind is not None, by.get(sink.refused or "")
    assert "no room for this one" in (by[sink.refused].error or "")
    others = [site.url + p for p in imgs if site.url + p != sink.refused]
    assert [by[u].status for u in others] == [200] * len(others), [by.get(u) for u in others]
    assert by[site.url + "/"].status == 200 and {p: site.hits[p] for p in imgs} == dict.fromkeys(imgs, 1)


async def test_the_warc_request_record_holds_the_headers_chromium_sent(serve, tmp_path: Path):
    """The renderer never sets Host, Accept-Encoding or the cookie a script stored; Chromium's
    network stack adds them (Network.requestWillBeSentExtraInfo): the request record has
    them, the server saw the same, and the cookie's value stays out of the archive."""
    seen: dict[str, str] = {}

    async def img(request: web.Request) -> web.StreamResponse:
        seen.update(request.headers)
        return web.Response(body=PNG, content_type="image/png")

    # the value is made by the script, so the page's own archived body does not hold it
    script = 'document.cookie = "session=hush-" + (4000 + 242) + "; path=/"; const i = new Image();' \
             ' i.src = "/i.png"; document.body.appendChild(i);'

    site = await serve({"/": page(extra=f"<script>{script}</script>"), "/i.png": img})
    warc = tmp_path / "c.warc.gz"
    _, sink = await crawl_warc(site.url + "/", warc, **BROWSER, requisites=True, robots=False)
    assert sink.by_url()[site.url + "/i.png"].status == 200
    assert "hush-4242" in seen.get("Cookie", ""), seen  # Chromium sent it
    headers, _, _ = warc_pairs(warc)[("request", site.url + "/i.png")]
    sent = dict(headers.headers)
    host = site.url.split("://", 1)[1]
    assert sent.get("Host") == host and sent.get("Accept-Encoding") == seen["Accept-Encoding"], sent
    assert sent.get("Cookie") == "REDACTED", sent  # a credential, as on the aiohttp path
    assert not [n for n in sent if n.startswith(":")], sent
    archives = list(tmp_path.glob("c-*.warc.gz"))
    assert archives and all(b"hush-4242" not in gzip.decompress(p.read_bytes()) for p in archives)
