"""Defuse the tags that can't matter for links in tag-heavy HTML, so its parse tree stays small.

A Lexbor tree costs ~360 bytes per tag: a 10 MB syntax-highlighted page (Rust's `avx512f.rs.html`,
265,000 `<span>`s, 4 links) built a 190 MB tree and set crawltop's peak RSS. How, and why the
links can't change: `slim`'s docstring.
"""
from __future__ import annotations

import re
from typing import Any

# More `<` than this and the tree would cost ~10 MB or more: worth a pass to slim it first.
TAG_HEAVY = 30_000

# Tags that are defused: common, lower-case (as almost all HTML is), and none of them in
# KEEP below. A list of what may go rather than of what must stay: an unknown or
# upper-case tag just stays a tag, and this regex costs half of what a parse would.
_INERT = (rb"span|div|p|code|pre|section|article|aside|header|footer|nav|main|details|summary"
          rb"|ul|ol|li|dl|dt|dd|h[1-6]|em|strong|b|i|u|s|small|big|sup|sub|tt|abbr|kbd|var"
          rb"|samp|cite|dfn|q|time|mark|label|img|br|hr|wbr|blockquote|figure|figcaption|font"
          rb"|center|ins|del|bdi|bdo|data|picture|source")
# Never defused, whatever their case (documents why _INERT holds none of them): tags that
# create link elements, change the tokenizer, or decide where and whether links are made.
KEEP = frozenset(
    "a area base frame frameset iframe script style title textarea xmp noembed noframes"
    " noscript plaintext template select option optgroup datalist selectedcontent button"
    " input keygen table caption colgroup col tbody thead tfoot tr td th svg math html"
    " head body applet marquee object image form".split())
# A whole inert tag, read as the HTML tokenizer reads it (quotes only after `=`, and after an
# `=` a value: `title="<a>"` is never an unquoted `"`), holding no `<` up to the `>` that ends
# it: as text it then exposes nothing, whatever its attributes.
_ATTRS = (rb"""(?:[\s/]++|[^\s/><][^\s/>=<]*+(?:\s*+=\s*+(?:"[^"<]*+"|'[^'<]*+'|[^\s><"'][^\s><]*+|(?=>))"""
          rb"""|(?!\s*+=)))*+>""")
# Tags that keep a body whole (see slim() and core/parsing/cuts.py), in any ASCII case.
_WHOLE = re.compile(rb"<(?:frameset|svg|math)", re.I)
_DEFUSE = re.compile(rb"<(?=/?(?:" + _INERT + rb")(?=[\s/>])" + _ATTRS + rb")")


def tag_heavy(body: bytes) -> bool:
    """Worth slimming: longer than 3 * TAG_HEAVY bytes and holding more than TAG_HEAVY `<`.
    A tag takes at least 3 bytes (`<b>`), so a shorter body can't hold that many tags (its
    tree stays under ~10 MB) and is not counted: counting every `<` of every page cost 5%
    of a crawl's instructions (docs/benchmarks/speed.md, "Where the cycles went")."""
    return len(body) > 3 * TAG_HEAVY and body.count(b"<") > TAG_HEAVY


def _defuse(part: memoryview) -> list[bytes]:
    """re.sub builds one object per match and joins them: ~13x the input at its peak. In
    slices the peak stays small; a tag cut by a slice's end just stays a tag."""
    return [_DEFUSE.sub(b"&lt;", part[i:i + _SLICE]) for i in range(0, len(part), _SLICE)]


_SLICE = 1 << 18


def slim(body: bytes) -> bytes | None:
    """body with its inert tags turned into text; None when it must be parsed whole.

    body must be in an ASCII-compatible encoding (UTF-8, Latin-1, Shift_JIS, ...).

    How: in a body with more than TAG_HEAVY `<`, every `<` that opens or closes an inert tag
    (none of KEEP) becomes `&lt;`: `<span class=x>` becomes the text `&lt;span class=x>`, and
    the parser makes one long text node where it made thousands of elements (about 1.5 times
    the cost of the text). Why the links can't change:
    - KEEP holds every tag that creates a link element (a, area, base, frame, iframe), that
      changes the tokenizer (script, style, title, textarea, xmp, noembed, noframes,
      noscript, plaintext), or that changes whether a link element is created at all or where
      it goes (template, select and what ends it, tables, frameset, head, body, html).
    - Only a tag with no `<` before its `>` (read as the tokenizer reads attributes) is
      defused: as text it holds no markup. It ends where it ended, and so does any comment,
      raw text or tag around it: a `<` that started no comment or raw-text end tag became
      `&lt;`, which can start or end nothing.
    - An element turned into text sets frameset-ok as the element may not have: a body with
      `<frameset` is left whole. In svg and math content, whether a tag leaves foreign content
      can't be told without parsing it: a body with `<svg` or `<math` is left whole too.
    - Inside an attribute value or RCDATA (title, textarea) `&lt;` reads as the `<` it
      replaced; in a comment or raw text it is text that no link comes from.
    """
    pieces = slim_pieces(body)
    return None if pieces is None else b"".join(pieces)


def slim_pieces(body: bytes) -> list[bytes] | None:
    """slim(body) before its pieces are joined: a caller that holds the only reference to
    body can drop it before the join, so body, pieces and joined copy are never all in
    memory at once (docs/benchmarks/memory.md, "Peak memory on large pages", faf4580). No
    lower-case copy of body either: a regex finds the tags that keep a body whole."""
    if _WHOLE.search(body) is not None:
        return None
    return _defuse(memoryview(body))


# lexbor is quadratic on some misnested markup: `<table>` then `<a><B></a>` over and over
# parses 300,000 tags in 1.3 s and a 10 MB body's 3 million in minutes, all of it holding
# the event loop. A page's parse is given fewer than MAX_TAGS `<` (in text too), all its
# parts together: 0.9 s of that markup. Real pages hold far fewer once slimmed: the largest
# of Rust's docs, 48,000; an index of 30,000 files in a table, about 180,000.
MAX_TAGS = 250_000


def cap_tags(text: str | bytes, budget: int) -> tuple[str | bytes, int]:
    """(text, the `<` it holds) while they are fewer than budget; else (text cut before its
    budget-th `<`, -1)."""
    n = text.count(b"<") if isinstance(text, bytes) else text.count("<")
    if n < budget:
        return text, n
    return text[:_nth_lt(text, budget) if budget > 0 else 0], -1


def _nth_lt(text: str | bytes, n: int) -> int:
    """Where text's n-th `<` is (it holds that many): one run in C, however many."""
    pattern: Any = f"(?:[^<]*+<){{{n}}}"  # one pattern, str or bytes as the text is
    found = re.match(pattern.encode() if isinstance(text, bytes) else pattern, text)
    assert found is not None
    return found.end() - 1
