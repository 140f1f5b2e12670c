"""One parse of a page: every reference it holds, sorted by kind, and what it says of itself.

A browser loads far more than a page's `<a>` links to show it, and a link checker must see
all of it: images (`src`, `srcset`), stylesheets and what they `url()`, scripts, media,
embeds, frames, the meta refresh. `read_page` walks the tree once, for navigation,
`<base>` and what `Want` asks for besides (ids, requisites), so a crawl that follows links
only pays what it paid before. What is done with each kind is decided in
core/queueing/kinds.py, beside the scope.

Hop letters (core/output/provenance.py `hop`) name the element that referred to a URL, so a
queued URL carries its kind and its referrer's tag in the one interned string it had.
"""
from __future__ import annotations

from collections.abc import Callable
from enum import IntFlag
from urllib.parse import unquote

from selectolax.lexbor import LexborCSSSelector, LexborHTMLParser, LexborNode, SelectolaxError

from .css import css_refs, srcset_urls
from .cuts import CutPage
from .defuse import MAX_TAGS, cap_tags, slim
from .memcap import CEILING
from .urls import _DEFAULT_PORT, _SCHEME, Joiner, _raw_host, href_target, is_route

# Requisite hop letters: what referred to the URL (the report's words: core/queueing/kinds.py).
IMG, SRCSET, LINK, SCRIPT, MEDIA, OBJECT, CSS = "I", "Y", "K", "J", "V", "O", "U"
# <link rel=...> values whose target a page loads to show itself (anything else is metadata).
_LOADED_RELS = frozenset(("stylesheet", "icon", "shortcut", "apple-touch-icon", "apple-touch-icon-precomposed",
                          "manifest", "preload", "modulepreload", "mask-icon", "search"))
_HEAD_TAGS = frozenset(("meta", "link", "title"))
_EMBEDS = ("img, source, link[href], script[src], video, audio, track[src], embed[src], object[data],"
           " input[src], style")


class Want(IntFlag):
    """What to read besides navigation links."""

    LINKS = 0
    REQUISITES = 1
    FRAGMENTS = 2  # fragment links and the page's own ids
    ALL_HOSTS = 4  # links to every host (external checks), not only those the scope allows


REQUISITES, FRAGMENTS, ALL_HOSTS = (int(w) for w in (Want.REQUISITES, Want.FRAGMENTS, Want.ALL_HOSTS))
MAX_FRAGMENTS = 2_000  # fragment links read from one page; a hostile page cannot grow the check past it

# One selector engine for every page: a document's own (tree.css) costs lexbor ~30 µs to
# set up, a fifth of the parse; this one was set up once, and is told which tree to walk.
_SELECT = LexborCSSSelector()
# Navigation and <base>, requisites (embeds and `style` attributes) and ids: one walk, the
# list built from what is wanted. lexbor parses the query on every call and returns a node
# once per selector of the list it matches (an <a id> twice), so the list is plain (a :not()
# to keep each node once cost more than the walk: docs/benchmarks/speed.md, "Where the cycles
# went") and every use of a node is one that a repeat leaves as it was. What a node holds is read in Python.
_NAV = "a, area, iframe, frame, base"
_QUERIES = {0: _NAV, FRAGMENTS: f"{_NAV}, [id]", REQUISITES: f"{_NAV}, {_EMBEDS}, [style]",
            FRAGMENTS | REQUISITES: f"{_NAV}, {_EMBEDS}, [style], [id]"}
_EMBED_NAMES = ("img", "source", "link", "script", "video", "audio", "track", "embed", "object", "input", "style")


def _tag_ids() -> dict[str, int]:
    """lexbor's numbers for the tags the walk tells apart: an int compare, not a new str."""
    names = ("a", "area", "base", "iframe", "frame", *_EMBED_NAMES)
    found: dict[str, int] = {}
    for html in ("".join(f"<{t}></{t}>" for t in names if t != "frame"), "<frameset><frame></frameset>"):
        root = LexborHTMLParser(html).root
        assert root is not None
        found.update({n.tag: n.tag_id for n in _SELECT.find(", ".join(names), root) if n.tag})
    return found


_TAGS = _tag_ids()
_A, _AREA, _BASE, _IFRAME, _FRAME = (_TAGS[t] for t in ("a", "area", "base", "iframe", "frame"))
_EMBED_TAGS = {_TAGS[t]: t for t in _EMBED_NAMES}  # lexbor's number -> the tag's name


class PageRefs:
    """What one page holds (a plain class: one is made per page, on the hot path)."""

    __slots__ = ("links", "frames", "requisites", "refresh", "fragments", "ids", "title", "canonical", "robots",
                 "nofollow_links", "capped")

    def __init__(self) -> None:
        self.links: set[str] = set()  # a, area: canonical, fragment dropped
        self.frames: set[str] = set()  # frame, iframe (hop E)
        self.requisites: dict[str, str] = {}  # url -> the hop letter of its first referrer
        self.refresh: str | None = None  # <meta http-equiv=refresh>'s URL
        self.fragments: list[tuple[str, str]] = []  # (target, fragment) of navigation links
        self.ids: set[str] | None = None  # element ids and <a name>s, when FRAGMENTS was asked for
        self.title: str | None = None
        self.canonical: str | None = None
        self.robots = ""  # <meta name=robots> content, lower-case
        self.nofollow_links = 0  # hrefs of links with rel=nofollow: recorded, still followed (as by Heritrix)
        self.capped = False  # not read whole: MAX_TAGS (core/parsing/defuse.py) or the memory ceiling (memcap.py)


class LinkExtractor(Joiner):
    """Parses a page once: `read` for every reference, `links` for navigation and frames."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: set[str] = set()  # of the last links() call: URLs a frame/iframe embeds

    def read(self, html: str | bytes | CutPage, page_url: str, host_ok: Callable[[str], bool],
             want: Want = Want.LINKS) -> PageRefs:
        return read_page(self, html, page_url, host_ok, want)

    def links(self, html: str | bytes, page_url: str, host_ok: Callable[[str], bool] = lambda h: True) -> set[str]:
        """Distinct canonical navigation links and frames; absolute ones whose host fails
        host_ok are never joined. Frames are also in `self.frames` afterwards (hop `E`)."""
        refs = read_page(self, html, page_url, host_ok)
        self.frames = refs.frames
        return refs.links | refs.frames


def read_page(ex: Joiner, html: str | bytes | CutPage, page_url: str, host_ok: Callable[[str], bool],
              want: Want = Want.LINKS) -> PageRefs:
    """Every reference of one page (see the module docstring); `host_ok` pre-filters absolute
    navigation links by host unless ALL_HOSTS (requisites come from any host).

    The one walk goes through the shared `_SELECT`, never `tree.css`: navigation, `<base>`,
    ids and requisites, in document order. A CutPage's parts (core/parsing/cuts.py) are
    slimmed if it says so and parsed one at a time, each tree gone before the next is built;
    the first part's head is the page's head."""
    refs = PageRefs()
    cut = isinstance(html, CutPage)
    parts, slimming = (iter(html), html.slim) if isinstance(html, CutPage) else (iter((html,)), False)
    text = _slim(next(parts)) if slimming else next(parts)
    # a page under 750 KB is not counted: too few tags to matter
    tree, budget = _tree(text, MAX_TAGS, cut or len(text) >= 3 * MAX_TAGS)
    del text
    root = tree.root if tree is not None else None
    if tree is None or root is None:
        refs.capped = budget == 0
        return refs
    flags = int(want)  # an IntFlag's & is a Python call: test plain ints on the hot path
    keep = None if flags & ALL_HOSTS else host_ok
    frags, req = flags & FRAGMENTS, flags & REQUISITES
    ids: set[str] | None = set() if frags else None
    raw: dict[str, bool] = {}  # href -> written as a frame/iframe src somewhere
    embeds: list[tuple[str, str | None]] = []  # requisites' (href, hop letter), (CSS text, None)
    styled: list[str] = []  # style attributes, read after the embeds (as when they were a walk apart)
    nofollow: set[str] = set()  # hrefs of links with rel=nofollow
    base_href = _walk(root, flags, raw, ids, embeds, styled, nofollow)
    head = tree.head
    canonical, refresh = _head(head, refs) if head is not None else (None, None)
    del root, head, tree  # before the next part's tree is built
    for text in parts:  # one part's tree at a time
        if budget == 0:
            break
        part_tree, budget = _tree(_slim(text) if slimming else text, budget, True)
        if part_tree is None:  # past the memory ceiling: the rest is not read
            break
        part = part_tree.root
        if part is not None:
            more_base = _walk(part, flags, raw, ids, embeds, styled, nofollow)
            base_href = more_base if base_href is None else base_href
        part = part_tree = None
    refs.ids, refs.nofollow_links, refs.capped = ids, len(nofollow), budget == 0
    base = page_url
    if base_href is not None:
        base = ex.join(page_url, base_href.strip() or page_url) or page_url
    if canonical is not None:
        refs.canonical = ex.join(base, canonical)
    if refresh is not None:
        refs.refresh = _refresh_url(ex, base, refresh)
    fragments, join, add_link, add_frame = refs.fragments, ex.join, refs.links.add, refs.frames.add
    for href, framed in raw.items():
        href = href.strip()
        if not href:
            continue
        if href[0] == "#" and not is_route(href[1:]):  # the base itself (canonical already): nothing to join
            if frags and len(fragments) < MAX_FRAGMENTS:
                _fragment(base, href[1:], fragments)
            continue
        # href_target (core/parsing/urls.py), inlined: this loop runs once per link. (A cache
        # of joins on (directory, href) was tried: on a real crawl it missed more than it hit,
        # and cost 20 MB and 5% CPU. BENCHMARKS.md, "Speed on one core".)
        if "#" in href and not is_route(href.partition("#")[2]):  # the fragment never reaches the URL
            head_ = href[: href.index("#")]
            if not head_[-1].isspace():  # "a #b": canonical() would strip that space
                href_ = head_
            else:
                href_ = href
        else:
            href_ = href
        m = _SCHEME.match(href_)
        if m is not None:
            if m.group(1).lower() not in _DEFAULT_PORT:
                continue
            if keep is not None and not keep(_raw_host(href_[m.end():])):
                continue
        elif keep is not None and href_.startswith("//") and not keep(_raw_host(href_)):
            continue
        url = join(base, href_)
        if url is not None:
            (add_frame if framed else add_link)(url)
            if frags and "#" in href and len(fragments) < MAX_FRAGMENTS:
                fragment = href.partition("#")[2]
                if not is_route(fragment):  # a client-side route is a page, no place in one
                    _fragment(url, fragment, fragments)
    if req:
        _requisites(ex, base, refs, embeds, styled)
    return refs


def _tree(text: str | bytes, budget: int, count: bool) -> tuple[LexborHTMLParser | None, int]:
    """One part's tree within the page's budget of `<` (counted if `count`), and the budget
    left: 0 once the page reads no further (core/parsing/defuse.py cap_tags, memcap.py)."""
    if count:
        text, used = cap_tags(text, budget)
        budget = budget - used if used >= 0 else 0
    tree = parse_tree(text)
    return tree, budget if tree is not None else 0


def parse_tree(text: str | bytes) -> LexborHTMLParser | None:
    """The tree of untrusted markup; None when lexbor gave up at the memory ceiling
    (core/parsing/memcap.py), or a str could not be encoded for it under that ceiling."""
    try:
        with CEILING:
            return LexborHTMLParser(text)
    except (SelectolaxError, MemoryError):
        return None


def _slim(part: str | bytes) -> str | bytes:
    """A part slimmed (a CutPage never holds what keeps a body whole, for which slim() gives None)."""
    return (slim(part) or part) if isinstance(part, bytes) else part


def _walk(root: LexborNode, flags: int, raw: dict[str, bool], ids: set[str] | None,
          embeds: list[tuple[str, str | None]], styled: list[str], nofollow: set[str]) -> str | None:
    """One tree's references into raw, ids, embeds, styled and nofollow (the hrefs, trimmed
    and without fragment, of links with rel=nofollow: a misnested `<a>` that the parser
    reopens, clones and all, is one link, whole or in parts); its first <base href>."""
    req = flags & REQUISITES
    base_href: str | None = None  # the first <base href>, wherever it is
    # One walk of the tree, in document order: each walk of a large page misses the CPU's
    # cache on every node, and the misses, more than the instructions, were the cost of
    # reading more of a page (docs/benchmarks/speed.md, "Where the cycles went").
    for node in _SELECT.find(_QUERIES[flags & (FRAGMENTS | REQUISITES)], root):
        tag = node.tag_id
        if tag == _A or tag == _AREA:
            attrs = node.attributes  # a dict in one pass: attrs.get() raises inside for a missing name
            href = attrs.get("href")
            if href is not None:
                raw.setdefault(href, False)
                rel = attrs.get("rel")
                if rel is not None and "nofollow" in rel.lower():
                    nofollow.add(href.strip().partition("#")[0])
            if ids is not None:  # inline: once per link
                value = attrs.get("id")
                if value:
                    ids.add(value)
                if tag == _A:
                    value = attrs.get("name")
                    if value:
                        ids.add(value)
        elif tag == _BASE or tag == _IFRAME or tag == _FRAME:
            attrs = node.attributes
            if tag == _BASE:
                if base_href is None:
                    base_href = attrs.get("href")
            else:
                src = attrs.get("src")
                if src is not None:
                    raw[src] = True
            if ids is not None:
                _id(ids, attrs.get("id"))
        elif req:  # an embed, or an element with a style attribute or an id
            attrs = node.attributes
            name = _EMBED_TAGS.get(tag)
            if name is not None:
                _embed(name, node, attrs, embeds)
            if ids is not None:
                _id(ids, attrs.get("id"))
        elif ids is not None:  # an element with an id (the query has [id] only with FRAGMENTS)
            _id(ids, node.id)
        if req:  # (attrs is set on every branch that runs with requisites)
            style = attrs.get("style")
            if style:
                styled.append(style)
    return base_href


def _id(ids: set[str], value: str | None) -> None:
    if value:
        ids.add(value)


def _fragment(target: str, frag: str, out: list[tuple[str, str]]) -> None:
    """A navigation link's fragment worth checking: not `#`, `#top`, a text fragment
    (`#:~:text=`) or a client-side route (`#/...`, `#!...`)."""
    if not frag or frag == "top" or frag[0] in ":/!":
        return
    out.append((target, unquote(frag) if "%" in frag else frag))


def _head(head: LexborNode, refs: PageRefs) -> tuple[str | None, str | None]:
    """The page's title and meta robots (into refs), and its canonical link and meta refresh
    as written (joined once the base is known): one small walk of the head's children, where
    HTML puts them (a `<meta>` written in the body is not read: a walk of the whole tree on
    every page for what valid pages never do)."""
    canonical = refresh = None
    for node in head.iter():  # its children: no selector to set up, no walk of the body
        tag = node.tag
        if tag not in _HEAD_TAGS:
            continue
        if tag == "title":
            if refs.title is None:
                refs.title = " ".join(node.text().split())[:300]
            continue
        attrs = node.attributes  # a dict in one pass: attrs.get() raises inside for a missing name
        if tag == "link":
            rel = (attrs.get("rel") or "").lower().split()
            if "canonical" in rel and canonical is None:
                canonical = (attrs.get("href") or "").strip() or "#"
        else:
            name = (attrs.get("name") or "").lower()
            if name == "robots":
                content = (attrs.get("content") or "").lower()
                refs.robots = ",".join(filter(None, (refs.robots, *(d.strip() for d in content.split(",")))))
            elif (attrs.get("http-equiv") or "").lower() == "refresh" and refresh is None:
                refresh = attrs.get("content") or ""
    return canonical, refresh


def _refresh_url(ex: Joiner, base: str, content: str) -> str | None:
    """`5; url=/next` -> the joined URL; None for a plain reload (`5`)."""
    _, sep, rest = content.partition(";")
    if not sep:
        _, sep, rest = content.partition(",")
    rest = rest.strip()
    if rest[:4].lower() == "url=":
        rest = rest[4:].strip()
    rest = rest.strip("'\"").strip()
    return ex.join(base, rest) if rest and not rest.startswith("#") else None


def _embed(name: str, node: LexborNode, attrs: dict[str, str | None], out: list[tuple[str, str | None]]) -> None:
    """What an embedding element loads, as (href, hop letter); a <style>'s text as (text, None)."""
    get = attrs.get
    if name == "img":
        out.append((get("src") or "", IMG))
        out.append((get("srcset") or "", SRCSET))
    elif name == "source":
        out.append((get("src") or "", MEDIA))
        out.append((get("srcset") or "", SRCSET))
    elif name == "link":
        if set((get("rel") or "").lower().split()) & _LOADED_RELS:
            out.append((get("href") or "", LINK))
    elif name == "script":
        out.append((get("src") or "", SCRIPT))
    elif name in ("video", "audio"):
        out.append((get("src") or "", MEDIA))
        out.append((get("poster") or "", IMG))
    elif name == "track":  # (a <track> without src, found for its id or style, loads nothing)
        if get("src") is not None:
            out.append((get("src") or "", MEDIA))
            out.append((get("poster") or "", IMG))
    elif name == "embed":
        out.append((get("src") or "", OBJECT))
    elif name == "object":
        out.append((get("data") or "", OBJECT))
    elif name == "input":
        if (get("type") or "").lower() == "image":
            out.append((get("src") or "", IMG))
    else:  # style
        out.append((node.text(), None))


def _requisites(ex: Joiner, base: str, refs: PageRefs, embeds: list[tuple[str, str | None]],
                styled: list[str]) -> None:
    """The walk's requisites joined to the base (known only once the walk is over): embeds in
    document order, then style attributes; a URL keeps the letter of its first referrer."""
    req = refs.requisites

    def add(href: str | None, letter: str) -> None:
        if href:
            href = href.strip()
            if href and href[0] != "#":
                url = href_target(ex, base, href, None)
                if url is not None:
                    req.setdefault(url, letter)

    for value, letter in embeds:
        if letter is None:
            _css(value, add)
        elif letter == SRCSET:
            _srcset(value, add)
        else:
            add(value, letter)
    for style in styled:
        _css(style, add)


def _srcset(value: str | None, add: Callable[[str | None, str], None]) -> None:
    if value:
        for u in srcset_urls(value):
            add(u, SRCSET)


def _css(text: str, add: Callable[[str | None, str], None]) -> None:
    for ref in css_refs(text):
        add(ref, CSS)
