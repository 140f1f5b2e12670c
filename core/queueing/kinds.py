"""What is done with each kind of reference a page yields, decided beside the scope.

- page: `a`, `area`, meta refresh, in-scope frames, sitemaps, roots, within `--scope`:
  fetched, parsed, followed;
- requisite: `img`, `srcset`, `link`, `script`, media, embeds, CSS `url()`, off-site frames,
  from any host, at most MAX_REQUISITE_HOPS deep: fetched; a stylesheet is read for its own
  `url()`s;
- external: navigation links out of scope, any host: checked once; an HTML answer is read
  for its ids only.

A queued URL carries its kind in its hop path (core/output/provenance.py): the letter of
what referred to it. The kind is final only with the answer: an in-scope HTML page that
answered 2xx is a page however it was reached, so the one-Record-per-URL rule never costs a
page its links when a requisite or an external link saw it first.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from ..config import CrawlConfig
from ..output.provenance import referrer_letter
from ..parsing.page import PageRefs, Want
from .scope import Scope

PAGE, REQUISITE, EXTERNAL = "page", "requisite", "external"
REQUISITE_LETTERS = frozenset("IYKJVOU")
MAX_REQUISITE_HOPS = 5  # page -> stylesheet -> @import -> image ... (wpull's requisite depth)
NOFOLLOW = frozenset(("nofollow", "none"))


def requisite_hops(discovery: str) -> int:
    """How many requisite hops end the path (redirects between them not counted)."""
    n = 0
    for ch in reversed(discovery):
        if ch == "R":
            continue
        if ch not in REQUISITE_LETTERS and ch != "E":
            break
        n += 1
    return n


def directives(meta: str, headers: Sequence[str], agent: str) -> str:
    """The robots directives of a page, lower-case, comma-joined: its `<meta name=robots>`
    and its `X-Robots-Tag` headers (a `bot: nofollow` one for another user agent left out)."""
    if not meta and not headers:  # most pages: nothing to split
        return ""
    parts = [d for d in (p.strip() for p in meta.split(",")) if d]
    for header in headers:
        for value in header.lower().split(","):
            d = value.strip()
            if ":" in d and d.split(":", 1)[0].strip() != "unavailable_after":
                bot, _, d = d.partition(":")
                if bot.strip() not in (agent, "*"):
                    continue
                d = d.strip()
            if d:
                parts.append(d)
    return ",".join(dict.fromkeys(parts))


class References(NamedTuple):
    """URLs of one kind from one page, queued with one hop letter (a batch: the per-link
    loop stays as tight as it was when only <a> links were followed)."""

    letter: str  # hop letter: L, E, R (meta refresh) or a requisite's
    navigation: bool  # obeys --max-depth and nofollow
    urls: list[str]


class Kinds:
    """The per-kind policy of one crawl: which references of a page are queued, and as what."""

    def __init__(self, scope: Scope, config: CrawlConfig, agent: str) -> None:
        self.scope = scope
        self.requisites = config.requisites
        self.external = config.external
        self.fragments = config.fragments
        self.obey = config.robots  # --no-robots ignores meta robots and X-Robots-Tag too
        self.agent = agent.split("/", 1)[0].lower()
        want = Want.LINKS
        if config.requisites:
            want |= Want.REQUISITES
        if config.fragments:
            want |= Want.FRAGMENTS
        if config.external:
            want |= Want.ALL_HOSTS
        self.want = want

    def kind_of(self, url: str, discovery: str) -> str:
        """The kind a queued URL was reached as (the answer may still make it a page)."""
        letter = referrer_letter(discovery)
        if letter in REQUISITE_LETTERS:
            return REQUISITE
        if self.scope.allows(url):
            return PAGE
        return REQUISITE if letter == "E" else EXTERNAL

    def answered(self, kind: str, url: str, status: int, html: bool) -> str:
        """A requisite that is an in-scope HTML page (2xx) is a page."""
        if kind == REQUISITE and html and 200 <= status < 300 and self.scope.allows(url):
            return PAGE
        return kind

    def directives(self, meta: str, headers: Sequence[str]) -> str:
        return directives(meta, headers, self.agent)

    def nofollow(self, robots: str) -> bool:
        return self.obey and any(d in NOFOLLOW for d in robots.split(","))

    def references(self, refs: PageRefs, discovery: str, *, nofollow: bool) -> Iterator[References]:
        """What of a parsed page may be queued, navigation first. Navigation in scope is
        followed; out of scope it is checked once (external); requisites come from any
        host, at most MAX_REQUISITE_HOPS deep. --exclude applies to every kind, --include
        to pages only (a page's images are part of the page)."""
        scope = self.scope
        allows, excluded, external = scope.allows, scope.excluded, self.external
        if not nofollow:
            if external:  # out of scope is another host: a link --include leaves out is not checked
                on_site = scope.on_site
                yield References("L", True, [u for u in refs.links
                                             if allows(u) or not (on_site(u) or excluded(u))])
            else:
                yield References("L", True, [u for u in refs.links if allows(u)])
            if refs.refresh is not None and (allows(refs.refresh) or (external and not excluded(refs.refresh))):
                yield References("R", True, [refs.refresh])
        if refs.frames:  # part of the page: fetched whatever its nofollow says
            yield References("E", True, [u for u in refs.frames if allows(u)])
            if self.requisites:
                yield References("E", False, [u for u in refs.frames if not allows(u) and not excluded(u)])
        if self.requisites and refs.requisites and requisite_hops(discovery) < MAX_REQUISITE_HOPS:
            by_letter: dict[str, list[str]] = {}
            for url, letter in refs.requisites.items():
                if not excluded(url):
                    by_letter.setdefault(letter, []).append(url)
            for letter, urls in by_letter.items():
                yield References(letter, False, urls)

    def stylesheet(self, urls: list[str], discovery: str) -> Iterator[References]:
        """A stylesheet's own url()s and @imports: requisites of it."""
        if self.requisites and requisite_hops(discovery) < MAX_REQUISITE_HOPS:
            yield References("U", False, [u for u in urls if not self.scope.excluded(u)])

    def redirect_allowed(self, kind: str, target: str) -> bool:
        """Where a redirect may lead: a page's within scope (else, on another host, it is
        checked as an external link), a requisite's or an external link's anywhere."""
        scope = self.scope
        if scope.allows(target):
            return True
        if scope.excluded(target):
            return False
        return kind == REQUISITE or kind == EXTERNAL or (self.external and not scope.on_site(target))


def is_stylesheet(mime: str, discovery: str) -> bool:
    """A CSS answer, or an untyped one to a `<link>` or `@import` (misconfigured servers)."""
    return mime == "text/css" or (mime in ("", "application/octet-stream") and referrer_letter(discovery) == "K")

