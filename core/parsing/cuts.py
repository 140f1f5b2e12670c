"""Where a large page may be cut, so that it is slimmed and parsed one part at a time.

Parsed whole, a large page cost the crawl its peaks of RSS (docs/benchmarks/memory.md, "Peak
memory on large pages", faf4580):
- links cost Lexbor about 1.2 KB each: rustdoc's `struct.Wrapping.html` keeps 23,784 `<a>`s
  after the slim (core/parsing/defuse.py), a 28 MB tree, and `trait.Shl.html` (28,670
  tags, not slimmed) 7,944, a 9 MB tree;
- a 10 MB syntax-highlighted source page was held three times over: its body, its slim
  copy (11.5 MB) and that copy's tree (11 MB of text nodes).
Cut in parts of about PART bytes, each part slimmed and parsed on its own, the peak is the
body and one part's slim copy and tree.

A part's fresh parser must find the link elements that the whole parse finds there. So a
cut goes only where:
- the tokenizer is in its data state, as a fresh one is: between tokens read as the
  tokenizer reads them (`_TOKEN`), or in text, never inside a comment, a bogus comment, a
  tag (its quoted attribute values hold `>` and `<` alike), or the raw text of script,
  style, xmp, iframe, noembed, noframes, textarea or title (not noscript: Lexbor parses with
  scripting off, so its content is markup). A script whose text holds `<!--` may hide its
  own end tag (the double-escaped state), so no cut comes after one. No cut comes after
  `<plaintext>` either;
- the parse is in body. An `<a>` start tag came first: it ends the head for good, so the
  first part's head is the page's head (a stray `</a>` in the head is ignored there). What
  a later part's fresh parser puts in its own head (a `<base>`, `<link>`, `<script>` before
  its first `<a>`) is in its tree all the same;
- no `<a>` is open (each `<a>` start tag met its `</a>`): an open one goes on being
  reopened (cloned) after block ends, and a later `<a>` closes it by the adoption agency,
  which clones it too;
- no select or table is open (opened minus closed, as counted from their tags, never
  below zero): an `<a>` in one is placed by other rules (in a select, older parsers drop
  it). Nor is an object, applet or marquee: each puts a marker in the list of active
  formatting elements, and an `</a>` inside one leaves an `<a>` opened outside it open.
  Elsewhere in body, an `<a>`,
  `<area>`, `<iframe>` or `<base>` is made where it stands, whatever else is open (what
  is open decides only where text and the other elements go);
- no template came before: links in one go to its contents, outside the tree, and where
  it ends depends on what a fresh parser would put in its head. A page with an `<html>`,
  `<head>` or `<body>` start tag in its body is not cut at all: the whole parse merges
  their attributes into the one element (or ignores them), where a part's fresh parser
  would make them its own;
- no form is open: a form inside a form is ignored by the whole parse;
- the page holds no frameset, svg or math: what a frameset changes, or where foreign content
  ends, is not read here (slim() leaves those pages whole too).
Where the count and the parser could disagree (misnested tags), the count mostly says
"still open", so a doubtful place gets no cut; where it says "closed" too early (an object
and a marquee closed crosswise), what stays open only reopens the same links.
A page whose tags keep the Python part of the scan busy (10 MB of `<form></form>`) stops
being cut after len/_MAX_STEPS such tokens: the cuts found so far stand, as each depends
only on the text before it. A cut in text steps back before a character reference, or a
UTF-8 character, it would split.

A part slimmed on its own keeps the links that the body slimmed whole keeps (defuse.py):
slim() may cut its input anywhere (a tag cut by a slice's end stays a tag, only its id is
then read), and a part ends between tokens.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from .defuse import _WHOLE

PART = 64 * 1024  # bytes (or characters) a part holds at least: a tree of 0.5-1.5 MB
BIG = 1 << 20  # a page this long is cut whatever it holds (a text-heavy page's tree is its text again)
MANY_TAGS = 16_000  # or one of 2 PARTs and more with this many `<` (a tree of 6 MB and more)
_RAW = "script|style|xmp|iframe|noembed|noframes|textarea|title"  # (no noscript: see above)
_WS = r"\t\n\f\r "


# A tag's attributes as the tokenizer reads them: quoted values may hold `>` and `<`, and
# after an `=` comes a value (a quote opens one); an unclosed quote or tag runs to the end of
# the text. _CLOSED_ATTRS is the same without the ends of the text: where it is made to stop,
# it stops before a tag it could not read whole.
def _attrs(eot: str) -> str:
    return (rf"""(?:[{_WS}/]++|[^{_WS}/>][^{_WS}/>=]*+(?:[{_WS}]*+=[{_WS}]*+"""
            rf"""(?:"[^"]*+(?:"{eot})|'[^']*+(?:'{eot})|[^{_WS}>"'][^{_WS}>]*+|(?=>){eot})|(?![{_WS}]*=)))*+"""
            rf"""(?:>{eot})""")


_ATTRS, _CLOSED_ATTRS = _attrs(r"|\Z"), _attrs("")
_COUNTED = ("select", "table", "object", "applet", "marquee", "form")  # counted open (see above)
_NAMED = "|".join(("a", *_COUNTED))  # the tags the count reads (others are skipped whole)
_STOPS = ("plaintext", "template", "body", "html", "head")  # no cut after one (the last three in body: none at all)
_END = rf"(?=[{_WS}/>]|\Z)"  # where a tag's name ends
# One token: what the tokenizer reads from a `<` (text between tokens is skipped by the search).
_TOKEN = (
    r"<(?:!--(?:-?>|.*?(?:--!?>|\Z))"  # a comment (`<!-->` and `<!--->` end at once)
    r"|!(?!--)[^>]*+(?:>|\Z)|\?[^>]*+(?:>|\Z)"  # a doctype or a bogus comment
    rf"|/(?P<end>{_NAMED}){_END}{_ATTRS}"  # an end tag the count reads
    rf"|/[a-zA-Z][^{_WS}/>]*+{_ATTRS}"  # any other end tag
    r"|/[^a-zA-Z>][^>]*+(?:>|\Z)"  # `</` and no letter: a bogus comment
    rf"|(?P<raw>{_RAW}){_END}{_ATTRS}(?P<text>.*?)(?:</(?P=raw){_END}{_ATTRS}|\Z)"
    rf"|(?P<start>{_NAMED}|{'|'.join(_STOPS)}){_END}{_ATTRS}"  # a start tag the count reads
    rf"|[a-zA-Z][^{_WS}/>]*+{_ATTRS})"  # any other start tag
)
# A run of text and whole tokens that leave the count as it was, once in body with nothing
# open: `<a>`s with their `</a>`, end tags of _NAMED with nothing of theirs open (the parser
# ignores them; the count stays at 0), whole raw text elements (a script's without `<!--`),
# none of the other _NAMED or _STOPS, nothing unclosed (no `\Z`s: where the run is made to
# stop, it ends between tokens or in text).
_BUSY = rf"(?:{_NAMED}|{'|'.join(_STOPS)}|{_RAW})(?=[{_WS}/>])"
# Common tags first, read without the _BUSY test (none of them is busy): half the time of a
# run through a syntax-highlighted page, whose tags are almost all `<span class=..>`.
_COMMON = (rf"</?(?:span|div|p|li|ul|code|pre|em|strong|b|i|td|tr|dt|dd|h[1-6]|section|details|summary|nav)"
           rf"(?=[{_WS}/>]){_CLOSED_ATTRS}")
_RAWTEXT = "|".join(  # each raw text element whole (a script's only without `<!--`: see above)
    rf"<{n}(?=[{_WS}/>]){_CLOSED_ATTRS}(?:[^<]++|<(?!{'!--|' if n == 'script' else ''}/{n}[{_WS}/>]))*+"
    rf"</{n}(?=[{_WS}/>]){_CLOSED_ATTRS}" for n in _RAW.split("|"))
_ITEM = (rf"[^<]++|{_COMMON}|<!--(?:-?>|.*?--!?>)|<!(?!--)[^>]*+>|<\?[^>]*+>"
         rf"|</(?!{_BUSY})[a-zA-Z][^{_WS}/>]*+{_CLOSED_ATTRS}|</(?:{'|'.join(_COUNTED)})(?=[{_WS}/>]){_CLOSED_ATTRS}"
         rf"|</[^a-zA-Z>][^>]*+>|<(?!{_BUSY})[a-zA-Z][^{_WS}/>]*+{_CLOSED_ATTRS}|{_RAWTEXT}"
         r"|<(?=[^a-zA-Z!?/])")  # a lone `<` is text (and one at the run's end is not taken)
_PAIR = rf"<a(?=[{_WS}/>]){_CLOSED_ATTRS}(?:{_ITEM})*+</a(?=[{_WS}/>]){_CLOSED_ATTRS}"
_RUN = rf"(?:[^<]++|{_PAIR}|</a(?=[{_WS}/>]){_CLOSED_ATTRS}|{_ITEM})*+"
_FLAGS = re.S | re.I
# (str patterns ASCII-only: re.I would otherwise match `ſcript` for `script`, as HTML does not)


@functools.cache
def _patterns(kind: type) -> tuple[re.Pattern[Any], re.Pattern[Any], re.Pattern[Any]]:
    """(foreign, token, run) for str or bytes, compiled on a crawl's first large page: all
    four at import were 20–35 ms of every command's start (docs/benchmarks/redis.md, "A crawl's
    start", in "`--processes 2`: the parent reads the records while the engines fetch")."""
    if kind is bytes:
        return _WHOLE, re.compile(_TOKEN.encode(), _FLAGS), re.compile(_RUN.encode(), _FLAGS)
    return (re.compile(_WHOLE.pattern.decode(), re.I | re.A), re.compile(_TOKEN, _FLAGS | re.A),
            re.compile(_RUN, _FLAGS | re.A))


_MAX_STEPS = 256  # bytes of text per token read in Python, at most: past that, no more cuts (a hostile page)


@dataclass(frozen=True, slots=True)
class CutPage:
    """A page to parse a part at a time: body[0:bounds[0]], body[bounds[0]:bounds[1]], ...
    `slim`: each part is slimmed before its parse (core/parsing/defuse.py)."""

    body: str | bytes
    bounds: list[int]
    slim: bool

    def __iter__(self) -> Any:
        starts = (0, *self.bounds)
        ends = (*self.bounds, len(self.body))
        return (self.body[a:b] for a, b in zip(starts, ends, strict=True))


def worth_cutting(text: str | bytes) -> bool:
    """Long enough, and holding text or tags enough, for its whole tree to matter."""
    if len(text) < 2 * PART:
        return False
    opening: Any = b"<" if isinstance(text, bytes) else "<"
    return len(text) >= BIG or text.count(opening) >= MANY_TAGS


def cuts(text: str | bytes, part: int = PART) -> list[int]:
    """Offsets to cut text at (see the module docstring), about `part` apart (a cut in text
    steps back a few bytes) and `part` from its end; [] when it has no safe place."""
    foreign, token, run = _patterns(type(text))
    if foreign.search(text) is not None:
        return []
    is_bytes = isinstance(text, bytes)
    open_ = dict.fromkeys(_COUNTED, 0)
    in_body = a_open = False
    found: list[int] = []
    pos = last = 0
    stop = len(text) - part
    steps = len(text) // _MAX_STEPS + 1_000
    while steps:
        if in_body and not a_open and not any(open_.values()):
            if pos >= last + part and pos <= stop:  # between tokens
                last = pos
                found.append(pos)
            end = run.match(text, pos, max(pos, last + part)).end()  # type: ignore[union-attr]  # (it matches "")
            if end > pos and end == last + part and end <= stop:  # the run was stopped there, in text
                end = _before_reference(text, pos, end)
                last = end
                found.append(end)
            pos = end
        m = token.search(text, pos)
        if m is None:
            break
        pos, kind = m.end(), m.lastgroup
        steps -= 1
        if kind is None:  # a comment, or a tag the count does not read
            continue
        if kind == "text":  # a raw text element, whole
            if m["raw"].lower() in ("script", b"script") and (b"<!--" if is_bytes else "<!--") in m["text"]:
                break  # the double-escaped state: where this script ends is not known
            continue
        name = m[kind].lower()
        if is_bytes:
            name = name.decode()
        if kind == "end":
            if name == "a":
                a_open = False
            else:
                open_[name] = max(0, open_[name] - 1)
        elif name == "a":
            in_body = a_open = True
        elif name in _STOPS:
            if name in ("plaintext", "template"):
                break
            if in_body:  # a fresh part would make its own of what the whole parse merges or ignores
                return []
        else:
            open_[name] += 1
    return found


def _before_reference(text: str | bytes, start: int, end: int) -> int:
    """end, or the `&` before it when end would cut a character reference (`&am|p;`): the
    text from that `&` to end is then all a reference may hold, so it is text. In UTF-8
    bytes, end steps back to the lead byte of a character it would cut (a stray
    continuation byte is left as it is: what is before it may be a tag's `>`)."""
    if isinstance(text, bytes) and 0x80 <= text[end] < 0xC0:
        back = end - 1
        while back > max(start, end - 3) and 0x80 <= text[back] < 0xC0:
            back -= 1
        if back > start and text[back] >= 0xC0:
            end = back
    amp_: Any = b"&" if isinstance(text, bytes) else "&"
    amp = text.rfind(amp_, max(start, end - 40), end)
    if amp <= start:
        return end
    return amp if _REFERENCE[type(text)].fullmatch(text, amp, end) else end


_REFERENCE: dict[type, re.Pattern[Any]] = {str: re.compile(r"&#?[0-9A-Za-z]*"), bytes: re.compile(rb"&#?[0-9A-Za-z]*")}
