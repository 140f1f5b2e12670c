"""The digest map of a crawl shared through Redis: a payload archived by one
process is a `revisit` in every other. One hash, `digests` (core/cluster/keys.py); HSETNX
decides atomically which copy is the first, however the processes race.

Used from the WARC writer thread only (core/output/warc.py), with its own blocking
client: a round trip per new 2xx payload, off the event loop. Answers are cached here, so a
payload seen again costs nothing. If Redis does not answer, the copy is written in full:
an archive with a duplicate beats one that waits.
"""
from __future__ import annotations

import redis

from ..output.dedup import Digests, raw
from .connect import sync_client
from .keys import Keys, text


class SharedDigests(Digests):
    def __init__(self, url: str, name: str) -> None:
        super().__init__()
        self._redis = sync_client(url, socket_timeout=5.0)
        self._key = Keys(name).digests
        self.errors = 0  # round trips that failed (the copy was kept whole)

    def first(self, digest: str, uri: str, date: str, record_id: str) -> tuple[str, str, str] | None:
        found = self.get(digest)
        if found is not None:
            return found
        k = raw(digest)
        if k is None or " " in uri:
            return None
        value = f"{uri} {date} {record_id}"
        try:
            if self._redis.hsetnx(self._key, k, value):
                self.add(digest, uri, date, record_id)
                return None
            other = self._redis.hget(self._key, k)
        except redis.RedisError:
            self.errors += 1
            self.add(digest, uri, date, record_id)
            return None
        if not other:
            return None
        ouri, odate, orid = (text(other).split(" ", 2) + ["", ""])[:3]
        self.add(digest, ouri, odate, orid)
        return ouri, odate, orid
