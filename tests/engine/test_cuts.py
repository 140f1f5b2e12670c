"""A page parsed in parts (core/parsing/cuts.py) must read exactly what its whole parse
reads: every part's fresh parser finds the link elements the whole tree holds there, and a
tag-heavy page slimmed a part at a time reads what its whole slim copy reads."""
from __future__ import annotations

import random
import tracemalloc

from test_slim import PIECES, response, tag_heavy_page

from crawltop.core.fetching.fetch import decode
from crawltop.core.parsing.cuts import PART, CutPage, cuts, worth_cutting
from crawltop.core.parsing.defuse import MAX_TAGS, cap_tags, slim
from crawltop.core.parsing.page import LinkExtractor, PageRefs, Want, read_page

BASE = "http://h.example/d/page.html"
ALL = Want.REQUISITES | Want.FRAGMENTS | Want.ALL_HOSTS
# Around the hostile pieces: plenty of plain links and text to cut in, and what a head holds.
LINKS = ['<a href="/l{n}" title="t">l</a>', "<a href=/m{n} rel=nofollow>m</a>", "<a href='#f{n}' id=i{n}>f</a>",
         "<img src=/img{n}.png style='background:url(/bg{n}.png)'>", "</a>", "<p><a href=/p{n}>p</a>",
         "some text &amp; more text &#x3C; ", "<span class=k>fn</span> <span>x{n}</span>\n", "<a href=/open{n}>",
         "<div><a rel=nofollow href=/nd{n}><p>in</div> after", "<table>", "</table>", "<object>", "</object>",
         "<form id=f{n} style='background:url(/fb{n}.png)'>", "</form>", "<a href=/x{n}>\udc80</a>",
         "</a></table></object>"]
RARE = ["<body id=b{n} style='background:url(/bb{n}.png)'>", "<html id=h{n}>", "<head id=hd{n}>"]
HEAD = ['<head><title>T</title><link rel=canonical href=/canon><meta name=robots content="noarchive">',
        "<head><title>x</title></a><meta name=robots content=nofollow><meta http-equiv=refresh content='0; url=/r'>",
        "<head><template><a href=/ht></a></template><meta name=robots content=noindex>", "<head><noscript>",
        "<script><!--<script></script><a href=/esc></a></script>", "<base href=/b/>", ""]


def seen(refs: PageRefs) -> tuple[object, ...]:
    return (refs.links, refs.frames, refs.requisites, refs.refresh, refs.fragments, refs.ids, refs.title,
            refs.canonical, refs.robots, refs.nofollow_links)


def hostile_page(rng: random.Random) -> bytes:
    """(`\\udc80` is a stray UTF-8 continuation byte, 0x80, once encoded)"""
    parts = [rng.choice(HEAD)]
    for i in range(rng.randint(5, 120)):
        r = rng.random()
        piece = rng.choice(PIECES) if r < 0.3 else rng.choice(RARE) if r < 0.305 else rng.choice(LINKS)
        parts.append(piece.replace("{n}", str(i)))
    return "".join(parts).encode("utf-8", "surrogateescape")


def test_parts_read_what_the_whole_page_reads() -> None:
    rng = random.Random(29)
    ex = LinkExtractor()
    cut_pages = 0
    for _ in range(2500):
        body = hostile_page(rng)
        thin = slim(body)  # None with frameset, svg or math: then the body is never cut
        texts = (body, *((thin,) if thin is not None else ()))
        for text in (*texts, *(t.decode("utf-8", "replace") for t in texts)):
            bounds = cuts(text, 48)
            cut_pages += bool(bounds)
            page = CutPage(text, bounds, False)
            assert seen(read_page(ex, page, BASE, lambda h: True, ALL)) == seen(
                read_page(ex, text, BASE, lambda h: True, ALL)), text
            assert seen(read_page(ex, page, BASE, lambda h: h == "h.example")) == seen(
                read_page(ex, text, BASE, lambda h: h == "h.example")), text
        if thin is not None:  # slimmed a part at a time, as decode() hands a tag-heavy body over
            page = CutPage(body, cuts(body, 48), True)
            assert seen(read_page(ex, page, BASE, lambda h: True, ALL)) == seen(
                read_page(ex, thin, BASE, lambda h: True, ALL)), body
    assert cut_pages > 1500  # the comparisons above were not vacuous


def test_no_cut_inside_what_a_fresh_parser_reads_differently() -> None:
    pad = "".join(f"<a href=/x{i}>x</a> text &amp; text " for i in range(20))
    inside = ["<!-- {pad} -->", "<script>{pad}</script>", "<textarea>{pad}</textarea>", "<title>{pad}</title>",
              "<select>{pad}</select>", "<table>{pad}</table>", "<object>{pad}</object>", "<div title='{pad}'>",
              "<iframe>{pad}</iframe>"]
    for wrap in inside:
        before, _, after = wrap.partition("{pad}")
        text = f"<a href=/first>f</a>{before}{pad}{after}{pad}"
        got = cuts(text, 8)
        start, end = text.index(pad), text.index(pad) + len(pad)
        assert got and all(not start <= c < end for c in got), wrap  # cuts only after the first link
    head = "<title>t</title></a>" + "x" * 40 + "<meta name=robots content=noindex>" + "y" * 40
    assert cuts(f"{head}{pad}", 8)[0] > len(head)  # a stray </a> in the head: still in the head
    for stop in ("<plaintext>", "<script><!--<script></script>", "<template>"):  # nothing after it is known
        text = f"<a href=/a>a</a> some text here {stop}{pad}"
        got = cuts(text, 8)
        assert got and max(got) <= text.index(stop), stop
    text = "<a href=/a>a</a>" + "t" * 40 + "<a href=/open>" + "o" * 100 + "</a>" + "u" * 40
    assert all(not text.index("/open") < c < text.index("</a>u") for c in cuts(text, 8))  # not in an open <a>
    text = "<a href=/a>a</a>" + "x" * 14 + "&amp;" + "y" * 30
    assert cuts(text, 32) == [text.index("&")]  # a reference is not cut
    wide = ("<a href=/a>a</a>" + "é" * 40).encode()
    assert all(wide[c] < 0x80 or wide[c] >= 0xC0 for c in cuts(wide, 23) + cuts(wide, 24))  # nor a character
    assert cuts("<svg></svg><a href=/a>a</a>" + "x" * 100, 8) == []  # foreign content: never cut
    for stop in ("<body id=b2>", "<html lang=x>", "<head id=h2>"):  # in body: what merges or is ignored
        assert cuts(f"<body id=b><a href=/a>a</a> some text here {pad}{stop}", 8) == [], stop
    text = "<a href=/a>a</a>" + "x" * 20 + "<form id=f1>" + pad + "</form>" + "y" * 40
    assert all(not text.index("<form") < c < text.index("</form>") for c in cuts(text, 8))  # a form is open
    text = "<a href=/a>a</a>" + "x" * 20 + "<area href=/s>\u0080" + "y" * 40  # a stray byte after a tag
    raw = text.encode().replace("\u0080".encode(), b"\x80")
    assert all(raw[c - 1:c] != b">" or raw[c] != 0x80 or c == raw.index(b"\x80") for c in cuts(raw, 30))
    assert all(raw[:c].count(b"<") == raw[:c].count(b">") for c in cuts(raw, 30))  # never inside a tag
    assert cuts("<a href=/a>a</a>" + "x" * 20 + "<ſcript><template>" + pad, 8)  # only ASCII case folds


def test_decode_hands_a_large_page_over_in_parts() -> None:
    heavy = tag_heavy_page(links=5000)
    text, enc, slimmed = decode(response(heavy, "utf-8"))
    assert isinstance(text, CutPage) and text.slim and slimmed and enc == "utf-8" and len(text.bounds) >= 4
    assert b"".join(text) == heavy  # the parts are the body, unslimmed: each is slimmed before its parse
    ex = LinkExtractor()
    assert seen(read_page(ex, text, BASE, lambda h: True, ALL)) == seen(read_page(ex, slim(heavy), BASE,
                                                                                  lambda h: True, ALL))
    links = ("<html><head><title>Shl</title></head><body>" + "".join(
        f'<a class="fn" href="struct.W{i}.html#m{i}" title="m{i}">m{i}</a> text {i} ' for i in range(12000))).encode()
    assert worth_cutting(links)
    page, _, slimmed = decode(response(links, None))
    assert isinstance(page, CutPage) and not page.slim and not slimmed and len(page.bounds) >= 5
    assert not isinstance(decode(response(links, None), parts=False)[0], CutPage)  # a stylesheet is never cut
    latin = links.replace(b"<body>", b"<body>\xe9")  # only what Lexbor reads as it is (bytes, UTF-8) is cut
    assert not isinstance(decode(response(latin, "windows-1252"))[0], CutPage)
    boxed = b"<table><tr><td>" + heavy  # no safe place: slimmed whole, as before
    whole, _, slimmed = decode(response(boxed, "utf-8"))
    assert isinstance(whole, bytes) and slimmed and whole == slim(boxed)
    peaks = []
    for html in (links, page):
        tracemalloc.start()
        refs = read_page(ex, html, BASE, lambda h: True)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert len(refs.links) == 12000 and refs.title == "Shl"
    assert peaks[1] < peaks[0] / 3, peaks
    assert PART * 2 <= len(links)


def test_a_page_is_parsed_up_to_its_tag_cap_whole_or_in_parts() -> None:
    """lexbor is quadratic on some misnested markup, so a page's parse is given its first
    MAX_TAGS `<` and no more, all its parts together: the same links either way."""
    assert cap_tags(b"<a><b>", 3) == (b"<a><b>", 2) and cap_tags("<a><b>", 2) == ("<a>", -1)
    assert cap_tags(b"x<a>y<b>z<c>", 2) == (b"x<a>y", -1) and cap_tags(b"<a>", 0) == (b"", -1)
    n = MAX_TAGS // 2 + 500  # links: two tags each
    body = "".join(f'<a href="/l{i}">{i}</a> ' for i in range(n)).encode()
    ex = LinkExtractor()
    page, _, _ = decode(response(body, "utf-8"))
    assert isinstance(page, CutPage) and len(page.bounds) > 10
    whole = read_page(ex, body, BASE, lambda h: True)
    parts = read_page(ex, page, BASE, lambda h: True)
    assert whole.capped and parts.capped
    assert whole.links == parts.links == {f"http://h.example/l{i}" for i in range(MAX_TAGS // 2)}
    assert not read_page(ex, body[: body.index(b'<a href="/l%d"' % (MAX_TAGS // 2 - 1))], BASE, lambda h: True).capped
