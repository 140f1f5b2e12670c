"""What a stylesheet loads: its `url()`s and `@import`s, as raw strings to join.

Read from fetched stylesheets, `<style>` blocks and `style` attributes alike: a page's
background images and web fonts are requisites as much as its `<img>`s (wget -p, wpull).
A regex, not a CSS parser: the references are all a crawler needs, and comments are the
only construct that can hide one.
"""
from __future__ import annotations

import re

_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.S)
# url("x") url('x') url(x), and @import "x" / @import 'x' (@import url(x) is the url() form).
_REF = re.compile(  # possessive: `url(` and a megabyte of spaces must not backtrack (quadratic)
    r"""url\(\s*+(?:"([^"\n]*+)"|'([^'\n]*+)'|([^)\s'"]*+))\s*+\)|@import\s++(?:"([^"\n]*+)"|'([^'\n]*+)')""",
    re.I,
)
_ANY = re.compile(r"url\(|@import", re.I)
MAX_REFS = 10_000  # a hostile stylesheet cannot queue more than this from one body


def css_refs(text: str) -> list[str]:
    """The distinct references of a stylesheet, in order; data: URIs and empty ones dropped."""
    if _ANY.search(text) is None:
        return []
    if "/*" in text:
        text = _COMMENT.sub(" ", text)
    out: dict[str, None] = {}
    for m in _REF.finditer(text):
        ref = next(g for g in m.groups() if g is not None).strip()
        if ref and not ref[:5].lower().startswith("data:") and ref[0] != "#":
            out[ref] = None
            if len(out) >= MAX_REFS:
                break
    return list(out)


def srcset_urls(value: str) -> list[str]:
    """The URLs of a `srcset` (`a.jpg 1x, b.jpg 480w`), per the HTML spec's candidate
    rules: a URL runs to whitespace (a trailing comma ends it), its descriptors to a comma."""
    out: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and (value[i].isspace() or value[i] == ","):
            i += 1
        start = i
        while i < n and not value[i].isspace():
            i += 1
        url = value[start:i]
        if url.endswith(","):
            url = url.rstrip(",")
        else:
            depth = 0
            while i < n and (value[i] != "," or depth):
                depth += {"(": 1, ")": -1}.get(value[i], 0)
                i += 1
        if url and not url[:5].lower().startswith("data:"):
            out.append(url)
    return out
