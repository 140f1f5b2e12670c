"""Tag-heavy pages are slimmed before parsing: the links must be exactly those of the whole
page (checked against a parse of the untouched body), and the tree must be much smaller."""
from __future__ import annotations

import random
import re
import tracemalloc

from aiohttp import web
from selectolax.lexbor import LexborHTMLParser
from support.crawl import crawl

from crawltop.core.fetching.fetch import Response, decode
from crawltop.core.parsing import defuse as slim_mod
from crawltop.core.parsing.defuse import KEEP, TAG_HEAVY, slim, tag_heavy
from crawltop.core.parsing.page import LinkExtractor

BASE = "http://h.example/d/page.html"

# Pieces that a hostile or sloppy page may hold, around and inside the tags slim() defuses.
PIECES = [
    "<span>", "</span>", "<span class=\"kw\">", "<SPAN>", "<div>", "</div>", "<p>", "<li>", "<code>",
    "<b>", "</b>", "<i>", "<br>", "</br>", "<img src=x.png>", "<pre>\n", "<h2 id=h>", "text ", "x < y ",
    "<a href=\"/a{n}\">", "</a>", "<a href='rel{n}.html#f'>", "<A HREF=/up{n}>", "<area href=/ar{n}>",
    "<iframe src=/if{n}></iframe>", "<frame src=/fr{n}>", "<base href=\"/based/\">",
    "<!-- <a href=/c{n}> <span> -->", "<!-->", "<!--", "-->", "<!<span>", "</<span>", "<<span>",
    "<script>var s = '<span><a href=/s{n}>';</script>", "<script>", "</script>", "<style><span></style>",
    "<title><span><a href=/t{n}></title>", "<textarea><a href=/ta{n}></textarea>", "<xmp><a href=/x{n}></xmp>",
    "<noscript><a href=/ns{n}></noscript>", "<template><a href=/tp{n}></template>",
    "<select><span><a href=/sel{n}></select>", "<table><span><a href=/tb{n}></table>", "<td><a href=/td{n}>",
    "<svg><span></span><style><a href=/sv{n}></style></svg>", "<svg>", "</svg>", "<math><mi><span>",
    "<a title=\"<span>\" href=/q{n}>", "<a href=\"/v{n}<span>x\">", "<a href=/u{n}<span>>", "<a <span> href=/w{n}>",
    "<a title='x>y<span>' href=/z{n}>", "<span title=\"<a href=/in{n}>\">", "<div data-x='<a href=/dx{n}>'>",
    "<p", "<span", "<a href=\"/open{n}", "\"", "'", ">", "<frameset><frame src=/fs{n}></frameset>",
    "<script>document.write('</scr' + 'ipt><span><a href=/sw{n}>')</script>", "<script><!--<script>",
    "</script -->", "<TEXTAREA><span><a href=/TA{n}>", "</TEXTAREA>", "<Template><span><a href=/Tp{n}>",
    "<noembed><span><a href=/ne{n}></noembed>", "<span/>", "<br/>", "<div title=\"a>b\" data-a='>'>",
    "<plaintext><a href=/pt{n}>", "<div title=\"><a href=/dq{n}>in</a>\">", "<p class='<a href=/sq{n}>'>",
    "<span title=\"x\"y>", "<b =\"><a href=/eq{n}>\">",
    "&lt;span&gt;", "<![CDATA[<span><a href=/cd{n}>]]>", "\x00", "<span\x00>",
]


def raw_links(text: str | bytes) -> tuple[str | None, set[str], set[str]]:
    """What links() reads from a tree: the first base href, link hrefs, frame srcs."""
    tree = LexborHTMLParser(text)
    base = tree.css_first("base[href]")
    hrefs, srcs = set(), set()
    for node in tree.css("a[href], area[href], frame[src], iframe[src]"):
        if node.tag in ("iframe", "frame"):
            srcs.add(node.attrs.get("src"))
        else:
            hrefs.add(node.attrs.get("href"))
    return (base.attrs.get("href") if base is not None else None), hrefs, srcs


def random_page(rng: random.Random) -> bytes:
    parts = [rng.choice(PIECES).replace("{n}", str(i)) for i in range(rng.randint(1, 40))]
    return "".join(parts).encode()


def test_slim_keeps_every_link_of_hostile_pages() -> None:
    rng = random.Random(8)
    slimmed = 0
    for _ in range(4000):
        body = random_page(rng)
        thin = slim(body)
        if thin is None:
            assert b"<frameset" in body.lower() or b"<svg" in body or b"<math" in body
            continue
        slimmed += thin != body
        assert raw_links(thin) == raw_links(body), body
    assert slimmed > 1000  # the check above was not vacuous


def test_slim_turns_inert_tags_into_text_and_leaves_the_rest() -> None:
    body = b'<html><body><div class="x"><span>a</span><A HREF="/k">k</A><SPAN>s</SPAN><a href=/b>b</a></div>'
    assert slim(body) == (b'<html><body>&lt;div class="x">&lt;span>a&lt;/span><A HREF="/k">k</A>'
                          b'<SPAN>s</SPAN><a href=/b>b</a>&lt;/div>')
    # foreign content, and frameset-ok: left whole
    assert slim(b"<span><svg><span></span></svg><span>") is None
    assert slim(b"<span><MATH></math>") is None
    assert slim(b"<p><frameset>") is None


def test_no_inert_tag_is_one_that_links_or_parsing_depend_on() -> None:
    inert = set(slim_mod._INERT.decode().replace("h[1-6]", "h1|h2|h3|h4|h5|h6").split("|"))
    assert inert and not inert & KEEP
    assert all(re.fullmatch(r"[a-z0-9]+", name) for name in inert)


def test_a_slice_boundary_inside_a_tag_leaves_that_tag_alone() -> None:
    body = b"x" * (slim_mod._SLICE - 3) + b"<span>" + b"<span>" * 3
    thin = slim(body)
    assert thin.count(b"<span>") == 1 and thin.count(b"&lt;span>") == 3


def tag_heavy_page(links: int = 50) -> bytes:
    code = "".join(f'<span class="kw">fn</span> <span class="ident">f{i}</span>()\n' for i in range(TAG_HEAVY))
    anchors = "".join(f'<a href="p{i}.html#sec">p{i}</a>\n' for i in range(links))
    return (f"<!DOCTYPE html><html><head><title>src</title><base href=\"/src/\"></head><body>"
            f"<nav>{anchors}</nav><pre class=\"rust\"><code>{code}</code></pre>"
            f"<script>if (a<b) {{ x = '<a href=/fake>'; }}</script></body></html>").encode()


def test_a_tag_heavy_page_costs_a_fraction_of_its_tree() -> None:
    body = tag_heavy_page()
    assert tag_heavy(body)
    thin = slim(body)
    assert raw_links(thin) == raw_links(body)
    sizes = []
    for text in (body, thin):
        tracemalloc.start()
        tree = LexborHTMLParser(text)
        sizes.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        del tree
    assert sizes[1] < sizes[0] / 4, sizes


def response(body: bytes, charset: str | None) -> Response:
    return Response(status=200, reason="OK", headers={}, body=body, truncated=False, content_type="text/html",
                    mime="text/html", charset=charset, request_headers={})


def test_decode_hands_lexbor_bytes_only_when_they_read_the_same() -> None:
    ascii_page = b"<a href=/x>x</a>"
    assert decode(response(ascii_page, None)) == (ascii_page, "utf-8", False)
    assert decode(response("<a href=/é>".encode(), "UTF-8")) == ("<a href=/é>".encode(), "utf-8", False)
    assert decode(response("<a href=/é>".encode("latin-1"), "ISO-8859-1")) == ("<a href=/é>", "iso-8859-1", False)
    # ASCII bytes that mean something else in the declared encoding are decoded, as before
    text, enc, _ = decode(response(ascii_page, "utf-16"))
    assert enc == "utf-16" and isinstance(text, str) and "<a" not in text
    text, enc, _ = decode(response(b"\x1b$B<a\x1b(B", "iso-2022-jp"))
    assert enc == "iso-2022-jp" and text == b"\x1b$B<a\x1b(B".decode("iso-2022-jp")
    assert decode(response(ascii_page, "rot13")) == (ascii_page, "utf-8", False)  # not a text encoding


def test_decode_slims_tag_heavy_bodies_in_ascii_compatible_encodings_only() -> None:
    """Whole, as a page that can't be cut is (one that can is slimmed a part at a time:
    test_cuts.py)."""
    body = tag_heavy_page()
    text, _, slimmed = decode(response(body, "utf-8"), parts=False)
    assert isinstance(text, bytes)
    assert len(text) > len(body) and b"&lt;span" in text and slimmed  # its ids are then not all known
    latin, enc, _ = decode(response(body.replace(b"<body>", b"<body>\xe9"), "windows-1252"))
    assert enc == "windows-1252" and "&lt;span" in latin and "é" in latin
    wide = body.decode().encode("utf-16")
    text, enc, slimmed = decode(response(wide, "utf-16"))
    assert isinstance(text, str)
    assert enc == "utf-16" and "<span" in text and "&lt;span" not in text and not slimmed


def test_decode_frees_a_slimmed_body_before_joining_its_slim_copy() -> None:
    """Body, defused pieces and joined copy were all held at once: body + 2x its slim copy
    (the peak memory of large pages). Now the body goes first; a slice's re.sub (a few MB) stays on top of it."""
    size = 4 * len(tag_heavy_page(links=10))
    expect = slim(tag_heavy_page(links=10) * 4)
    tracemalloc.start()  # the body is traced too: it is part of the peak while it lives
    resp = response(tag_heavy_page(links=10) * 4, "utf-8")  # the Response holds the only reference
    text, _, slimmed = decode(resp, parts=False)  # (a page that can't be cut)
    peak = tracemalloc.get_traced_memory()[1]
    assert isinstance(text, bytes)
    tracemalloc.stop()
    assert slimmed and text == expect and resp.body == b""
    assert peak < size + 1.75 * len(text), (peak, size, len(text))  # before: size + 2 * len(text)


def test_whole_bodies_are_found_in_any_case_without_a_lower_case_copy() -> None:
    heavy = b"<span>x</span>" * (TAG_HEAVY + 1)
    for tag in (b"<FrameSet>", b"<SVG>", b"<mAtH>", b"<frameset", b"<svg", b"<math"):
        assert slim(heavy + tag) is None, tag
    for near in (b"<frame>", b"<sv g>", b"< svg>", b"<ma th>", b"&lt;svg>"):
        assert slim(heavy + near) is not None, near


def test_fragments_are_dropped_before_joining_without_changing_a_link() -> None:
    ex = LinkExtractor()
    page = ('<a href="a.html#x">1</a><a href="a.html#y">2</a><a href="b.html #z">3</a>'
            '<a href="?q=1#f">4</a><a href="#top">5</a><a href="/c#">6</a><a href="http://h.example#h">7</a>')
    assert ex.links(page, BASE) == {"http://h.example/d/a.html", "http://h.example/d/b.html%20",
                                    "http://h.example/d/page.html?q=1", "http://h.example/c", "http://h.example/"}


async def test_crawl_of_a_tag_heavy_page_follows_all_its_links(serve) -> None:
    body = tag_heavy_page(links=30)
    huge = body.replace(b"<body>", b"<body>" + "é".encode() * 1000)

    async def src(request: web.Request) -> web.Response:
        return web.Response(body=huge, content_type="text/html", charset="utf-8")

    async def leaf(request: web.Request) -> web.Response:
        return web.Response(text="<p>leaf", content_type="text/html")

    routes = {"/src/": src, **{f"/src/p{i}.html": leaf for i in range(30)}}
    site = await serve(routes)
    _, sink = await crawl(site.url + "/src/", robots=False)
    recs = sink.by_url()
    root = recs[site.url + "/src/"]
    assert root.size == len(huge) and root.encoding == "utf-8" and root.num_urls == 30
    assert {u for u in recs if u != site.url + "/src/"} == {f"{site.url}/src/p{i}.html" for i in range(30)}
    assert all(r.status == 200 for r in recs.values())
    assert "/fake" not in site.hits


def test_only_a_body_long_enough_to_hold_that_many_tags_is_counted() -> None:
    """A tag takes 3 bytes at least, so a body of 3 * TAG_HEAVY bytes or less is never heavy
    (and is not counted: the count cost 5% of a crawl); one byte more can be."""
    assert not tag_heavy(b"<" * (3 * TAG_HEAVY))  # every byte a "<", still not worth a pass
    assert tag_heavy(b"<b>" * TAG_HEAVY + b"<")
    assert not tag_heavy(b"x" * (3 * TAG_HEAVY + 1))
