"""The engine against the bundled demo site: the counts a correct crawl must produce."""
from __future__ import annotations

from collections import Counter

from support.crawl import crawl

from crawltop.demo.site import EXPECTED, DemoSite


async def test_demo_site_crawl_matches_expected() -> None:
    async with DemoSite(fast=True) as site:
        crawler, sink = await crawl(site.url, concurrency=10, timeout=5.0, sitemaps=True,
                                    requisites=True, external=True, fragments=True)
    recs = sink.records
    s = crawler.stats
    assert len(recs) == len({r.url for r in recs}) == EXPECTED.urls == crawler.frontier.seen_count
    statuses = Counter(r.status for r in recs)
    ok = EXPECTED.pages + EXPECTED.files + EXPECTED.sitemaps + EXPECTED.requisites + EXPECTED.externals
    assert statuses[200] == ok
    kinds = Counter(r.kind for r in recs)
    assert kinds["external"] == 2 and all(site.ext in r.url for r in recs if r.kind == "external")
    assert kinds["requisite"] == s.requisites == sum(1 for r in recs if "/static/" in r.url)
    assert s.externals == 2 and s.pages == sum(1 for r in recs if r.kind == "page" and r.status is not None)
    assert sum(len(r.missing_fragments or ()) for r in recs) == EXPECTED.missing_fragments
    assert {m[2] for r in recs for m in r.missing_fragments or ()} == {"no-such-section"}
    assert sum(1 for r in recs if r.discovery.endswith("M")) == EXPECTED.sitemaps
    assert sum(1 for r in recs if r.next_url) == EXPECTED.redirects == s.redirects
    assert sum(1 for r in recs if r.merged) == EXPECTED.merges == s.merges
    assert statuses[404] == EXPECTED.not_found
    assert statuses[500] == EXPECTED.server_errors
    assert sum(1 for r in recs if (r.error or "").startswith("BlockedByRobots")) == EXPECTED.robots_blocked
    # one vocabulary (core/outcomes.py): errors are the failed URLs; robots-blocked ones are skipped
    assert s.errors == EXPECTED.server_errors and s.tally.counts["skipped"] == EXPECTED.robots_blocked
    assert s.tally.counts["redirected"] == EXPECTED.redirects and s.tally.counts["cancelled"] == 0
    assert s.tally.classes["4xx"] == EXPECTED.not_found
    assert not any("/partner/more/" in r.url for r in recs)  # an external page is never followed
    assert ({r.content_type for r in recs if r.url.endswith((".pdf", ".json"))}
            == {"application/pdf", "application/json"})
