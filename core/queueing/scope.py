"""Which URLs a crawl may follow: --scope, --include and --exclude.

Decisions are cached per netloc, so the per-link cost is one dict lookup plus the
regexes the user asked for (RE2, linear time: see core/queueing/patterns.py).
"""
from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import TYPE_CHECKING

from ..config import Scope as ScopeKind
from ..parsing.urls import host_of, netloc_of
from .patterns import PatternSet

if TYPE_CHECKING:
    import tldextract

CACHE_MAX = 100_000


@lru_cache(maxsize=1)
def _extractor() -> tldextract.TLDExtract:
    """Bundled public-suffix snapshot only: never a network fetch, never a cache write.

    Imported here, on the first registered domain asked for: tldextract brings `requests`
    and its kin (7 MB of RSS) for downloads crawltop never makes, and a crawl scoped by
    host, queued by host, never asks."""
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def registered_domain(host: str) -> str:
    """'a.b.example.co.uk' -> 'example.co.uk'; IPs and bare names stay as they are."""
    return _extractor()(host).top_domain_under_public_suffix or host


def _is_literal(host: str) -> bool:
    if host == "localhost" or host.startswith("["):
        return True
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return "." not in host


def _strip_www(host: str) -> str:
    return host[4:] if host.startswith("www.") else host


class Scope:
    def __init__(
        self,
        roots: tuple[str, ...],
        kind: ScopeKind = "host",
        include: tuple[str, ...] = (),
        exclude: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        self._include = PatternSet(include)
        self._exclude = PatternSet(exclude)
        hosts = [host_of(r) for r in roots]
        self._literal = {h for h in hosts if _is_literal(h)}
        self._hosts = {_strip_www(h) for h in hosts if h not in self._literal}
        self._domains = {registered_domain(h) for h in hosts if h not in self._literal and kind == "domain"}
        self._by_netloc: dict[str, bool] = {}
        self._by_host: dict[str, bool] = {}

    def add_root(self, root: str) -> None:
        """A seed added while crawling: its host joins the scope, as the roots' hosts do."""
        host = host_of(root)
        if _is_literal(host):
            self._literal.add(host)
        else:
            self._hosts.add(_strip_www(host))
            if self.kind == "domain":
                self._domains.add(registered_domain(host))
        self._by_netloc.clear()
        self._by_host.clear()

    def _host_ok(self, host: str) -> bool:
        if self.kind == "any" or host in self._literal:
            return True
        if _is_literal(host):
            return False
        if self.kind == "host":
            return _strip_www(host) in self._hosts
        return registered_domain(host) in self._domains

    def host_ok(self, host: str) -> bool:
        """A cheap pre-filter on a raw, lower-cased host: says no only where allows() would."""
        if not host.isascii():
            return True
        ok = self._by_host.get(host)
        if ok is None:
            if len(self._by_host) >= CACHE_MAX:  # hostile pages can name endless hosts
                self._by_host.clear()
            ok = self._by_host[host] = self._host_ok(host)
        return ok

    def excluded(self, url: str) -> bool:
        """--exclude matches: no URL of any kind is fetched (--include and the hosts are the
        scope of pages only: a page's images and its external links are outside it)."""
        return bool(self._exclude) and bool(self._exclude.search(url))

    def on_site(self, url: str) -> bool:
        """Its host is in scope (whatever --include and --exclude say of the URL): a link
        there that the patterns leave out is not an external link."""
        netloc = netloc_of(url)
        ok = self._by_netloc.get(netloc)
        if ok is None:
            if len(self._by_netloc) >= CACHE_MAX:
                self._by_netloc.clear()
            ok = self._by_netloc[netloc] = self._host_ok(host_of(url))
        return ok

    def allows(self, url: str) -> bool:
        if not self.on_site(url):
            return False
        if self._include and not self._include.search(url):
            return False
        return not self._exclude.search(url)
