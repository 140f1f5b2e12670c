"""What the seen set of a shared crawl costs Redis: the previous layout (one set of 8-byte
strings) against the intset buckets of core/cluster/seen.py, on a private redis-server.

    .venv/bin/python bench/seen_memory.py                      # 1,000,000 URLs, planned for
    .venv/bin/python bench/seen_memory.py --expect 100000      # 10x past the plan
    .venv/bin/python bench/seen_memory.py --urls 200000 --batch 500

For each layout, on a fresh server: `INFO memory` used_memory before and after inserting
--urls fingerprints (web-like URLs), and MEMORY USAGE summed over the keys (SAMPLES 0: every
element); insert time per URL (calls of --batch fingerprints: SADD in a pipeline for the
old layout, the SEEN_ADD script for the new one, as ADD's links reach it); the time of a
second pass (all seen); and for the buckets, how many there are, how deep they spilled, and
that every one is still an intset.
"""
from __future__ import annotations

import argparse
import asyncio
import time
from hashlib import blake2b

from common import RedisServer

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster import scripts
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.seen import fingerprint


def url_of(i: int) -> str:
    return f"https://www.site{i % 100_000:06d}.example.com/articles/2026/{i // 100_000:05d}-a-page-title.html"


async def old_layout(url: str, n: int, batch: int) -> dict:
    """Every fingerprint SADDed to one set as 8 bytes (blake2b-64): the layout before the buckets."""
    r = cluster.client(url)
    key = "crawltop:{old}:seen"
    used0 = int((await r.info("memory"))["used_memory"])
    t0 = time.perf_counter()
    for at in range(0, n, batch):
        await r.sadd(key, *(blake2b(url_of(i).encode(), digest_size=8).digest() for i in range(at, min(n, at + batch))))
    insert_s = time.perf_counter() - t0
    used1 = int((await r.info("memory"))["used_memory"])
    t0 = time.perf_counter()
    for at in range(0, n, batch):
        await r.sadd(key, *(blake2b(url_of(i).encode(), digest_size=8).digest() for i in range(at, min(n, at + batch))))
    again_s = time.perf_counter() - t0
    usage = int(await r.memory_usage(key, samples=0) or 0)
    await r.aclose()
    return {"layout": "one set of 8-byte strings", "used": used1 - used0, "usage": usage, "insert_s": insert_s,
            "again_s": again_s, "keys": 1, "depth": 0, "encodings": ["hashtable"]}


async def buckets(url: str, n: int, batch: int, expect: int) -> dict:
    """Through SEEN_ADD on a crawl planned for `expect` URLs (core/cluster/seen.py)."""
    r = cluster.client(url)
    await cluster.start(r, url, "new", CrawlConfig(roots=("http://127.0.0.1:1/",)), expect_urls=expect)
    k = Keys("new")
    add = r.register_script(scripts.SEEN_ADD)
    keys = [k.meta, k.count, k.seen]
    used0 = int((await r.info("memory"))["used_memory"])
    t0 = time.perf_counter()
    for at in range(0, n, batch):
        await add(keys, [0, *(fingerprint(url_of(i)) for i in range(at, min(n, at + batch)))])
    insert_s = time.perf_counter() - t0
    used1 = int((await r.info("memory"))["used_memory"])
    t0 = time.perf_counter()
    for at in range(0, n, batch):
        got = await add(keys, [0, *(fingerprint(url_of(i)) for i in range(at, min(n, at + batch)))])
        assert not any(got), "a fingerprint added twice"
    again_s = time.perf_counter() - t0
    names = [b async for b in r.scan_iter(match="crawltop:{new}:seen:*", count=10_000)]
    pipe = r.pipeline(transaction=False)
    for b in names:
        pipe.memory_usage(b, samples=0)
        pipe.object("encoding", b)
    got = await pipe.execute()
    usage = sum(int(x or 0) for x in got[::2])
    encodings = sorted({x.decode() for x in got[1::2]})
    depth = max((len(b.decode().rpartition(":")[2].partition(".")[2]) for b in names), default=0)
    meta = await r.hgetall(k.meta)
    count = int(await r.hget(k.count, "seen"))
    await r.aclose()
    assert count == n, (count, n)
    return {"layout": f"intset buckets, planned for {expect:,} (2^{int(meta[b'sb'])} buckets of {int(meta[b'sl'])})",
            "used": used1 - used0, "usage": usage, "insert_s": insert_s, "again_s": again_s, "keys": len(names),
            "depth": depth, "encodings": encodings}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--expect", type=int, default=None, help="the plan (--expect-urls); default: --urls")
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()
    n = args.urls
    rows = []
    with RedisServer() as rs:
        rows.append(asyncio.run(old_layout(rs.url, n, args.batch)))
    with RedisServer() as rs:
        rows.append(asyncio.run(buckets(rs.url, n, args.batch, args.expect or n)))
    print(f"{n:,} URLs, calls of {args.batch}")
    for row in rows:
        print(f"  {row['layout']}: used_memory {row['used'] / n:.1f} B/URL ({row['used'] / 2**20:.1f} MB), "
              f"MEMORY USAGE {row['usage'] / n:.1f} B/URL; insert {row['insert_s'] / n * 1e6:.2f} us/URL, "
              f"again (all seen) {row['again_s'] / n * 1e6:.2f} us/URL; {row['keys']:,} keys, "
              f"{row['depth']} levels spilled, encodings {','.join(row['encodings'])}")


if __name__ == "__main__":
    main()
