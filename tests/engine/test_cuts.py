"""A slimmed page parsed in parts (core/parsing/cuts.py) must read exactly what its whole
parse reads: every part's fresh parser finds the link elements the whole tree holds there."""
from __future__ import annotations

import random
import tracemalloc

from test_slim import PIECES

from crawltop.core.parsing.cuts import PART, cuts
from crawltop.core.parsing.defuse import slim
from crawltop.core.parsing.page import LinkExtractor, PageRefs, Want, read_page

BASE = "http://h.example/d/page.html"
ALL = Want.REQUISITES | Want.FRAGMENTS | Want.ALL_HOSTS
# Around the hostile pieces: plenty of plain links to cut after, and what a head holds.
LINKS = ['<a href="/l{n}" title="t">l</a>', "<a href=/m{n} rel=nofollow>m</a>", "<a href='#f{n}' id=i{n}>f</a>",
         "<img src=/img{n}.png style='background:url(/bg{n}.png)'>", "</a>", "<p><a href=/p{n}>p</a>"]
HEAD = ['<head><title>T</title><link rel=canonical href=/canon><meta name=robots content="noarchive">',
        "<head><title>x</title></a><meta name=robots content=nofollow><meta http-equiv=refresh content='0; url=/r'>",
        "<head><template><a href=/ht></a></template><meta name=robots content=noindex>", "<head><noscript>",
        "<script><!--<script></script><a href=/esc></a></script>", "<base href=/b/>", ""]


def seen(refs: PageRefs) -> tuple[object, ...]:
    return (refs.links, refs.frames, refs.requisites, refs.refresh, refs.fragments, refs.ids, refs.title,
            refs.canonical, refs.robots, refs.nofollow_links)


def hostile_page(rng: random.Random) -> bytes:
    parts = [rng.choice(HEAD)]
    for i in range(rng.randint(5, 120)):
        piece = rng.choice(PIECES) if rng.random() < 0.3 else rng.choice(LINKS)
        parts.append(piece.replace("{n}", str(i)))
    return "".join(parts).encode()


def test_parts_read_what_the_whole_page_reads() -> None:
    rng = random.Random(29)
    ex = LinkExtractor()
    cut_pages = 0
    for _ in range(3000):
        thin = slim(hostile_page(rng))
        if thin is None:  # frameset, svg, math: never slimmed, never cut
            continue
        bounds = cuts(thin, 64)
        cut_pages += bool(bounds)
        for text in (thin, thin.decode()):
            whole = read_page(ex, text, BASE, lambda h: True, ALL)
            assert seen(read_page(ex, text, BASE, lambda h: True, ALL, split=64)) == seen(whole), thin
            assert seen(read_page(ex, text, BASE, lambda h: h == "h.example", Want.LINKS, split=64)) == seen(
                read_page(ex, text, BASE, lambda h: h == "h.example", Want.LINKS)), thin
    assert cut_pages > 600  # the comparison above was not vacuous


def test_no_cut_inside_what_a_fresh_parser_reads_differently() -> None:
    pad = "".join(f"<a href=/x{i}>x</a>" for i in range(20))
    inside = ["<!-- {pad} -->", "<script>{pad}</script>", "<textarea>{pad}</textarea>", "<title>{pad}</title>",
              "<select>{pad}</select>", "<table>{pad}</table>",
              "<div title='{pad}'>", "<iframe>{pad}</iframe>"]
    for wrap in inside:
        before, _, after = wrap.partition("{pad}")
        text = f"<a href=/first>f</a>{before}{pad}{after}"
        got = cuts(text, 8)
        start, end = text.index(pad), text.index(pad) + len(pad)
        assert got and all(not start <= c < end for c in got), wrap  # cuts only after the first link
    assert cuts(f"<title>t</title></a>{pad}", 8)[0] > len("<title>t</title></a>")  # a stray </a> is in the head
    for stop in ("<plaintext>", "<script><!--<script></script>", "<template>"):  # nothing after it is known
        text = f"<a href=/a>a</a><a href=/b>b</a>{stop}{pad}"
        got = cuts(text, 8)
        assert got and max(got) <= text.index(stop), stop


def test_a_page_of_many_links_is_parsed_a_part_at_a_time() -> None:
    page = "<html><head><title>Wrapping</title></head><body>" + "".join(
        f'<a class="fn" href="struct.W{i}.html#m{i}" title="method m{i}">m{i}</a> text {i} ' for i in range(24000))
    assert len(cuts(page)) >= 6
    ex = LinkExtractor()
    peaks = []
    for split in (0, PART):
        tracemalloc.start()
        refs = read_page(ex, page, BASE, lambda h: True, Want.LINKS, split)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert len(refs.links) == 24000 and refs.title == "Wrapping"
    assert peaks[1] < peaks[0] / 2, peaks
