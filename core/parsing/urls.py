"""URL canonicalisation and link extraction: the per-link hot path, kept lean.

On link-heavy pages joining costs more than parsing, so raw hrefs are de-duplicated
per page and each join result is cached: an absolute or root-relative href joins to
the same URL from every page of a site, and that is most of them.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

_DEFAULT_PORT = {"http": 80, "https": 443}
_SAFE = "!#$%&'()*+,/:;=?@[]~-._"  # reserved + unreserved: never re-escaped
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_STRAY_PCT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_NEEDS_WORK = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,/:;=@?]")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_CACHE_MAX = 200_000
_PLAIN_NETLOC = re.compile(r"[a-z0-9\-.]+(:[1-9][0-9]{0,3})?\Z")


def _pct(match: re.Match[str]) -> str:
    ch = chr(int(match.group(1), 16))
    return ch if ch in _UNRESERVED else "%" + match.group(1).upper()


def _normalise(component: str) -> str:
    """Escape what must be escaped, upper-case escapes, decode needless ones."""
    if not _NEEDS_WORK.search(component):
        return component
    s = quote(component, safe=_SAFE)
    s = _STRAY_PCT.sub("%25", s)
    return _PCT.sub(_pct, s)


def _remove_dots(path: str) -> str:
    out: list[str] = []
    for seg in path.split("/"):
        if seg == "..":
            if len(out) > 1:
                out.pop()
        elif seg != ".":
            out.append(seg)
    if path.endswith(("/.", "/..")):
        out.append("")
    return "/".join(out) or "/"


# Client-side routes (`#/path`, `#!path`): in a browser crawl (core/fetching/browser.py) a
# single-page app's hash router makes each a page of its own, so they are kept in the URL;
# any other fragment (`#section`) names a place in one page and is dropped, as always.
# One switch for the process: a --browser crawl runs alone in its process.
_routes = False


def keep_routes(on: bool) -> None:
    """Keep `#/` and `#!` fragments in canonical URLs (a browser crawl), or drop them."""
    global _routes
    _routes = on


def is_route(fragment: str) -> bool:
    """Does this fragment (without its `#`) name a client-side route a browser crawl keeps?"""
    return _routes and fragment.startswith(("/", "!"))


def canonical(url: str) -> str | None:
    """Lower-case scheme and host, drop default port, fragment and credentials (a
    client-side route's fragment is kept in a browser crawl: `keep_routes`).

    Returns None for anything that is not an http(s) URL with a host.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORT or not host:
        return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORT[scheme] else f"{host}:{port}"
    path = parts.path or "/"
    if "/." in path:
        path = _remove_dots(path)
    fragment = _normalise(parts.fragment) if _routes and parts.fragment.startswith(("/", "!")) else ""
    return urlunsplit((scheme, netloc, _normalise(path), _normalise(parts.query), fragment))


def netloc_of(url: str) -> str:
    """The host[:port] of a canonical URL, without parsing it again."""
    return url.split("/", 3)[2]


def host_origin(url: str) -> str:
    """`scheme://host[:port]` of a canonical URL."""
    return url[: url.find("/", url.find("//") + 2)]


def host_of(url: str) -> str:
    netloc = netloc_of(url)
    if netloc.startswith("["):
        return netloc[: netloc.index("]") + 1]
    return netloc.rsplit(":", 1)[0] if ":" in netloc else netloc


class Joiner:
    """Joins hrefs to canonical URLs, with a cache (core/parsing/page.py's LinkExtractor reads pages)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], str | None] = {}

    def join(self, base: str, href: str) -> str | None:
        """urljoin + canonical, cached on the part of the base the result depends on."""
        if not _NEEDS_WORK.search(href):
            fast = _plain_join(base, href)
            if fast is not None:
                return fast
        if href[0] == "#" or href == "?" or (_SCHEME.match(href) and "//" not in href):
            # These depend on the whole base (or are odd): join them, don't cache them.
            try:
                return canonical(urljoin(base, href))
            except ValueError:
                return None
        if _SCHEME.match(href) or href.startswith("//"):
            key = ("", href) if not href.startswith("//") else (base.split(":", 1)[0], href)
        elif href.startswith("/"):
            key = (base[: base.find("/", base.find("//") + 2)], href)
        elif href.startswith("?"):
            key = (base.split("?", 1)[0], href)
        else:
            key = (base[: base.rfind("/") + 1], href)
        try:
            return self._cache[key]
        except KeyError:
            pass
        try:
            url = canonical(urljoin(base, href))
        except ValueError:  # e.g. "http://[::1" : not a URL
            url = None
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[key] = url
        return url


def href_target(ex: Joiner, base: str, href: str, host_ok: Callable[[str], bool] | None) -> str | None:
    """The canonical http(s) URL a stripped, non-empty href points to, fragment dropped;
    None for other schemes, or an absolute href whose host fails `host_ok` (never joined)."""
    if href[0] == "#" and not is_route(href[1:]):
        return None
    if "#" in href and not is_route(href.partition("#")[2]):  # the fragment never reaches the URL
        # join (and cache) without it
        head = href[: href.index("#")]
        if not head[-1].isspace():  # "a #b": canonical() would strip that space
            href = head
    m = _SCHEME.match(href)
    if m is not None:
        if m.group(1).lower() not in _DEFAULT_PORT:
            return None
        if host_ok is not None and not host_ok(_raw_host(href[m.end():])):
            return None
    elif host_ok is not None and href.startswith("//") and not host_ok(_raw_host(href)):
        return None
    return ex.join(base, href)


def _plain_join(base: str, href: str) -> str | None:
    """Join an href made only of plain URL characters without urljoin: the common case.

    Returns None when the href needs the full treatment (schemes other than lower-case
    http(s), network-path references, query-only references, odd hosts).
    """
    if href[-1] == "?":
        return None
    if href.startswith(("http://", "https://")):
        netloc, slash, rest = href.partition("//")[2].partition("/")
        if (slash and _PLAIN_NETLOC.match(netloc) and "//" not in rest and "/." not in "/" + rest
                and not netloc.endswith(":80" if href[4] == ":" else ":443")):
            return href
        return None
    if href[0] == "?" or "//" in href or _SCHEME.match(href):
        return None
    origin_end = base.find("/", base.find("//") + 2)
    if href[0] == "/":
        url = base[:origin_end] + href
    else:
        path = base.split("?", 1)[0]
        end = path.rfind("/") + 1  # the base's directory
        if href.startswith("../"):  # a generated site's links (rustdoc, Sphinx): up, then plain
            up = 3
            while href.startswith("../", up):
                up += 3
            rest = href[up:]
            # (a canonical base may hold `/../` still: canonical() decodes %2E after the dot pass)
            if rest[:1] != "." and "/." not in rest and path.find("/.", origin_end, end) < 0:
                for _ in range(up // 3):
                    if end - 1 <= origin_end:
                        break  # the root: as remove_dot_segments, no higher
                    end = path.rfind("/", origin_end, end - 1) + 1
                return path[:end] + rest
        url = path[:end] + href
    if "/." in url or href[0] == ".":
        url = _dots(url, origin_end)
    return url


def _dots(url: str, path_start: int) -> str:
    """Remove dot segments from the path part of url, which starts at path_start."""
    path, q, query = url[path_start:].partition("?")
    return url[:path_start] + _remove_dots(path) + q + query


def _raw_host(rest: str) -> str:
    """The lower-cased host of '//user@Host:port/path' without a full parse (a pre-filter)."""
    netloc = rest.lstrip("/").split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    host = netloc.rpartition("@")[2].lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.split(":", 1)[0]
