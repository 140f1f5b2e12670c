"""A shared crawl's records: the stream in Redis, read in pages, trimmed once exported.

Records stay in Redis until `crawltop export --trim` has written them to a file (and
flushed it): Redis memory is bounded by exporting as the crawl goes, and each record
lands in exactly one export. A file sink per process (`-o`) keeps only what that
process fetched, so it cannot give the whole crawl; the stream can.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import cast

import redis

from .keys import Keys

PAGE = 1000


class StreamRecords:
    """Iterate every record of crawl NAME once; `trim()` then deletes what was read."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self._r, self._key = client, Keys(name).rec
        self.last_id: bytes | None = None
        self.count = 0

    def __iter__(self) -> Iterator[dict]:
        start = b"-"
        while True:
            # A client without decode_responses: ids and fields are bytes.
            entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", self._r.xrange(self._key, min=start, count=PAGE))
            if not entries:
                return
            for entry_id, fields in entries:
                rec = json.loads(fields[b"data"])
                rec["num_new_urls"] = int(fields[b"new"])  # counted by Redis, across the cluster
                self.last_id, self.count = entry_id, self.count + 1
                yield rec
            start = b"(" + entries[-1][0]

    def trim(self) -> int:
        """Delete every entry up to the last one read (XTRIM MINID keeps ids >= the bound)."""
        if self.last_id is None:
            return 0
        ms, seq = self.last_id.split(b"-")
        return int(self._r.xtrim(self._key, minid=f"{int(ms)}-{int(seq) + 1}", approximate=False))
