"""A site whose pages scripts build, crawled with `--browser` into a WARC, replays from that
WARC alone: the archive is whole for the browser, not only for the crawl's own view.

1. The crawl (the engine as `crawl --browser --warc` runs it, requisites on, two levels of
   links deep) of tests/support/spasite.py's history-routed SPA and docsify-like docs site.
2. Each page opened live in a real headless Chromium (Playwright with the system Chromium,
   launched as core/fetching/browser.py launches it): what its script writes (text, title,
   links) and every request it makes. With warcio: each of those URLs has exactly one
   response record in the WARC, or one revisit whose original is there (every route answers
   the same shell, so all pages but one are revisits).
3. The live site stopped, pywb (`wayback`, from .venv-archive) serves the WARC and its CDXJ,
   each page is opened again through it in Chromium: the same text, title and links appear in
   the replayed DOM, the page asks for the same URLs (mapped back from pywb's replay URLs) and
   none of them goes unanswered (no failed request, no 4xx/5xx, nothing sent past pywb to the
   stopped site). pywb's own files (/static/wombat.js) are left out of the count. pywb can
   replay history routes: its wombat.js gives the page's script the archived URL's
   `location.pathname`, so the router picks the same route it picked live, and `a.href` the
   archived URL, so the links read as they did live.

Without Playwright, Chromium or pywb these skip with the reason; with CI set they fail.
"""
from __future__ import annotations

import asyncio
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from support.archive_tools import Wayback
from support.crawl import ListSink
from support.spasite import doc_paths, docs_site, spa_paths, spa_site
from warcio.archiveiterator import ArchiveIterator

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.fetching.browser import FLAGS, executable
from crawltop.core.output.warc import WarcSink

# chromium and pywb: skipped without them, failed with CI set (tests/conftest.py)
pytestmark = [pytest.mark.chromium, pytest.mark.pywb, pytest.mark.timeout(120)]
# Both sites' scripts write a heading into #app; the page is built when it is there and its images are in
BUILT = "!!document.querySelector('#app h1') && [...document.images].every(i => i.complete)"
LINKS = "as => as.map(a => [a.textContent, a.href])"


@pytest.fixture(autouse=True)
def playwright_installed() -> None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        why = "playwright is not installed (pip install 'crawltop[browser]'; make test installs it)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@dataclass
class Seen:
    """A page as the browser showed it, and what it asked for while building it."""

    title: str = ""
    text: str = ""
    links: list[list[str]] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)  # URLs requested, in order
    unanswered: list[str] = field(default_factory=list)  # failed requests and 4xx/5xx answers


class Tab:
    """One tab, its cache off (each page fetches all it needs, as on a first visit), that
    opens pages one after the other: a fresh context per page would start a renderer each."""

    def __init__(self, page: Any) -> None:
        self.page, self.seen, self.pending = page, Seen(), 0
        page.on("request", self._asked)
        page.on("requestfailed", self._failed)
        page.on("requestfinished", self._finished)
        page.on("response", self._answered)

    @classmethod
    async def open(cls, browser: Any) -> Tab:
        page = await browser.new_page()
        cdp = await page.context.new_cdp_session(page)
        await cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        return cls(page)

    def _asked(self, req: Any) -> None:
        self.seen.asked.append(req.url)
        self.pending += 1

    def _failed(self, req: Any) -> None:
        self.seen.unanswered.append(f"{req.url} failed: {req.failure}")
        self.pending -= 1

    def _finished(self, req: Any) -> None:
        self.pending -= 1

    def _answered(self, resp: Any) -> None:
        if resp.status >= 400:
            self.seen.unanswered.append(f"{resp.url} {resp.status}")

    async def look(self, url: str) -> Seen:
        """Open `url` and wait until its script has written the page and every request it
        made has ended; or, once one went unanswered, until none is open (the page as it
        stands is then what the test shows, with what was missing)."""
        self.seen, self.pending = Seen(), 0
        await self.page.goto(url)
        deadline = time.monotonic() + 15
        while self.pending or not (self.seen.unanswered or await self.page.evaluate(BUILT)):
            assert time.monotonic() < deadline, f"{url} not built: asked {self.seen.asked}"
            await asyncio.sleep(0.05)
        seen = self.seen
        seen.title = await self.page.title()
        seen.text = await self.page.inner_text("#app")
        seen.links = await self.page.eval_on_selector_all("#app a", LINKS)
        return seen


def archived(base: Path) -> tuple[Counter[str], list[str], list[tuple[str, str]]]:
    """Every response and revisit record of the WARC series at `base`, by URL; the URLs of
    the revisits; and each revisit whose original is not in the series, with that payload."""
    records: Counter[str] = Counter()
    responses: dict[str, str] = {}
    revisits: list[tuple[str, str, str]] = []
    for path in sorted(base.parent.glob(base.name.replace(".warc.gz", "-*.warc.gz"))):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                url = rec.rec_headers.get_header("WARC-Target-URI")
                digest = rec.rec_headers.get_header("WARC-Payload-Digest")
                if rec.rec_type == "response":
                    responses[url] = digest
                elif rec.rec_type == "revisit":
                    revisits.append((url, rec.rec_headers.get_header("WARC-Refers-To-Target-URI"), digest))
                else:
                    continue
                records[url] += 1
    return records, [u for u, _, _ in revisits], [(ref, d) for _, ref, d in revisits if responses.get(ref) != d]


def originals(replay_origin: str, urls: list[str]) -> tuple[list[str], list[str]]:
    """The archived URLs behind pywb's replay URLs (`/crawl/<timestamp><modifier>/<url>`),
    pywb's own files left out; and any URL that went elsewhere than pywb."""
    pattern = re.compile(re.escape(replay_origin) + r"/crawl/(?:(?:\d{14})?(?:[a-z]{2}_)?/)?(.+)$")
    out, elsewhere = [], []
    for url in urls:
        if url.startswith(replay_origin + "/static/"):
            continue
        m = pattern.match(url)
        if m:
            out.append(m.group(1))
        else:
            elsewhere.append(url)
    return out, elsewhere


# Two levels of links below the root (the SPA's root, /p/0, /p/1, /p/2; the docs' root and
# /page1 ... /page6): a crawl takes a tab's time per level, and three show what a whole one would
@pytest.mark.parametrize("site_of,paths,loads", [
    (spa_site, spa_paths()[:4], {".js", ".json", ".png"}),  # spa.js, the route's JSON, the logo and its image
    (docs_site, doc_paths()[:7], {".js", ".css", ".md"}),  # docsify.js, theme.css, the page's markdown
], ids=["spa", "docsify"])
async def test_a_page_scripts_build_replays_from_the_crawls_warc(
        serve: Callable[[dict], Any], tmp_path: Path,
        site_of: Callable[[], dict[str, Callable[[web.Request], Any]]], paths: list[str], loads: set[str]) -> None:
    from playwright.async_api import async_playwright

    site = await serve(site_of())
    arch = tmp_path / "arch"
    arch.mkdir()
    warc = arch / "crawl.warc.gz"
    sink = ListSink()
    config = CrawlConfig(roots=(site.url + "/",), browser=True, browser_quiet=0.2, requisites=True,
                         max_depth=2, concurrency=4, timeout=5.0, backoff=0.01)
    await asyncio.wait_for(Crawler(config, sinks=[sink, WarcSink(str(warc))]).crawl(), 60)
    pages = [site.url + p for p in paths]
    assert {r.url for r in sink.records if r.kind == "page"} == set(pages)

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=executable(None), headless=True,
                                           chromium_sandbox=os.geteuid() != 0, args=list(FLAGS))
        try:
            tab = await Tab.open(browser)
            live = {url: await tab.look(url) for url in pages}
            for url, seen in live.items():  # built by its script: a title and links the shell has not
                assert seen.title != "loading" and seen.links and seen.unanswered == [], (url, seen)
                assert seen.asked[0] == url and {Path(u).suffix for u in seen.asked[1:]} == loads, seen.asked

            # the WARC: one record for each URL a page asked for, a response or a revisit of one
            needed = {u for seen in live.values() for u in seen.asked}
            records, revisits, orphans = archived(warc)
            assert {u: n for u, n in records.items() if not u.endswith("/robots.txt")} == dict.fromkeys(needed, 1)
            # every route answers the same shell: all pages but the first are revisits, which
            # pywb must resolve to the original's body for the script to run
            assert len(set(revisits) & set(pages)) == len(pages) - 1, revisits
            assert orphans == []  # each revisit's original is in the WARC, with the same payload

            await site.stop()  # from here on only the archive can answer
            wb = Wayback(tmp_path / "pywb", arch / "crawl.cdxj", arch)
            try:
                origin = f"http://127.0.0.1:{wb.port}"
                for url, was in live.items():
                    seen = await tab.look(f"{origin}/crawl/{url}")
                    got, elsewhere = originals(origin, seen.asked)
                    assert elsewhere == [] and seen.unanswered == [], (url, elsewhere, seen.unanswered)
                    assert sorted(got) == sorted(was.asked), url  # the same requests, each from the archive
                    assert (seen.title, seen.text, seen.links) == (was.title, was.text, was.links), url
            finally:
                wb.stop()
        finally:
            await browser.close()
