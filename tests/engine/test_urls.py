"""Canonical URLs and link extraction: the per-link hot path."""
from __future__ import annotations

import pytest

from crawltop.core.parsing.page import LinkExtractor
from crawltop.core.parsing.urls import canonical
from crawltop.core.queueing.scope import Scope


@pytest.mark.parametrize("raw, want", [
    ("HTTP://Example.COM:80/a/./b/../c?x=1&y=%7e#frag", "http://example.com/a/c?x=1&y=~"),
    ("https://x.com:443", "https://x.com/"),
    ("http://x.com:8080/p?b=2&a=1", "http://x.com:8080/p?b=2&a=1"),
    ("http://x.com/a b/%zz", "http://x.com/a%20b/%25zz"),
    ("http://x/%2fa%41", "http://x/%2FaA"),
    ("http://bücher.de/ü", "http://xn--bcher-kva.de/%C3%BC"),
    ("  http://user:pw@x.com/  ", "http://x.com/"),
    ("http://x.com:99999/", None),
    ("mailto:a@b", None),
    ("http:///nohost", None),
])
def test_canonical(raw: str, want: str | None) -> None:
    assert canonical(raw) == want


def test_links_honour_base_entities_frames_and_skip_junk() -> None:
    html = """<base href='/dir/'><a href=' rel?q=1&amp;b=2#x '>x</a><a href='#top'></a>
    <a href='javascript:void(0)'></a><a href='//other.com/p'></a><a href='MAILTO:x'></a>
    <area href='/map'><iframe src='/frame'></iframe><a href='http://[::1'></a>"""
    assert LinkExtractor().links(html, "http://h.com/a/b") == {
        "http://h.com/dir/rel?q=1&b=2", "http://other.com/p", "http://h.com/map",
        "http://h.com/frame"}


def test_frameset_frames() -> None:
    html = "<html><frameset><frame src='left.html'><frame src='/right'></frameset></html>"
    assert LinkExtractor().links(html, "http://h.com/d/") == {"http://h.com/d/left.html", "http://h.com/right"}


@pytest.mark.parametrize("html", [
    "<html><head><title>t</title></head><body><base href='/sub/'><a href='p'>x</a></body></html>",
    "Notice: undefined index\n<!doctype html><html><head><base href='/sub/'></head><a href='p'>x</a>",
    "<div>x</div><html><head><base href=/sub/></head><a href=p>x</a>",
    "<head><span></span><base href='/sub/'></head><a href='p'>x</a>",
    "<html><head><base target=_blank><base href='/sub/'><base href='/other/'></head><a href='p'>x</a>",
])
def test_the_first_base_with_an_href_counts_wherever_it_is(html: str) -> None:
    """Browsers take the document's first <base href>, in the head or not (a stray notice
    before the doctype puts it in the body)."""
    assert LinkExtractor().links(html, "http://h.com/d/page.html") == {"http://h.com/sub/p"}


def test_join_cache_depends_on_the_right_part_of_the_base() -> None:
    le = LinkExtractor()
    assert le.join("http://h.com/a/b", "c") == "http://h.com/a/c"
    assert le.join("http://h.com/x/y", "c") == "http://h.com/x/c"
    assert le.join("http://h.com/a/b?q=1", "?z") == "http://h.com/a/b?z"
    assert le.join("http://h.com/a/c?q=1", "?z") == "http://h.com/a/c?z"
    assert le.join("https://h.com/a", "//o.com/") == "https://o.com/"
    assert le.join("http://h.com/a", "//o.com/") == "http://o.com/"
    assert le.join("http://h.com/a", "/r") == "http://h.com/r"
    assert le.join("http://g.com/a", "/r") == "http://g.com/r"


def test_scopes() -> None:
    dom = Scope(("http://www.example.co.uk/",), "domain")
    assert dom.allows("http://shop.example.co.uk/x") and not dom.allows("http://other.co.uk/")
    host = Scope(("http://example.com/",), "host", exclude=("/private",))
    assert host.allows("https://www.example.com/a") and not host.allows("http://sub.example.com/")
    assert not host.allows("http://example.com/private/x")
    ip = Scope(("http://127.0.0.1:8080/",))
    assert ip.allows("http://127.0.0.1:9/a") and not ip.allows("http://127.0.0.2/")
    assert Scope(("http://a.com/",), "any").allows("http://b.org/")
    inc = Scope(("http://a.com/",), include=("/docs/",))
    assert inc.allows("http://a.com/docs/x") and not inc.allows("http://a.com/blog/")


def test_fast_paths_agree_with_the_slow_path() -> None:
    """The origin-glue fast path and the host pre-filter must not change any result."""
    from urllib.parse import urljoin

    hrefs = ["/a/b?x=1&y=2", "/a/./b", "/a/../b", "/%7Euser", "/a b", "/a#f", "/é", "//h.com/x",
             "HTTP://H.COM:80/Y", "http://user@h.com/z", "http://other.org/", "rel/x", "rel/./y", "./z", "../up", "x:y",
             "?q", "/"]
    le = LinkExtractor()
    scope = Scope(("http://h.com/",))
    html = "".join(f'<a href="{h}">x</a>' for h in hrefs)
    got = le.links(html, "http://h.com/d/p", scope.host_ok)
    joined = {canonical(urljoin("http://h.com/d/p", h)) for h in hrefs}
    assert got == {u for u in joined if u is not None and "other.org" not in u}
    assert "http://other.org/" in joined and "http://other.org/" not in got
    assert "http://h.com/Y" in got and "http://h.com/~user" in got


def test_plain_join_fast_path_matches_urljoin_on_random_hrefs() -> None:
    import random
    from urllib.parse import urljoin

    from crawltop.core.parsing.urls import _NEEDS_WORK, _plain_join

    rng = random.Random(1)
    parts = ["a", "b", ".", "..", "", "x.html", "p?q=1", "?", "q=/./", "A", "~u", "c:d"]
    bases = ["http://h.com/", "http://h.com/d/e/f.html", "http://h.com/d/?x=/y/z", "https://h.com:8443/a/b/",
             "http://h.com/a/b/c/d/e/", "http://h.com/x?q=../..",
             canonical("http://h.com/a/%2E%2E/b/c.html"), canonical("http://h.com/a/%2e/b/")]
    prefixes = ["", "/", "./", "../", "../../", "../../../", "../../../../../", ".././",
                "http://h.com/", "https://H.com/", "http://h.com:80/",
                "http://h.com:81/", "https://h.com:443/", "http://h.com", "http://u@h.com/", "http://h.com:99999/"]
    checked = 0
    for _ in range(60_000):
        href = rng.choice(prefixes) + "/".join(rng.choice(parts) for _ in range(rng.randint(0, 4)))
        if not href or _NEEDS_WORK.search(href):
            continue
        base = rng.choice(bases)
        fast = _plain_join(base, href)
        if fast is not None:
            checked += 1
            assert fast == canonical(urljoin(base, href)), (base, href)
    assert checked > 10_000
    # An empty segment in the base counts as one, as remove_dot_segments (RFC 3986) and
    # browsers read it; urljoin drops it first, so it is no oracle for such a base.
    assert _plain_join("http://h.com/a//b/c/d.html", "../../../x") == "http://h.com/a/x"
    assert _plain_join("http://h.com/a//b/c/d.html", "../../x") == "http://h.com/a//x"


def test_fragment_and_query_only_hrefs_depend_on_the_whole_base() -> None:
    le = LinkExtractor()
    assert le.join("http://h/d/a", "#x") == "http://h/d/a"
    assert le.join("http://h/d/b", "#x") == "http://h/d/b"
    assert le.join("http://h/a?q=1", "?") == "http://h/a?q=1"  # urljoin's reading of a bare "?"
    assert le.join("http://h/a?q=2", "?") == "http://h/a?q=2"
