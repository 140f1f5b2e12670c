"""Where a URL came from and what was fetched: hop paths, fetch times, payload digests.

Hop paths are Heritrix's crawl.log form; the letters are `hop`'s docstring.
"""
from __future__ import annotations

import hashlib
import sys
import time

MAX_HOPS = 20
_MEMO_MAX = 4096
_memo: dict[tuple[str, str], str] = {}


def hop(path: str, letter: str) -> str:
    """`path` extended by one hop, shared: equal paths are the same string object.

    Hop paths (`discovery`): one letter per hop from a root, the last MAX_HOPS letters kept,
    with a count of the dropped ones in front (`3+LLL...`); roots have the empty path.
    `L` a link (`<a href>`, `<area href>`); `E` an embed (`<frame src>`, `<iframe src>`);
    `R` a redirect (a 3xx's Location, a meta refresh); requisites by what loaded them: `I`
    img, `Y` srcset, `K` link, `J` script, `V` media, `O` embed/object, `U` CSS url(); `M` a
    sitemap file (named by robots.txt, guessed at /sitemap.xml, or listed by an index); `S` a
    URL listed in a sitemap.
    Paths are interned (a million queued URLs share a few hundred strings), and a queued URL
    keeps its parent's URL string object as `via`, so it costs a pointer.
    """
    key = (path, letter)
    try:
        return _memo[key]
    except KeyError:
        pass
    if len(_memo) >= _MEMO_MAX:
        _memo.clear()
    out = _memo[key] = sys.intern(_extend(path, letter))
    return out


def _extend(path: str, letter: str) -> str:
    count, plus, tail = path.partition("+")
    dropped = int(count) if plus else 0
    if not plus:
        tail = path
    tail += letter
    if len(tail) > MAX_HOPS:
        dropped += len(tail) - MAX_HOPS
        tail = tail[-MAX_HOPS:]
    return f"{dropped}+{tail}" if dropped else tail


# What referred to a URL, in the report's words, by the last hop letter that is not a redirect
# (requisite letters: core/parsing/page.py; what each kind is: core/queueing/kinds.py).
WORDS = {"L": "a", "E": "frame", "I": "img", "Y": "srcset", "K": "link", "J": "script", "V": "media",
         "O": "object", "U": "css url()", "R": "redirect", "M": "sitemap", "S": "sitemap", "": "root"}


def referrer_letter(discovery: str) -> str:
    """The hop letter of what referred to the URL: its path's last letter that is not a
    redirect (a redirect's target keeps the kind of what led to it); `R` for a chain of
    redirects alone, `` for a root."""
    stripped = discovery.rstrip("R")
    if stripped and stripped[-1] not in "+0123456789":
        return stripped[-1]
    return "R" if discovery.endswith("R") else ""


def word(discovery: str) -> str:
    return WORDS.get(referrer_letter(discovery), "a")


def hops_total(path: str) -> int:
    """How many hops a path stands for, the dropped ones included."""
    count, plus, tail = path.partition("+")
    return int(count) + len(tail) if plus else len(path)


def intern_path(path: str | None) -> str:
    """A hop path read back from storage, shared like the ones made by hop()."""
    return sys.intern(path) if path else ""


def utc_iso(t: float | None = None) -> str:
    """UTC ISO 8601 with milliseconds: 2026-11-22T11:00:42.123Z."""
    if t is None:
        t = time.time()
    ms = int(t * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [a + b for a in _B32 for b in _B32]  # 10 bits -> 2 letters: 16 lookups a digest
_SHIFTS = range(150, -1, -10)


def payload_digest(sha1: hashlib._Hash) -> str:
    """WARC's form of a SHA-1: `sha1:` + base32, as warcio writes WARC-Payload-Digest
    (base64.b32encode is pure Python and costs twice this, on every page)."""
    n = int.from_bytes(sha1.digest(), "big")  # 160 bits: _SHIFTS is for SHA-1 alone
    return "sha1:" + "".join([_B32_PAIRS[(n >> s) & 1023] for s in _SHIFTS])


def new_hasher() -> hashlib._Hash:
    return hashlib.sha1(usedforsecurity=False)
