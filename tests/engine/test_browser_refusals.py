"""`--browser`: what the crawl's rules refuse in a tab (--exclude, an ignore, robots.txt) is
counted and recorded as the aiohttp path counts and records the same refusal, and never
reaches the server (core/fetching/browser_rules.py, core/fetching/tabroutes.py). Real
Chromium, real aiohttp sites on 127.0.0.1.
"""
from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from support.crawl import ListSink
from support.sites import Handler, page
from support.spasite import PNG
from test_browser import BROWSER

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.outcomes import outcome

pytestmark = pytest.mark.chromium  # skipped without Chromium, failed with CI set (tests/conftest.py)

REFUSED = ("/private/a.png", "/secret/b.png", "/ign/c.png")  # --exclude, robots.txt, an ignore
IMGS = "".join(f'<img src="{p}">' for p in REFUSED)
# The page's script adds the same images, and fetch()es a disallowed URL no link names
SCRIPT = ("for (const p of " + repr(list(REFUSED)) + ") { const i = new Image(); i.src = p;"
          ' document.body.appendChild(i); } fetch("/secret/d.json").catch(() => {});')


def _text(text: str, kind: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=text, content_type=kind)
    return handler


async def _png(request: web.Request) -> web.StreamResponse:
    return web.Response(body=PNG, content_type="image/png")


def _site(root: Handler) -> dict[str, Handler]:
    return {"/robots.txt": _text("User-agent: *\nDisallow: /secret/\n", "text/plain"), "/": root,
            "/app.js": _text(SCRIPT, "application/javascript"), "/secret/d.json": _text("{}", "application/json"),
            **{p: _png for p in REFUSED}}


async def _crawl(root: str, **options: Any) -> tuple[Crawler, ListSink]:
    sink = ListSink()
    crawler = Crawler(CrawlConfig(roots=(root,), requisites=True, exclude=("/private/",), backoff=0.01,
                                  timeout=5.0, **options), sinks=[sink])
    await crawler.steering.add_ignore("/ign/")
    await crawler.crawl()
    return crawler, sink


def _seen(crawler: Crawler, sink: ListSink, base: str) -> dict[str, Any]:
    """What the crawl says of the refused URLs: their Records (outcome, words, tries), the
    robots count and the ignore's."""
    by = sink.by_url()
    [rule] = crawler.steering.ignores()
    paths = (*REFUSED, "/secret/d.json")
    return {"records": {u[len(base):]: (outcome(r.status, r.error_kind, r.error), r.error_kind, r.error, r.tries,
                                        r.fetched_at) for u, r in by.items() if u[len(base):] in paths},
            "robots_blocked": crawler.stats.robots_blocked, "stopped": rule.stopped,
            "skipped": crawler.stats.tally.counts["skipped"]}


async def test_refused_requests_are_counted_and_recorded_as_on_the_aiohttp_path(serve):
    """The same three images as links of a static page (aiohttp) and as what a page's script
    adds (a tab): the excluded and the ignored one have no Record, the disallowed one its one
    skip Record, and the counters agree; the script's fetch() of a disallowed URL no link
    names is one more skip Record. The server sees none of them."""
    plain = await serve(_site(page(extra=IMGS)))
    crawler, sink = await _crawl(plain.url + "/")
    aiohttp = _seen(crawler, sink, plain.url)
    assert aiohttp["records"] == {"/secret/b.png": ("skipped", "robots", "BlockedByRobots: disallowed by robots.txt",
                                                    0, None)}, aiohttp
    assert aiohttp["robots_blocked"] == aiohttp["skipped"] == 1 and aiohttp["stopped"] == 1, aiohttp

    built = await serve(_site(page(extra='<script src="/app.js"></script>')))
    crawler, sink = await _crawl(built.url + "/", **BROWSER)
    tab = _seen(crawler, sink, built.url)
    assert tab["records"] == {**aiohttp["records"], "/secret/d.json": aiohttp["records"]["/secret/b.png"]}, tab
    assert tab["robots_blocked"] == tab["skipped"] == 2 and tab["stopped"] == aiohttp["stopped"], tab
    assert len(sink.records) == len(sink.by_url()), [r.url for r in sink.records]  # never a second Record
    for site in (plain, built):
        assert not [p for p in site.hits if p.startswith(("/private/", "/secret/", "/ign/"))], site.hits
    assert sink.by_url()[built.url + "/app.js"].status == 200


async def test_a_shared_workers_requests_never_get_past_the_rules(serve):
    """A page starts a SharedWorker that fetch()es a URL robots.txt disallows and an
    excluded one: Chromium runs a shared worker in a process of its own, whose requests
    the tab's DevTools session never sees, so pages get no SharedWorker; the server sees
    neither URL, and the page is still recorded."""
    worker = 'fetch("/secret/sw.json").catch(() => {}); fetch("/private/sw.json").catch(() => {});'
    start = '<script>try { new SharedWorker("/sw.js"); } catch (e) {}</script>'
    site = await serve({**_site(page(extra=start)), "/sw.js": _text(worker, "application/javascript"),
                        "/secret/sw.json": _text("{}", "application/json"),
                        "/private/sw.json": _text("{}", "application/json")})
    _, sink = await _crawl(site.url + "/", **BROWSER)
    assert sink.by_url()[site.url + "/"].status == 200
    assert not [p for p in site.hits if p.startswith(("/private/", "/secret/"))], site.hits
