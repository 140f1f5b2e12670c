"""A shared crawl's records: the stream in Redis, read in pages, trimmed once exported.

Records stay in Redis until `crawltop export --trim` has written them to a file (and
flushed it): Redis memory is bounded by exporting as the crawl goes, and each record
lands in exactly one export. A file sink per process (`-o`) keeps only what that
process fetched, so it cannot give the whole crawl; the stream can.

A crawl of P > 1 partitions (core/cluster/keys.py) has a stream per partition: each is
read from its own place, in its own order, a page of each in one pipelined round trip
(on a Redis Cluster, one per master), and trimmed up to what was read of it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import cast

import redis

from ..jsonfast import dumps_str, loads
from .totals import read_parts_sync

PAGE = 1000
LEAST = 50  # entries a page asks of each stream at least, however many partitions

Entry = tuple[bytes, dict[bytes, bytes]]  # a stream entry's id and fields (a client without decode_responses)


def _record(fields: dict[bytes, bytes]) -> dict:
    rec = loads(fields[b"data"])
    if fields.get(b"new"):  # counted by Redis, across the cluster (a partitioned crawl's links go
        rec["num_new_urls"] = int(fields[b"new"])  # apart from their page's DONE: the engine's own count)
    return rec


class StreamRecords:
    """Iterate every record of crawl NAME once; `trim()` then deletes what was read."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self._r, self.name = client, name
        self._keys: list[str] | None = None  # every partition's stream: read at the first page
        self._last: list[bytes | None] = []  # the last id read of each
        self.count = 0

    @property
    def streams(self) -> list[str]:
        """Each partition's stream (the control meta's `parts`, fixed at creation: read once)."""
        if self._keys is None:
            self._keys = [k.rec for k in read_parts_sync(self._r, self.name)]
            self._last = [None] * len(self._keys)
        return self._keys

    def __iter__(self) -> Iterator[dict]:
        while True:
            entries = self.page()
            if not entries:
                return
            for stream, entry_id, fields in entries:
                rec = _record(fields)
                self.advance(stream, entry_id)
                yield rec

    def page(self, only: list[int] | None = None) -> list[tuple[int, bytes, dict[bytes, bytes]]]:
        """The next entries of each stream (of those in `only`) after the last one read of it
        (none yet: from its first), each stream's in its order: PAGE of one stream, a share
        of PAGE (LEAST at least) of each of several."""
        streams = self.streams
        wanted = range(len(streams)) if only is None else only
        if len(streams) == 1:
            got = [self._range(0, PAGE)] if 0 in wanted else []
        else:
            pipe = self._r.pipeline(transaction=False)
            for i in wanted:
                pipe.xrange(streams[i], min=self._start(i), count=self.per_stream)
            got = cast("list[list[Entry]]", pipe.execute())
        return [(i, entry_id, fields) for i, entries in zip(wanted, got, strict=True) for entry_id, fields in entries]

    @property
    def per_stream(self) -> int:
        """Entries a page asks of each stream."""
        return PAGE if len(self.streams) == 1 else max(LEAST, PAGE // len(self.streams))

    def _start(self, i: int) -> bytes:
        last = self._last[i]
        return b"-" if last is None else b"(" + last

    def _range(self, i: int, count: int) -> list[Entry]:
        return cast("list[Entry]", self._r.xrange(self.streams[i], min=self._start(i), count=count))

    def advance(self, stream: int, entry_id: bytes) -> None:
        """One more record read: the entry `entry_id` of stream number `stream`."""
        self._last[stream] = entry_id
        self.count += 1

    @property
    def last_id(self) -> bytes | None:
        """The last id read of the first stream (of the only one, with one partition)."""
        return self._last[0] if self._last else None

    def trim(self) -> int:
        """Delete every entry up to the last one read, in each stream (XTRIM MINID keeps ids
        >= the bound)."""
        bounds = [(key, last) for key, last in zip(self.streams, self._last, strict=True) if last is not None]
        if not bounds:
            return 0
        pipe = self._r.pipeline(transaction=False)
        for key, last in bounds:
            ms, seq = last.split(b"-")
            pipe.xtrim(key, minid=f"{int(ms)}-{int(seq) + 1}", approximate=False)
        return sum(int(n) for n in pipe.execute())


class Tail:
    """The records of crawl NAME, read as they are added, for whoever must see them all
    once the crawl ends: `--processes`' parent writes `-o FILE` and the whole crawl's report
    from them (cli/processes.py). Read while the engines fetch, they leave only the last
    ones for the end: two reads of every record after the crawl were a tenth of a
    two-process crawl's wall time (docs/benchmarks/redis.md, "`--processes 2`: the parent reads
    the records while the engines fetch").

    `read` takes what is new, at most `pages` pages; an error in reading a page
    (Redis) leaves the place as it was: those records are read next time, never twice. Each
    record is written to `out` (if any) as a JSON line, then given to `each`."""

    def __init__(self, client: redis.Redis, name: str, out: Callable[[str], object] | None,
                 each: Callable[[dict], None]) -> None:
        self.records = StreamRecords(client, name)
        self.out, self._each = out, each

    def read(self, pages: int = 1) -> int:
        """Records read now (a RedisError is the caller's)."""
        n = 0
        only: list[int] | None = None  # after the first page, only the streams that filled theirs
        for _ in range(pages):
            entries = self.records.page(only)
            full: dict[int, int] = {}
            for stream, entry_id, fields in entries:
                rec = _record(fields)
                if self.out is not None:
                    self.out(dumps_str(rec) + "\n")
                self._each(rec)
                self.records.advance(stream, entry_id)
                full[stream] = full.get(stream, 0) + 1
                n += 1
            only = [s for s, got in full.items() if got >= self.records.per_stream]
            if not only:
                break
        return n

    def drain(self) -> int:
        """Every record not read yet: the crawl has ended."""
        n = 0
        while (got := self.read(100)) > 0:
            n += got
        return n
