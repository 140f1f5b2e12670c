"""Defuse the tags that can't matter for links in tag-heavy HTML, so its parse tree stays small.

Why: a Lexbor tree costs about 360 bytes per tag, whatever the tag. A syntax-highlighted
source page of 10 MB (Rust's `avx512f.rs.html`: 265,000 `<span>`s, 4 links) builds a 190
MB tree to yield those 4 links; that one page set crawltop's peak RSS.

How: in a body with more than TAG_HEAVY `<`, every `<` that opens or closes an inert tag
(span, div, li, ...; none of KEEP) gets a space after it: `<span class=x>` becomes the
text `&lt;span class=x>`. The parser then makes one long text node where it made
thousands of elements, at about 1.5 times the cost of the text. Why the links can't
change:
- KEEP holds every tag that creates a link element (a, area, base, frame, iframe), that
  changes the tokenizer (script, style, title, textarea, xmp, noembed, noframes,
  noscript, plaintext), or that changes whether a link element is created at all or where
  it goes (template, select and what ends it, tables, frameset, head, body, html).
- A defused tag ends where it ended (its `>` stays), and so does any comment, raw text or
  tag around it: a `<` that started no comment or raw-text end tag became `&lt;`, which
  can start or end nothing.
- An element turned into text sets frameset-ok as the element may not have: a body with
  `<frameset` is left whole. svg and math content treat some tags as breaking out of
  foreign content: those stretches are copied as they are.
- Inside an attribute value or RCDATA (title, textarea) `&lt;` reads as the `<` it
  replaced; in a comment or raw text it is text that no link comes from.
"""
from __future__ import annotations

import re

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
_DEFUSE = re.compile(rb"<(?=/?(?:" + _INERT + rb")[\s/>])")
_FOREIGN = re.compile(rb"<(/?)(?:svg|math)(?=[\s/>]|\Z)", re.I)


def tag_heavy(body: bytes) -> bool:
    return body.count(b"<") > TAG_HEAVY


def _defuse(part: bytes) -> bytes:
    """re.sub builds one object per match and joins them: ~13x the input at its peak. In
    slices the peak stays small; a tag cut by a slice's end just stays a tag."""
    return b"".join([_DEFUSE.sub(b"&lt;", part[i:i + _SLICE]) for i in range(0, len(part), _SLICE)])


_SLICE = 1 << 18


def slim(body: bytes) -> bytes | None:
    """body with its inert tags turned into text; None when it must be parsed whole.

    body must be in an ASCII-compatible encoding (UTF-8, Latin-1, Shift_JIS, ...)."""
    lower = body.lower()
    if b"<frameset" in lower:
        return None
    foreign = b"<svg" in lower or b"<math" in lower
    del lower
    if not foreign:
        return _defuse(body)
    out: list[bytes] = []
    pos = depth = 0
    start = 0
    for m in _FOREIGN.finditer(body):
        if not m.group(1):
            if depth == 0:
                start = m.start()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:  # back in HTML content: copy the svg/math stretch untouched
                out.append(_defuse(body[pos:start]))
                out.append(body[start:m.end()])
                pos = m.end()
    if depth > 0:  # never closed: foreign to the end
        out.append(_defuse(body[pos:start]))
        out.append(body[start:])
    else:
        out.append(_defuse(body[pos:]))
    return b"".join(out)

