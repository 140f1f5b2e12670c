"""The link check's bookkeeping across Records (core/queueing/findings.py) and the frontier's
split of a page's links into never seen and seen before, which feeds it."""
from __future__ import annotations

from pathlib import Path

import pytest
from support.crawl import crawl
from support.sites import page

from crawltop.core.parsing.page import LinkExtractor, Want
from crawltop.core.queueing import findings
from crawltop.core.queueing.findings import KEEP_REFERRERS, Referrers
from crawltop.core.queueing.frontier import MemoryFrontier
from crawltop.core.queueing.item import Item
from crawltop.core.storage.store import SqliteStore


def test_a_broken_url_names_the_pages_that_waited_for_it_and_counts_the_rest() -> None:
    book = Referrers()
    target, fine = "http://h/broken", "http://h/fine"
    pages = [f"http://h/p{i}" for i in range(KEEP_REFERRERS + 5)]
    for p in pages:
        book.again_all([target, fine], p, "L", [])
        book.again_all([target], p, "I", [])  # the same page again (an image of it): once
    assert book.recorded(fine, broken=False, via=None) is None
    pairs, more = book.recorded(target, broken=True, via=pages[0])
    assert pairs == [[p, "a"] for p in pages[1:KEEP_REFERRERS]] and more == 5
    later: list[list[str]] = []
    book.again_all([target, fine], "http://h/late", "Y", later)  # recorded broken already: in the page's Record
    assert later == [[target, "srcset"]]


def test_the_book_forgets_its_oldest_quarter_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(findings, "MAX_BOOK", 8)
    book = Referrers()
    urls = [f"http://h/u{i}" for i in range(8)]
    book.again_all(urls, "http://h/page", "L", [])
    assert book.recorded(urls[0], broken=True, via=None) is not None  # still waiting: not forgotten yet
    book.again_all(["http://h/new"], "http://h/page2", "L", [])  # the ninth: the oldest two go
    assert book.recorded(urls[1], broken=True, via=None) is None  # forgotten: nobody is named
    assert book.recorded(urls[7], broken=True, via=None) == ([["http://h/page", "a"]], 0)
    assert len(book._book) <= 8


def test_urls_recorded_broken_are_forgotten_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(findings, "MAX_BOOK", 8)
    book = Referrers()
    book.recorded("http://h/broken", broken=True, via=None)  # the oldest entry
    for i in range(7):
        book.recorded(f"http://h/fine{i}", broken=False, via=None)
    book.again_all(["http://h/new"], "http://h/page", "L", [])  # full: the oldest two go, but not a broken one
    named: list[list[str]] = []
    book.again_all(["http://h/broken"], "http://h/late", "L", named)
    assert named == [["http://h/broken", "a"]]


@pytest.mark.parametrize("target_first", [True, False])
async def test_a_missing_fragment_is_reported_once_per_page_however_often_it_is_written(serve,
                                                                                       target_first: bool) -> None:
    """Three spellings of one missing fragment are one finding: in /p's Record when /t was
    parsed first (judged at once), in /t's when /p was (it waited). A chain of single
    links fixes the order (-c 1)."""
    frags = page("/t#gone", "./t#gone", "t#gone", "/t#here")
    target = '<h2 id="here">x</h2>'
    routes = ({"/": page("/t"), "/t": page("/p", extra=target), "/p": frags} if target_first
              else {"/": page("/p"), "/p": frags, "/t": page(extra=target)})
    site = await serve(routes)
    _, sink = await crawl(site.url + "/", concurrency=1, fragments=True, requisites=False, external=False)
    finding = [site.url + "/p", site.url + "/t", "gone"]
    assert sink.by_url()[site.url + ("/p" if target_first else "/t")].missing_fragments == [finding]
    assert [m for r in sink.records for m in r.missing_fragments or ()] == [finding]


async def test_links_to_urls_seen_before_are_told_to_the_referrers_after_max_pages(serve) -> None:
    """Once --max-pages is reached nothing new is queued, but a URL queued before still gets
    its Record: a page linking to it then is named under it if it broke."""
    site = await serve({"/": page("/a", "/gone"), "/a": page("/gone")})
    _, sink = await crawl(site.url + "/", concurrency=1, max_pages=3, fragments=False, requisites=False,
                          external=False)
    recs = sink.by_url()
    gone, a = recs[site.url + "/gone"], recs[site.url + "/a"]
    assert gone.status == 404 and len(recs) == 3
    # /a's link is in /a's Record if /gone was recorded first, else in /gone's (the links' order)
    named = [[site.url + "/a", u] for u, _ in a.broken_links or ()] + [[p, site.url + "/gone"] for p, _ in
                                                                        gone.referrers or ()]
    assert named == [[site.url + "/a", site.url + "/gone"]], (a.broken_links, gone.referrers)


def test_one_walk_reads_links_ids_and_nofollow_each_node_once() -> None:
    """lexbor returns a node once per selector it matches (an <a href id> twice): each is
    still one link, one nofollow, and its ids."""
    html = ('<base><base href="/b/"><a href="x" rel="NoFollow" id="i1" name="n1">x</a>'
            '<a href="y" rel="nofollow">y</a><a name="n2"></a><area href="z" id="i2"><a href>bare</a>'
            '<div id="i3"><iframe src="f" id="i4"></iframe></div><p id="">empty</p>')
    refs = LinkExtractor().read(html, "http://h/d/p", lambda h: True, Want.FRAGMENTS)
    assert refs.links == {"http://h/b/x", "http://h/b/y", "http://h/b/z"}
    assert refs.frames == {"http://h/b/f"} and refs.nofollow_links == 2
    assert refs.ids == {"i1", "n1", "i2", "i3", "i4", "n2"}
    plain = LinkExtractor().read(html, "http://h/d/p", lambda h: True)
    assert plain.ids is None and plain.links == refs.links and plain.nofollow_links == 2


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_split_seen_says_what_seen_says(kind: str, tmp_path: Path) -> None:
    store = MemoryFrontier() if kind == "memory" else SqliteStore.open(str(tmp_path / "s.db"))
    try:
        for url in ("http://h/a", "http://h/c"):
            assert store.add(Item(url, 5, 0))
        urls = ["http://h/a", "http://h/b", "http://h/c", "http://h/d"]
        assert store.split_seen(urls) == (["http://h/b", "http://h/d"], ["http://h/a", "http://h/c"])
        assert store.split_seen(["http://h/a"]) == ([], ["http://h/a"])
        assert store.split_seen(["http://h/e"]) == (["http://h/e"], [])
        assert [store.seen(u) for u in urls] == [True, False, True, False]
    finally:
        if isinstance(store, SqliteStore):
            store.close()
