"""The demo's section that JavaScript builds (demo/app.py, what `crawltop demo --browser` adds):
a plain crawl sees its shell and script only; `--browser` finds every story, each URL once.
Needs Chromium: skipped with the reason without it, a failure in CI."""
from __future__ import annotations

import os

import pytest
from support.crawl import crawl

from crawltop.core.fetching.browser import executable
from crawltop.demo import app
from crawltop.demo.site import DemoSite

pytestmark = pytest.mark.chromium


def _needs_chromium() -> None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        why = "playwright is not installed (pip install 'crawltop[browser]'; make test installs it)"
    else:
        why = "" if executable(None) else "no Chromium (apt-get install chromium; .ci/run does it)"
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


async def test_the_demo_app_is_a_shell_without_the_browser() -> None:
    async with DemoSite(fast=True) as site:
        _, sink = await crawl(site.url + "app/", sitemaps=False, requisites=True)
    assert sorted(sink.by_url()) == [site.url + "app/", site.url + "app/app.js"]


async def test_the_demo_app_is_whole_with_the_browser() -> None:
    _needs_chromium()
    async with DemoSite(fast=True) as site:
        _, sink = await crawl(site.url + "app/", sitemaps=False, requisites=True, browser=True, browser_quiet=0.2)
    root = site.url.rstrip("/")
    want = {root + p for p in app.pages()} | {root + u for p in app.pages() for u in app.loads(p)}
    urls = [r.url for r in sink.records]
    assert sorted(urls) == sorted(want)  # every page and every load, each recorded once
    assert all(r.status == 200 for r in sink.records)
