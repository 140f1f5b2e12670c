"""What a link check finds across two Records: broken targets' referrers, missing fragments.

Each fact is written once, in the first Record written after both its ends are known, so no
Record is ever rewritten:
- a reference to a URL whose Record is not written yet waits in `Referrers` and goes into that
  Record (`referrers`, `referrers_more`) if it is broken; a reference to a URL already recorded
  broken goes into the referring page's Record (`broken_links`);
- a fragment link to a page already parsed is checked at once and a miss goes into the
  referring page's Record; one to a page not parsed yet waits in `Fragments` and a miss goes
  into the target's Record. Either way `missing_fragments` holds `[page, target, fragment]`,
  and `crawltop report` lists it under the page.

Memory is bounded: a few referrers per URL and a count, and ids kept as sorted 32-bit hashes
(4 bytes an id, about 120 bytes a page besides). Both live in this process only: a resumed
crawl checks what it parses after the resume.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import islice

from ..output.provenance import WORDS

KEEP_REFERRERS = 9  # pages named per broken URL besides its via (the report lists 10); the rest are counted
MAX_TRACKED = 200_000  # URLs with waiting fragment links; past it new ones are not tracked
# URLs in the referrers' book: waiting for their Record, or recorded fine or broken. Past it
# the oldest quarter goes, broken ones last: a link to a URL forgotten that way waits for a
# Record that was already written, so it is not reported (bounded memory for --state and
# Redis crawls, where the book's strings are its own: ~100 bytes a URL besides its waiting pages).
MAX_BOOK = 400_000
MAX_PER_RECORD = 100  # broken links or missing fragments named in one Record
_MASK = 0xFFFFFFFF
_NO_IDS = array("I")


class Referrers:
    """Pages that refer to a URL already queued, kept until its Record says whether it broke.

    One dict, so a link to a URL seen before costs one lookup on the hot path (every link
    of every page): url -> True (recorded fine), False (recorded broken), or its waiting
    list [count of the rest, the last page that referred, page, hop letter, page, hop
    letter, ...]; a page that refers twice (a link and an image) counts once."""

    def __init__(self) -> None:
        self._book: dict[str, list | bool] = {}

    def again_all(self, urls: list[str], page: str, letter: str, broken_links: list[list[str]]) -> None:
        """`page` refers (by hop `letter`) to these URLs, already queued: one known broken is
        named in the page's Record (`broken_links`); for the others the page waits for their
        Record. One call per page and kind: the loop runs once per link on every page."""
        book, full = self._book, 2 * KEEP_REFERRERS + 2
        get = book.get
        for url in urls:
            w = get(url)
            if w is True:  # recorded fine: most links of a site, once it has been crawled a while
                continue
            if w is None:
                if len(book) >= MAX_BOOK:
                    self._forget()
                book[url] = [0, page, page, letter]
            elif w is False:
                if len(broken_links) < MAX_PER_RECORD:
                    broken_links.append([url, WORDS.get(letter, "a")])
            elif w[1] != page:  # (the same page again, a link and an image of one URL: once)
                w[1] = page
                if len(w) < full:
                    w += (page, letter)
                else:
                    w[0] += 1

    def recorded(self, url: str, broken: bool, via: str | None) -> tuple[list[list[str]], int] | None:
        """The URL's Record is being written: its waiting referrers if it is broken, as
        [page, tag] pairs (its `via` left out: the Record names it) and the count of the rest."""
        book = self._book
        w = book.get(url)
        if w is None and len(book) >= MAX_BOOK:
            self._forget()
        book[url] = not broken
        if not broken or not isinstance(w, list):
            return None
        pairs = [[w[i], WORDS.get(w[i + 1], "a")] for i in range(2, len(w), 2) if w[i] != via]
        return pairs, w[0]

    def _forget(self) -> None:
        """Drop the oldest quarter of the book in one pass (dropping one at a time from the
        front of a dict walks over every slot freed before it). URLs recorded broken go last:
        they are kept, at the back, while they are at most half of that quarter, so a late
        link to an early broken URL is still named in its page's Record."""
        book = self._book
        oldest = list(islice(book.items(), len(book) // 4))
        for url, _ in oldest:
            del book[url]
        broken = [url for url, w in oldest if w is False]
        if 2 * len(broken) <= len(oldest):
            book.update(dict.fromkeys(broken, False))


class Fragments:
    """Which fragment links name no element (`id`, `<a name>`) of the page they point to."""

    def __init__(self) -> None:
        self._ids: dict[str, array | None] = {}  # parsed page -> its ids' hashes (None: unknown)
        self._waiting: dict[str, list[tuple[str, str]]] = {}  # target -> (page, fragment)

    def parsed(self, url: str, ids: set[str] | None) -> list[list[str]]:
        """A page's ids are known (None: not reliably, e.g. a defused page): the fragment
        links that waited for it and name nothing on it, as `[page, target, fragment]`."""
        if ids is None:
            hashes = None
        else:  # most pages of a site without ids share one empty array
            hashes = array("I", sorted({hash(i) & _MASK for i in ids})) if ids else _NO_IDS
        if len(self._ids) < MAX_TRACKED:
            self._ids[url] = hashes
        waiting = self._waiting.pop(url, ())
        if hashes is None:
            return []
        return [[page, url, frag] for page, frag in waiting if not _has(hashes, frag)][:MAX_PER_RECORD]

    def recorded(self, url: str) -> None:
        """The target's Record is written: what still waits can't be checked (not HTML, failed)."""
        self._waiting.pop(url, None)

    def check(self, page: str, target: str, frag: str, own: set[str] | None) -> bool:
        """False when the fragment is known to be missing now; a link to a page not yet
        parsed waits (True). `own` is the referring page's ids, for links to itself."""
        if target == page:
            return own is None or frag in own
        if target in self._ids:
            hashes = self._ids[target]
            return hashes is None or _has(hashes, frag)
        waiting = self._waiting.get(target)
        if waiting is None:
            if len(self._waiting) >= MAX_TRACKED:
                return True
            waiting = self._waiting[target] = []
        if len(waiting) < MAX_PER_RECORD:  # a page's own repeats were dropped (Follow._fragments)
            waiting.append((page, frag))
        return True


def _has(hashes: array, frag: str) -> bool:
    h = hash(frag) & _MASK
    i = bisect_left(hashes, h)
    return i < len(hashes) and hashes[i] == h
