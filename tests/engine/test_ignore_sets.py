"""The curated ignore sets on a wiki-like and a calendar-like site (a real
aiohttp server, the real crawler): `global` stops the loops by default, `mediawiki` and
`blogs` the wiki's history and the calendar, and without `global` the loop runs."""
from __future__ import annotations

import asyncio
import re

import pytest
from support.crawl import ListSink
from support.ignoresite import ARTICLES, POSTS, start_ignore_site
from support.wait import wait_until

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.queueing.patterns import check
from crawltop.core.steering.ignore_sets import NAMES, REPEATS, load, repeated_segments

pytestmark = pytest.mark.timeout(60)


def test_every_set_loads_each_pattern_re2_with_what_it_stops():
    for name in NAMES:
        s = load(name)
        assert s.description and s.patterns, name
        for p in s.patterns:
            check(p.pattern)
            assert p.why, (name, p.pattern)  # the comment above it says what it stops
    assert load("global").repeats and not load("blogs").repeats
    with pytest.raises(ValueError):
        load("nope")


@pytest.mark.parametrize(("url", "loops"), [
    ("http://a.test/css/css/css/site.css", True),
    ("http://a.test/a/b/a/b/", True),
    ("http://a.test/x/2026/05/2026/05/", True),
    ("http://a.test/css/css/site.css", False),  # twice is a real layout now and then
    ("http://a.test/a/b/c/a/b/", False),
    ("http://a.test/docs/?next=/x/x/x/", False),  # the query is not the path
    ("http://a.test/", False),
])
def test_repeated_path_segments(url, loops):
    assert repeated_segments(url) is loops


async def crawl(sets: tuple[str, ...], max_pages: int | None = None) -> tuple[Crawler, ListSink, str]:
    site = await start_ignore_site()
    try:
        sink = ListSink()
        crawler = Crawler(CrawlConfig(roots=(site.url + "/",), robots=False, sitemaps=False, concurrency=4,
                                      max_pages=max_pages, ignore_sets=sets), sinks=[sink])
        await asyncio.wait_for(crawler.crawl(), 45)
        return crawler, sink, site.url
    finally:
        await site.stop()


async def test_global_mediawiki_and_blogs_stop_every_trap_and_the_crawl_ends_by_itself():
    crawler, sink, url = await crawl(("global", "mediawiki", "blogs"))
    fetched = {r.url for r in sink.records}
    content = {f"{url}/", *(f"{url}/wiki/A{k}" for k in range(ARTICLES)), *(f"{url}/blog/{n}/" for n in range(POSTS))}
    assert content <= fetched
    assert not any(re.search(r"skins/skins/skins/|oldid=|action=|replytocom=|share=|%25252525|/cal/", u)
                   for u in fetched), sorted(fetched - content)
    views = {(v.source, v.pattern): v for v in crawler.steering.ignores()}
    assert views[("global", REPEATS)].stopped >= 1
    assert views[("global", "%25252525")].stopped == ARTICLES  # once per page that linked it
    assert views[("mediawiki", r"[?&]oldid=\d+")].stopped >= ARTICLES
    assert sum(v.stopped for (src, _), v in views.items() if src == "blogs") >= 1
    assert {s.name for s in crawler.steering.ignore_sets() if s.on} == {"global", "mediawiki", "blogs"}


async def test_global_alone_stops_the_loops_and_without_it_the_loop_runs():
    crawler, sink, url = await crawl(("global",), max_pages=150)
    fetched = {r.url for r in sink.records}
    assert f"{url}/wiki/skins/skins/" in fetched and f"{url}/wiki/skins/skins/skins/" not in fetched
    assert not any("replytocom=" in u or "share=" in u or "%25252525" in u for u in fetched)
    assert any("oldid=" in u for u in fetched)  # history is the mediawiki set's, not global's

    crawler, sink, url = await crawl((), max_pages=150)
    fetched = {r.url for r in sink.records}
    assert f"{url}/wiki/skins/skins/skins/skins/" in fetched
    assert any("replytocom=" in u for u in fetched) and not crawler.steering.ignores()


async def test_a_set_turned_on_live_drops_its_queued_urls_with_records_naming_it():
    site = await start_ignore_site()
    try:
        sink = ListSink()
        crawler = Crawler(CrawlConfig(roots=(site.url + "/",), robots=False, sitemaps=False, concurrency=1,
                                      delay=0.02, ignore_sets=("global",)), sinks=[sink])
        task = asyncio.ensure_future(crawler.crawl())
        await wait_until(lambda: crawler.frontier.size >= 10)
        steering = crawler.steering
        result = await steering.set_ignore_set("mediawiki", True)
        assert result.ok and result.dropped >= 1
        assert not (await steering.set_ignore_set("mediawiki", True)).ok  # already on
        assert not (await steering.set_ignore_set("nope", True)).ok
        assert (await steering.set_ignore_set("blogs", True)).ok
        await asyncio.wait_for(task, 45)
    finally:
        await site.stop()
    ignored = [r for r in sink.records if r.error_kind == "ignored"]
    assert len(ignored) >= result.dropped and all("(ignore set " in (r.error or "") for r in ignored)
    assert any("(ignore set mediawiki)" in (r.error or "") for r in ignored)
    assert len({r.url for r in sink.records}) == len(sink.records)  # one record per URL
    assert (await steering.set_ignore_set("blogs", False)).ok
    assert "blogs" not in {v.source for v in steering.ignores()}
