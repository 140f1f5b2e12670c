"""A shared crawl's records: the stream in Redis, read in pages, trimmed once exported.

Records stay in Redis until `crawltop export --trim` has written them to a file (and
flushed it): Redis memory is bounded by exporting as the crawl goes, and each record
lands in exactly one export. A file sink per process (`-o`) keeps only what that
process fetched, so it cannot give the whole crawl; the stream can.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import cast

import redis

from ..jsonfast import dumps_str, loads
from .keys import Keys

PAGE = 1000


def _record(fields: dict[bytes, bytes]) -> dict:
    rec = loads(fields[b"data"])
    rec["num_new_urls"] = int(fields[b"new"])  # counted by Redis, across the cluster
    return rec


class StreamRecords:
    """Iterate every record of crawl NAME once; `trim()` then deletes what was read."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self._r, self._key = client, Keys(name).rec
        self.last_id: bytes | None = None
        self.count = 0

    def __iter__(self) -> Iterator[dict]:
        while True:
            entries = self.page()
            if not entries:
                return
            for entry_id, fields in entries:
                rec = _record(fields)
                self.last_id, self.count = entry_id, self.count + 1
                yield rec

    def page(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """The next PAGE entries after the last one read (none yet: from the first)."""
        start = b"-" if self.last_id is None else b"(" + self.last_id
        # A client without decode_responses: ids and fields are bytes.
        return cast("list[tuple[bytes, dict[bytes, bytes]]]", self._r.xrange(self._key, min=start, count=PAGE))

    def trim(self) -> int:
        """Delete every entry up to the last one read (XTRIM MINID keeps ids >= the bound)."""
        if self.last_id is None:
            return 0
        ms, seq = self.last_id.split(b"-")
        return int(self._r.xtrim(self._key, minid=f"{int(ms)}-{int(seq) + 1}", approximate=False))


class Tail:
    """The records of crawl NAME, read as they are added, for whoever must see them all
    once the crawl ends: `--processes`' parent writes `-o FILE` and the whole crawl's report
    from them (cli/processes.py). Read while the engines fetch, they leave only the last
    ones for the end: two reads of every record after the crawl were a tenth of a
    two-process crawl's wall time (docs/benchmarks/redis.md, "`--processes 2`: the parent reads
    the records while the engines fetch").

    `read` takes what is new, at most `pages` pages of PAGE; an error in reading a page
    (Redis) leaves the place as it was: those records are read next time, never twice. Each
    record is written to `out` (if any) as a JSON line, then given to `each`."""

    def __init__(self, client: redis.Redis, name: str, out: Callable[[str], object] | None,
                 each: Callable[[dict], None]) -> None:
        self.records = StreamRecords(client, name)
        self.out, self._each = out, each

    def read(self, pages: int = 1) -> int:
        """Records read now (a RedisError is the caller's)."""
        n = 0
        for _ in range(pages):
            entries = self.records.page()
            for entry_id, fields in entries:
                rec = _record(fields)
                if self.out is not None:
                    self.out(dumps_str(rec) + "\n")
                self._each(rec)
                self.records.last_id = entry_id
                self.records.count += 1
                n += 1
            if len(entries) < PAGE:
                break
        return n

    def drain(self) -> int:
        """Every record not read yet: the crawl has ended."""
        n = 0
        while (got := self.read(100)) > 0:
            n += got
        return n
