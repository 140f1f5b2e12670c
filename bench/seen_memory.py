"""What the seen set of a shared crawl costs Redis: the previous layout (one set of 8-byte
strings) against the intset buckets of core/cluster/seen.py, on a private redis-server; and
with --partitions P, the same buckets of a crawl in P partitions on a Redis Cluster of three
masters (bench/redis_cluster.py's), each partition's seen set planned for expect/P URLs.

    .venv/bin/python bench/seen_memory.py                      # 1,000,000 URLs, planned for
    .venv/bin/python bench/seen_memory.py --expect 100000      # 10x past the plan
    .venv/bin/python bench/seen_memory.py --urls 200000 --batch 500
    .venv/bin/python bench/seen_memory.py --partitions 64      # and on a 3-master cluster, P = 64

The URLs are spread over 100,000 sites of their own registered domain (www.siteNNNNNN.com),
so a partitioned crawl spreads them over its partitions as it would a crawl's hosts
(keys.partition_of hashes the registered domain).

For each layout, on a fresh server (the cluster: per master, then summed): `INFO memory`
used_memory before and after inserting --urls fingerprints (web-like URLs), and MEMORY
USAGE summed over the keys (SAMPLES 0: every element); insert time per URL (calls of
--batch fingerprints: SADD in a pipeline for the old layout, the SEEN_ADD script for the
new one, as ADD's links reach it; on the cluster the partitions' calls at once); the time of
a second pass (all seen); and for the buckets, how many there are, how deep they spilled,
and that every one is still an intset.
"""
from __future__ import annotations

import argparse
import asyncio
import time
from hashlib import blake2b

from common import RedisServer
from redis_cluster import Redises

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster import scripts
from crawltop.core.cluster.keys import Keys, partition_of, partitions
from crawltop.core.cluster.seen import fingerprint


def url_of(i: int) -> str:
    return f"https://{host_of(i)}/articles/2026/{i // 100_000:05d}-a-page-title.html"


def host_of(i: int) -> str:
    return f"www.site{i % 100_000:06d}.com"


async def old_layout(url: str, n: int, batch: int) -> dict:
    """Every fingerprint SADDed to one set as 8 bytes (blake2b-64): the layout before the buckets."""
    r = cluster.client(url)
    key = "crawltop:{old}:seen"
    used0 = _mem(await r.info("memory"))
    t0 = time.perf_counter()
    for at in range(0, n, batch):
        await r.sadd(key, *(blake2b(url_of(i).encode(), digest_size=8).digest() for i in range(at, min(n, at + batch))))
    insert_s = time.perf_counter() - t0
    used1 = _mem(await r.info("memory"))
    t0 = time.perf_counter()
    for at in range(0, n, batch):
        await r.sadd(key, *(blake2b(url_of(i).encode(), digest_size=8).digest() for i in range(at, min(n, at + batch))))
    again_s = time.perf_counter() - t0
    usage = int(await r.memory_usage(key, samples=0) or 0)
    await r.aclose()
    return {"layout": "one set of 8-byte strings", "used": used1[0] - used0[0], "net": used1[1] - used0[1],
            "usage": usage, "insert_s": insert_s,
            "again_s": again_s, "keys": 1, "depth": 0, "encodings": ["hashtable"]}


async def buckets(url: str, n: int, batch: int, expect: int) -> dict:
    """Through SEEN_ADD on a crawl planned for `expect` URLs (core/cluster/seen.py)."""
    r = cluster.client(url)
    await cluster.start(r, url, "new", CrawlConfig(roots=("http://127.0.0.1:1/",)), expect_urls=expect)
    k = Keys("new")
    add = r.register_script(scripts.SEEN_ADD)
    keys = [k.meta, k.count, k.seen]
    used0 = _mem(await r.info("memory"))
    t0 = time.perf_counter()
    for at in range(0, n, batch):
        await add(keys, [0, *(fingerprint(url_of(i)) for i in range(at, min(n, at + batch)))])
    insert_s = time.perf_counter() - t0
    used1 = _mem(await r.info("memory"))
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
            "used": used1[0] - used0[0], "net": used1[1] - used0[1], "usage": usage, "insert_s": insert_s,
            "again_s": again_s, "keys": len(names),
            "depth": depth, "encodings": encodings}


async def parted(rs: Redises, n: int, batch: int, expect: int, parts: int) -> dict:
    """Through SEEN_ADD on a crawl of `parts` partitions on a Redis Cluster, planned for
    `expect` URLs (each partition for expect/parts): each URL to its host's partition, a
    call of the fingerprints of one partition at a time, the partitions' calls at once."""
    r = cluster.client(rs.url)
    await cluster.start(r, rs.url, "new", CrawlConfig(roots=("http://127.0.0.1:1/",)), expect_urls=expect,
                        partitions=parts)
    ks = partitions("new", parts)
    add = r.register_script(scripts.for_client(scripts.SEEN_ADD, True))
    part = [partition_of(host_of(i), parts) for i in range(min(n, 100_000))]

    def used() -> list[tuple[int, int]]:
        out = []
        for port in rs.ports:
            with rs._client(port) as c:
                out.append(_mem(c.info("memory")))
        return out

    async def one_pass() -> list[int]:
        got: list[int] = []
        step = batch * parts
        for at in range(0, n, step):
            by: dict[int, list[str]] = {}
            for i in range(at, min(n, at + step)):
                by.setdefault(part[i % 100_000], []).append(fingerprint(url_of(i)))
            for reply in await asyncio.gather(*(add([ks[p].meta, ks[p].count, ks[p].seen], [0, *fps])
                                                for p, fps in by.items())):
                got.extend(int(x) for x in reply)
        return got

    used0 = used()
    t0 = time.perf_counter()
    first = await one_pass()
    insert_s = time.perf_counter() - t0
    used1 = used()
    t0 = time.perf_counter()
    again = await one_pass()
    again_s = time.perf_counter() - t0
    assert sum(first) == n and not any(again), (sum(first), sum(again))
    nodes = []
    for port in rs.ports:
        with rs._client(port) as c:
            names = list(c.scan_iter(match="crawltop:{new:*}:seen:*", count=10_000))
            pipe = c.pipeline(transaction=False)
            for b in names:
                pipe.memory_usage(b, samples=0)
                pipe.object("encoding", b)
            got = pipe.execute()
            held = {int(b.decode().split("}")[0].rpartition(":")[2]) for b in names}
            nodes.append({"port": port, "keys": len(names), "parts": len(held), "held": held,
                          "usage": sum(int(x or 0) for x in got[::2]),
                          "encodings": sorted({x.decode() if isinstance(x, bytes) else str(x) for x in got[1::2]}),
                          "depth": max((len(b.decode().rpartition(":")[2].partition(".")[2]) for b in names),
                                       default=0)})
    counts = [int(await r.hget(k.count, "seen") or 0) for k in ks]
    meta = await r.hgetall(ks[0].meta)
    await r.aclose()
    assert sum(counts) == n, (sum(counts), n)
    for node, u0, u1 in zip(nodes, used0, used1, strict=True):
        node["used"], node["net"] = u1[0] - u0[0], u1[1] - u0[1]
        node["urls"] = sum(counts[k] for k in node.pop("held"))
    return {"layout": f"intset buckets, {parts} partitions on {len(rs.ports)} masters, each planned for "
                      f"{expect // parts:,} (2^{int(meta[b'sb'])} buckets of {int(meta[b'sl'])})",
            "used": sum(x["used"] for x in nodes), "net": sum(x["net"] for x in nodes),
            "usage": sum(x["usage"] for x in nodes), "insert_s": insert_s,
            "again_s": again_s, "keys": sum(x["keys"] for x in nodes), "depth": max(x["depth"] for x in nodes),
            "encodings": sorted({e for x in nodes for e in x["encodings"]}), "nodes": nodes,
            "urls_per_part": (min(counts), max(counts))}


def _mem(info: dict) -> tuple[int, int]:
    """used_memory, and used_memory less the clients' buffers (mem_clients_normal): a
    cluster client's many connections hold megabytes of buffers that are not the set's."""
    used = int(info["used_memory"])
    return used, used - int(info.get("mem_clients_normal", 0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--expect", type=int, default=None, help="the plan (--expect-urls); default: --urls")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=0,
                    help="also a crawl in P partitions on a 3-master Redis Cluster (0: not)")
    args = ap.parse_args()
    n = args.urls
    rows = []
    with RedisServer() as rs:
        rows.append(asyncio.run(old_layout(rs.url, n, args.batch)))
    with RedisServer() as rs:
        rows.append(asyncio.run(buckets(rs.url, n, args.batch, args.expect or n)))
    if args.partitions > 1:
        with Redises(cluster=True) as rc:
            rows.append(asyncio.run(parted(rc, n, args.batch, args.expect or n, args.partitions)))
    print(f"{n:,} URLs, calls of {args.batch}")
    for row in rows:
        print(f"  {row['layout']}: used_memory {row['used'] / n:.1f} B/URL ({row['used'] / 2**20:.1f} MB; "
              f"{row['net'] / n:.1f} B/URL less the clients' buffers), "
              f"MEMORY USAGE {row['usage'] / n:.1f} B/URL; insert {row['insert_s'] / n * 1e6:.2f} us/URL, "
              f"again (all seen) {row['again_s'] / n * 1e6:.2f} us/URL; {row['keys']:,} keys, "
              f"{row['depth']} levels spilled, encodings {','.join(row['encodings'])}")
        for node in row.get("nodes", []):
            print(f"    master :{node['port']}: {node['parts']} partitions, {node['urls']:,} URLs, used_memory "
                  f"{node['used'] / 2**20:.1f} MB ({node['used'] / max(1, node['urls']):.1f} B/URL; "
                  f"{node['net'] / max(1, node['urls']):.1f} less the clients'), MEMORY USAGE "
                  f"{node['usage'] / max(1, node['urls']):.1f} B/URL, {node['keys']:,} keys")
        if "urls_per_part" in row:
            print(f"    URLs per partition: {row['urls_per_part'][0]:,} to {row['urls_per_part'][1]:,}")


if __name__ == "__main__":
    main()
