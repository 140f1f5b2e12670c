"""`--browser`: what a tab leaves when it closes (core/fetching/tabroutes.py `refuse_pending`,
core/fetching/tabshare.py): another tab waiting on a load it shared goes on, and its paused
requests end at once. Real Chromium, real aiohttp sites on 127.0.0.1, counted at the server.
"""
from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from support.crawl import crawl
from support.sites import Handler, page, slow
from test_browser import BROWSER

pytestmark = pytest.mark.chromium  # skipped without Chromium, failed with CI set (tests/conftest.py)

# a blocking <head> script: `load` never fires while it is out
HEAD = '<html><head><script src="/app.js"></script></head><body><p>page</p></body></html>'
BUILT = 'document.addEventListener("DOMContentLoaded", () => document.body.insertAdjacentHTML(' \
        '"beforeend", \'<a href="/built">b</a>\'));'


def _head() -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=HEAD, content_type="text/html")
    return handler


async def test_a_tab_closed_while_it_waits_on_a_shared_load_leaves_that_load_to_the_others(serve):
    """Tab C claims the shared script, whose first answer never comes; tab A's fetch() of it
    waits on C's load, and A, idle with that one request left, is read and closed meanwhile.
    Closing A must not cancel C's load for everyone: tab B, opened later, asks for the
    script (its blocking <head> script), is rendered and finds the link the script builds."""
    release = asyncio.Event()
    calls = [0]

    async def script(request: web.Request) -> web.StreamResponse:
        calls[0] += 1
        if calls[0] == 1:
            await release.wait()
        return web.Response(text=BUILT, content_type="application/javascript")

    waiter = page(extra='<script>window.onload = () => fetch("/app.js");</script>')
    site = await serve({"/": page("/c", "/a", "/b"), "/c": _head(), "/a": slow(1.0, waiter), "/b": slow(6.0, _head()),
                        "/app.js": script, "/built": page()})
    try:
        _, sink = await crawl(site.url + "/", **BROWSER, requisites=True, concurrency=3, page_timeout=9.0,
                              max_tries=1, timeout=10.0)
    finally:
        release.set()
    by = sink.by_url()
    a, b, c = (by[site.url + p] for p in ("/a", "/b", "/c"))
    assert a.status == 200 and a.error is None, a
    assert c.error is not None and "timed out" in c.error, c  # its script never came
    assert b.status == 200 and b.error is None, b
    assert by[site.url + "/built"].status == 200, sink.records
    assert calls[0] == 2, calls  # C's, then B's own once C's load was given up
    assert len(sink.records) == len(by)
