"""The payloads already archived, by digest: what makes a `revisit` record possible.

URL-agnostic, as Heritrix and Browsertrix do it: the same logo under forty URLs, or a
page unchanged since the last crawl, is stored once; every other copy is a `revisit`
pointing at the first (WARC-Refers-To-Target-URI, -Date, and WARC-Refers-To when the
record id is known). Filled as the writer writes, and at start from earlier indexes:
the archive's own (a resumed crawl, another process's finished files) and `--dedup-from`.

One entry per distinct payload: the 20-byte SHA-1 as the key and one string
"uri date record-id" as the value (about 250 bytes with a 60-byte URL; BENCHMARKS.md).
"""
from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

from . import cdxj


def raw(digest: str) -> bytes | None:
    """`sha1:BASE32` -> its 20 bytes (None if it is not one)."""
    if not digest.startswith("sha1:"):
        return None
    try:
        return base64.b32decode(digest[5:])
    except (binascii.Error, ValueError):
        return None


class Digests:
    """Digest -> where its payload was first written. Used by the writer thread only."""

    def __init__(self) -> None:
        self._map: dict[bytes, str] = {}

    def __len__(self) -> int:
        return len(self._map)

    def get(self, digest: str) -> tuple[str, str, str] | None:
        """(target URI, WARC-Date, record id or "") of the payload's first copy."""
        k = raw(digest)
        v = self._map.get(k) if k is not None else None
        if v is None:
            return None
        uri, date, rid = v.split(" ", 2)
        return uri, date, rid

    def first(self, digest: str, uri: str, date: str, record_id: str) -> tuple[str, str, str] | None:
        """The payload's first copy if it has one; else this copy becomes it (None)."""
        found = self.get(digest)
        if found is None:
            self.add(digest, uri, date, record_id)
        return found

    def add(self, digest: str, uri: str, date: str, record_id: str = "") -> None:
        k = raw(digest)
        if k is not None and k not in self._map and " " not in uri:
            self._map[k] = f"{uri} {date} {record_id}"

    def add_many(self, entries: Iterable[tuple[str, str, str]]) -> int:
        """(digest, uri, ISO date) triples; returns how many were new."""
        before = len(self._map)
        for digest, uri, date in entries:
            self.add(digest, uri, date)
        return len(self._map) - before

    def load_cdxj(self, path: str) -> int:
        """A CDXJ index's original captures (2xx responses, revisits left out)."""
        return self.add_many(
            (f.get("digest", ""), f.get("url", ""), cdxj.iso_date(ts))
            for _, ts, f in cdxj.read(path)
            if f.get("mime") != "warc/revisit" and str(f.get("status", "")).startswith("2") and f.get("url"))
