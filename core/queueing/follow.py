"""What a fetched page or stylesheet adds to the crawl: its references queued by kind, and
what a link check learns on the way (broken links' referrers, missing fragments).

The worker loop (core/crawler.py) fetches and decodes; this reads the text once
(core/parsing/page.py), asks core/queueing/kinds.py what each reference is, and queues it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..config import CrawlConfig
from ..monitor.queueview import QueueStats
from ..monitor.stats import Stats
from ..outcomes import OFFLINE_AFTER, OFFLINE_SHARE
from ..output.provenance import hop
from ..output.records import Record
from ..parsing.css import css_refs
from ..parsing.cuts import CutPage
from ..parsing.page import LinkExtractor, PageRefs, Want
from ..parsing.urls import href_target, netloc_of
from .findings import Fragments, Referrers
from .item import Item
from .kinds import EXTERNAL, PAGE, Kinds, References
from .scope import Scope

OFFLINE_WATCH = 10_000  # hosts remembered for it: past this many, the question is settled
# Queue a URL (url, redirects_left, depth, via, discovery): its queue-view prefix; None if it
# was seen before, "" if it was refused (--max-pages, an ignore).
Queue = Callable[[str, int, int, str | None, str], str | None]
Split = Callable[[list[str]], tuple[list[str], list[str]]]  # urls -> (never seen, seen before)


class Follow:
    def __init__(self, config: CrawlConfig, scope: Scope, agent: str, queue: Queue, split: Split,
                 queue_stats: QueueStats, stats: Stats) -> None:
        self.config, self.scope, self.queue, self.queue_stats, self.stats = config, scope, queue, queue_stats, stats
        self.split = split
        self.kinds = Kinds(scope, config, agent)
        self.links = LinkExtractor()
        self.referrers = Referrers()  # core/queueing/findings.py: a link check across two Records
        self.fragments = Fragments()
        self._unresolved: set[str] = set()  # other hosts whose names failed (_offline)
        self._answered: set[str] = set()  # other hosts that sent a response

    def page(self, item: Item, record: Record, text: str | bytes | CutPage, robots_headers: Sequence[str],
             slimmed: bool) -> None:
        """One parse: a page's references are queued by kind; an external page is read only
        for its ids, for the fragment links that point to it. `slimmed`: tags were defused
        (core/parsing/defuse.py), so its ids are not known for sure."""
        kinds = self.kinds
        want = Want.FRAGMENTS if record.kind == EXTERNAL else kinds.want  # external: its ids, nothing else
        refs = self.links.read(text, item.url, self.scope.host_ok, want)
        record.title, record.canonical = refs.title, refs.canonical
        robots = kinds.directives(refs.robots, robots_headers)
        record.robots = robots or None
        record.nofollow_links = refs.nofollow_links
        if refs.capped:  # not read whole (core/parsing/defuse.py MAX_TAGS, core/parsing/memcap.py)
            record.truncated = True
        if kinds.fragments:
            unknown = slimmed or refs.capped  # a defused or capped page's ids are not all known
            missing = self.fragments.parsed(item.url, None if unknown else refs.ids)
            if record.kind != EXTERNAL and not unknown:
                missing += self._fragments(item.url, refs)
            record.missing_fragments = missing or None
        if record.kind != EXTERNAL:
            self._queue_all(item, record, kinds.references(refs, item.discovery, nofollow=kinds.nofollow(robots)))

    def stylesheet(self, item: Item, record: Record, text: str) -> None:
        """A stylesheet's url()s and @imports are its requisites."""
        urls = [u for u in (href_target(self.links, item.url, r, None) for r in css_refs(text)) if u is not None]
        self._queue_all(item, record, self.kinds.stylesheet(urls, item.discovery))

    def recorded(self, record: Record) -> None:
        """A Record is being written: its kind, its waiting referrers if it broke, its
        waiting fragment links dropped (not HTML), and whether the machine looks offline."""
        if not record.kind:
            record.kind = self.kinds.kind_of(record.url, record.discovery)
        broken = record.error_kind not in (None, "cancelled", "ignored") or (record.status or 0) >= 400
        waiting = self.referrers.recorded(record.url, broken, record.via)
        if waiting is not None and (waiting[0] or waiting[1]):
            record.referrers, record.referrers_more = waiting
        if self.kinds.fragments:
            self.fragments.recorded(record.url)
        if record.kind != PAGE and not self.stats.notice:
            self._offline(record)

    def _fragments(self, page: str, refs: PageRefs) -> list[list[str]]:
        """The page's fragment links that name nothing: on itself or on pages parsed before."""
        scope, external, book = self.scope, self.kinds.external, self.fragments
        return [[page, target, frag] for target, frag in dict.fromkeys(refs.fragments)  # each once
                if (external or scope.allows(target)) and not book.check(page, target, frag, refs.ids)]

    def _queue_all(self, item: Item, record: Record, refs: Iterable[References]) -> None:
        """Queue what a page or stylesheet refers to; a URL seen before is told to the
        referrers, so a broken one is reported under every page that uses it."""
        max_depth, via, depth, left = self.config.max_depth, item.url, item.depth + 1, self.config.max_redirect
        deep = max_depth is not None and depth > max_depth
        again, broken_links = self.referrers.again_all, [] if record.broken_links is None else record.broken_links
        prefix, queue, discovery = self.queue_stats.prefix1(item.url), self.queue, item.discovery
        found = new = inside = 0
        for letter, navigation, urls in refs:
            found += len(urls)
            if deep and navigation:
                continue
            path = hop(discovery, letter)
            fresh, seen = self.split(urls)  # most were seen before: no call per link for those
            for url in fresh:  # a fresh one not queued (--max-pages, an ignore, its host's budget) gets no Record
                added = queue(url, left, depth, via, path)
                if added:
                    new += 1
                    inside += added == prefix
            if seen:
                again(seen, via, letter, broken_links)
        record.num_urls, record.num_new_urls = found, new
        record.broken_links = broken_links or None
        self.queue_stats.fetched(item.url, new, inside)

    def _offline(self, record: Record) -> None:
        """Say once when most other hosts' names fail (a machine without a network, or with
        a resolver that knows only a few names): the DNS failures are then no news about the
        links (`report` sets them aside). Counted by host, not by URL: one host that
        answers (a mirror, a proxy's own name) must not hide twenty that cannot."""
        answered, unresolved = self._answered, self._unresolved
        if len(answered) + len(unresolved) >= OFFLINE_WATCH:
            return
        if record.status is not None:
            answered.add(netloc_of(record.url))
        elif record.error_kind == "dns":
            unresolved.add(netloc_of(record.url))
            fails = len(unresolved)
            if fails >= OFFLINE_AFTER and fails >= OFFLINE_SHARE * (fails + len(answered)):
                self.stats.notice = (f"{fails} of {fails + len(answered)} external hosts don't resolve: "
                                     "offline? (report sets them aside)")
