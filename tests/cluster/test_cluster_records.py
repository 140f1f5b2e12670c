"""The record stream of a shared crawl read as it grows (core/cluster/records.py Tail): what
the parent of `--processes` writes to -o FILE and reports on as the crawl goes."""
from __future__ import annotations

import json

import pytest
import redis

from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.records import PAGE, StreamRecords, Tail


def _add(r: redis.Redis, name: str, first: int, n: int) -> None:
    pipe = r.pipeline()
    for i in range(first, first + n):
        url = f"http://h.test/{i}"
        pipe.xadd(Keys(name).rec, {"url": url, "data": json.dumps({"url": url, "status": 200, "num_new_urls": 0}),
                                   "new": i % 3, "proc": "p1"})
    pipe.execute()


def test_a_tail_reads_every_record_once_as_the_stream_grows(redis_url):
    r = redis.Redis.from_url(redis_url)
    lines: list[str] = []
    seen: list[dict] = []
    tail = Tail(r, "grow", lines.append, seen.append)
    assert tail.read() == 0  # nothing yet
    _add(r, "grow", 0, 5)
    assert tail.read() == 5
    _add(r, "grow", 5, 2 * PAGE + 7)  # more than a step's pages
    assert tail.read(2) == 2 * PAGE  # at most the pages asked for
    _add(r, "grow", 5 + 2 * PAGE + 7, 3)
    assert tail.drain() == 10
    assert tail.read() == 0
    total = 5 + 2 * PAGE + 10
    assert [rec["url"] for rec in seen] == [f"http://h.test/{i}" for i in range(total)]  # in order, once each
    assert [json.loads(line) for line in lines] == seen
    assert all(line.endswith("\n") for line in lines)
    assert [rec["num_new_urls"] for rec in seen[:4]] == [0, 1, 2, 0]  # Redis's count, across the cluster
    assert list(StreamRecords(r, "grow")) == seen  # what `export` reads, the same records
    r.close()


def test_a_tail_reads_again_what_a_redis_error_left(redis_url):
    """A read that fails leaves the place as it was: the next one gets those records, once,
    after a first page read whole and in the middle of a drain alike."""
    r = redis.Redis.from_url(redis_url)
    dead = redis.Redis(unix_socket_path="/nonexistent/redis.sock", retry=None)
    seen: list[dict] = []
    tail = Tail(r, "again", None, seen.append)
    _add(r, "again", 0, 3)
    assert tail.read() == 3
    _add(r, "again", 3, PAGE + 3)
    tail.records._r = dead
    with pytest.raises(redis.ConnectionError):
        tail.read()
    tail.records._r = r
    assert tail.read(1) == PAGE  # one page, then Redis goes away before the next
    tail.records._r = dead
    with pytest.raises(redis.ConnectionError):
        tail.drain()
    tail.records._r = r
    assert tail.drain() == 3
    assert [rec["url"] for rec in seen] == [f"http://h.test/{i}" for i in range(PAGE + 6)]
    r.close()
    dead.close()
