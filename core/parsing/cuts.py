"""Where a slimmed page may be cut, so that its parse tree is built one part at a time.

A slimmed page (core/parsing/defuse.py) still holds every link element. Rustdoc's
`struct.Wrapping.html` keeps 23,784 `<a>`s, and they cost Lexbor a 28 MB tree: the crawl's
peak RSS (BENCHMARKS.md, issue 29). Parsed in parts of about PART bytes, one tree at a
time, the peak is one part's tree.

A part's fresh parser must find the same link elements as the whole parse would find
there. So a cut goes right after an `</a>` end tag, and only where:
- the tokenizer is in its data state, as a fresh one is. The end tag is a token read as the
  tokenizer reads it (`_TOKEN`), not text inside a comment, a bogus comment, another tag's
  attribute value, or the raw text of script, style, xmp, iframe, noembed, noframes,
  textarea or title (not noscript: Lexbor parses with scripting off, so its content is
  markup). A script whose text holds `<!--` may hide its own end tag
  (the double-escaped state), so no cut comes after one. No cut comes after `<plaintext>`,
  either;
- the parse is in body. An `<a>` start tag came first: it ends the head for good, so the
  first part's head is the page's head (a stray `</a>` in the head is ignored there). What
  a later part's fresh parser puts in its own head (a `<base>`, `<link>`, `<script>` before
  its first `<a>`) is in its tree all the same;
- no select or table is open (opened minus closed, as counted from their tags, never
  below zero): an `<a>` in one is placed by other rules. Nor is an object, applet or
  marquee: each puts a marker in the list of active formatting elements, and an `</a>`
  inside one leaves an `<a>` opened outside it open, to be reopened (cloned, by a fresh
  parser or not) after it. Elsewhere in body, an `</a>` leaves no `<a>` active, and an
  `<a>`, `<area>`, `<iframe>` or `<base>` is made where it stands, whatever is open;
- no template came before: links in one go to its contents, outside the tree, and where
  it ends depends on what a fresh parser would put in its head;
- frameset, svg and math are absent: slim() leaves a body holding them whole.
Where the count and the parser could disagree (misnested tags), the count says "still
open", so a doubtful place gets no cut.
"""
from __future__ import annotations

import re
from typing import Any

PART = 256 * 1024  # bytes (or characters) a part holds at least: a tree of 2-3 MB
_RAW = "script|style|xmp|iframe|noembed|noframes|textarea|title"  # (no noscript: Lexbor parses with scripting off)
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
_NAMED = r"a|select|table|object|applet|marquee"  # the tags the count reads (others are skipped whole)
_END = rf"(?=[{_WS}/>]|\Z)"  # where a tag's name ends
# One token: what the tokenizer reads from a `<` (text between tokens is skipped by the search).
_TOKEN = (
    r"<(?:!--(?:-?>|.*?(?:--!?>|\Z))"  # a comment (`<!-->` and `<!--->` end at once)
    r"|!(?!--)[^>]*+(?:>|\Z)|\?[^>]*+(?:>|\Z)"  # a doctype or a bogus comment
    rf"|/(?P<end>{_NAMED}){_END}{_ATTRS}"  # an end tag the count reads
    rf"|/[a-zA-Z][^{_WS}/>]*+{_ATTRS}"  # any other end tag
    r"|/[^a-zA-Z>][^>]*+(?:>|\Z)"  # `</` and no letter: a bogus comment
    rf"|(?P<raw>{_RAW}){_END}{_ATTRS}(?P<text>.*?)(?:</(?P=raw){_END}{_ATTRS}|\Z)"
    rf"|(?P<start>{_NAMED}|plaintext|template){_END}{_ATTRS}"  # a start tag the count reads
    rf"|[a-zA-Z][^{_WS}/>]*+{_ATTRS})"  # any other start tag
)
# A run of text and tokens that change nothing the count reads, once in body with nothing
# open: no raw text element, none of _NAMED but `a`, no template or plaintext, nothing unclosed
# (without the `\Z`s, so the run ends at a token boundary wherever it is made to stop).
_BUSY = rf"(?:{_NAMED[2:]}|template|plaintext|{_RAW})(?=[{_WS}/>])"
_RUN = (rf"(?:[^<]++|<!--(?:-?>|.*?--!?>)|<!(?!--)[^>]*+>|<\?[^>]*+>|</(?!{_BUSY})[a-zA-Z][^{_WS}/>]*+{_CLOSED_ATTRS}"
        rf"|</[^a-zA-Z>][^>]*+>|<(?!{_BUSY})[a-zA-Z][^{_WS}/>]*+{_CLOSED_ATTRS}"
        r"|<(?=[^a-zA-Z!?/]))*+")  # a lone `<` is text (and one at the run's end is not taken)
_TOKENS: dict[type, re.Pattern[Any]] = {str: re.compile(_TOKEN, re.S | re.I),
                                         bytes: re.compile(_TOKEN.encode(), re.S | re.I)}
_RUNS: dict[type, re.Pattern[Any]] = {str: re.compile(_RUN, re.S | re.I), bytes: re.compile(_RUN.encode(), re.S | re.I)}
MANY_LINKS = 4_000  # `</a`s a page needs before it is cut in PARTs: a tree of fewer costs under ~5 MB


def cuts(text: str | bytes, part: int = PART) -> list[int]:
    """Offsets to cut text at (see the module docstring), at least `part` apart; [] when
    the text is too short or has too few links to be worth it, or has no safe place."""
    is_bytes = isinstance(text, bytes)
    closing: Any = b"</a" if is_bytes else "</a"
    if len(text) < 2 * part or text.count(closing) < MANY_LINKS * part // PART:
        return []
    token, run = _TOKENS[type(text)], _RUNS[type(text)]
    open_ = {"select": 0, "table": 0, "object": 0, "applet": 0, "marquee": 0}
    in_body = False
    found: list[int] = []
    pos = last = 0
    stop = len(text) - part
    while True:
        if in_body and not any(open_.values()):  # skip, in C, to the next place a cut may go
            pos = run.match(text, pos, max(pos, last + part)).end()  # type: ignore[union-attr]  # (it matches "")
        m = token.search(text, pos)
        if m is None:
            break
        pos, kind = m.end(), m.lastgroup
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
            if name != "a":
                open_[name] = max(0, open_[name] - 1)
            elif in_body and last + part <= pos <= stop and not any(open_.values()):
                last = pos
                found.append(pos)
        elif name == "a":
            in_body = True
        elif name in ("plaintext", "template"):
            break
        else:
            open_[name] += 1
    return found
