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

from ..output.provenance import WORDS

KEEP_REFERRERS = 9  # pages named per broken URL besides its via (the report lists 10); the rest are counted
MAX_TRACKED = 200_000  # URLs with waiting referrers or fragment links; past it new ones are not tracked
# URLs known recorded fine. With the memory frontier the string is shared with its seen set
# (a set slot, ~30 bytes); with --state or Redis it is this set's own (~130 bytes): bounded
# like the rest, past it a link to such a URL costs a waiting list as before.
MAX_FINE = 200_000
MAX_PER_RECORD = 100  # broken links or missing fragments named in one Record
_MASK = 0xFFFFFFFF


class Referrers:
    """Pages that refer to a URL already queued, kept until its Record says whether it broke.

    On the hot path (every link to a URL seen before) a set lookup and a dict lookup. A URL's
    waiting list is [count of the rest, page, hop letter, page, hop letter, ...]. The lists
    live in insertion order and the oldest go first when MAX_TRACKED are waiting; a URL
    recorded fine is remembered (up to MAX_FINE) so that links to it cost one lookup."""

    def __init__(self) -> None:
        self._waiting: dict[str, list] = {}
        self._broken: set[str] = set()
        # Recorded fine: most links on a site point to pages already fetched, and for those
        # a page must neither wait nor leave a list behind (up to MAX_FINE of them).
        self._fine: set[str] = set()

    def again_all(self, urls: list[str], page: str, letter: str, broken_links: list[list[str]]) -> None:
        """`page` refers (by hop `letter`) to these URLs, already queued: one known broken is
        named in the page's Record (`broken_links`); for the others the page waits for their
        Record. One call per page and kind: the loop runs once per link on every page."""
        fine, broken, waiting, full = self._fine, self._broken, self._waiting, 2 * KEEP_REFERRERS + 1
        for url in urls:
            if url in fine:
                continue
            if url in broken:
                if len(broken_links) < MAX_PER_RECORD:
                    broken_links.append([url, WORDS.get(letter, "a")])
                continue
            w = waiting.get(url)
            if w is None:
                if len(waiting) >= MAX_TRACKED:
                    del waiting[next(iter(waiting))]
                waiting[url] = [0, page, letter]
            elif w[-2] == page:  # the same page again (a link and an image of one URL): once
                continue
            elif len(w) < full:
                w += (page, letter)
            else:
                w[0] += 1

    def recorded(self, url: str, broken: bool, via: str | None) -> tuple[list[list[str]], int] | None:
        """The URL's Record is being written: its waiting referrers if it is broken, as
        [page, tag] pairs (its `via` left out: the Record names it) and the count of the rest."""
        w = self._waiting.pop(url, None)
        if not broken:
            if len(self._fine) < MAX_FINE:
                self._fine.add(url)
            return None
        if len(self._broken) < MAX_TRACKED:
            self._broken.add(url)
        if w is None:
            return None
        pairs = [[w[i], WORDS.get(w[i + 1], "a")] for i in range(1, len(w), 2) if w[i] != via]
        return pairs, w[0]


class Fragments:
    """Which fragment links name no element (`id`, `<a name>`) of the page they point to."""

    def __init__(self) -> None:
        self._ids: dict[str, array | None] = {}  # parsed page -> its ids' hashes (None: unknown)
        self._waiting: dict[str, list[tuple[str, str]]] = {}  # target -> (page, fragment)

    def parsed(self, url: str, ids: set[str] | None) -> list[list[str]]:
        """A page's ids are known (None: not reliably, e.g. a defused page): the fragment
        links that waited for it and name nothing on it, as `[page, target, fragment]`."""
        hashes = array("I", sorted({hash(i) & _MASK for i in ids})) if ids is not None else None
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
        if len(waiting) < MAX_PER_RECORD and (page, frag) not in waiting:
            waiting.append((page, frag))
        return True


def _has(hashes: array, frag: str) -> bool:
    h = hash(frag) & _MASK
    i = bisect_left(hashes, h)
    return i < len(hashes) and hashes[i] == h
