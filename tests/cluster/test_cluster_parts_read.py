"""A crawl of P > 1 partitions (core/cluster/keys.py) read whole: the monitor's view, `ctl
status`, the dashboard's row and `crawltop export` sum every partition's counts and read
every partition's record stream, each record once, each stream in its order
(core/cluster/totals.py, core/cluster/records.py), on one redis-server and on one-node and
six-node Redis Clusters (where the partitions' hash tags spread over the masters).

The engine does not write partitions yet, so the test does, as an engine will: the control
meta of a real P = 1 crawl (its settings, `parts` = 4 added), and in each partition a
`count` hash, a `rec` stream of that crawl's real Record with other URLs, leases, hosts and a
lost process's held leases."""
from __future__ import annotations

import json
import time

import pytest
import redis
import redis.asyncio as aioredis
from support.cluster import engines, recorded_by, records_of, run, sync_redis, tree, unique

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.records import PAGE, StreamRecords, Tail
from crawltop.core.cluster.view import ClusterView
from crawltop.core.dashboard.shared import RedisCrawl, names

pytestmark = [pytest.mark.redis, pytest.mark.timeout(180)]

PARTS = 4
STREAMS = (300, 7, 0, 41)  # records per partition: one past a page's share of it (PAGE // 4), one none
LEASES = (0, 1, 2, 3)  # URLs in flight per partition
HOSTS = (1, 2, 3, 4)
HELD = {1: 1, 3: 2}  # the lost process's leases: partition -> how many of that partition's it holds
PROC = "gone.example:4242:abcd"


def counts(k: int) -> dict[str, int]:
    """Partition k's count hash: numbers of their own, so a sum that misses one is seen."""
    return {"records": STREAMS[k], "rejected": k, "queued": 10 * k + 1, "retired": k + 2, "over": 3 * k,
            "seen": 100 * k + 50 + STREAMS[k], "ch": 7}


def url_of(site: str, k: int, i: int) -> str:
    return f"{site}part{k}/{i}"


async def a_record(url: str, site: str, base: str) -> tuple[dict[bytes, bytes], dict[str, str]]:
    """A real P = 1 crawl of a small site: one entry of its record stream, and its control meta."""
    members = await engines(url, base, CrawlConfig(roots=(site,), concurrency=2), 1, partitions=1)
    await members[0].crawl()
    r = cluster.client(url)
    try:
        entries = await r.xrange(Keys(base).rec, count=1)
        meta = {k.decode(): v.decode() for k, v in (await r.hgetall(Keys(base).meta)).items()}
    finally:
        await r.aclose()
    assert entries and meta["status"] == "finished"
    return entries[0][1], meta


async def write_parted(r: aioredis.Redis, name: str, site: str, entry: dict[bytes, bytes],
                       meta: dict[str, str]) -> None:
    """Crawl NAME of PARTS partitions, as an engine with partitions writes it."""
    control = Keys(name)
    await r.hset(control.meta, mapping={**meta, "status": "running", "parts": str(PARTS)})
    now_s, now_us = await r.time()
    now = int(now_s) * 1000 + int(now_us) // 1000
    data = json.loads(entry[b"data"])
    for k in range(PARTS):
        part = Keys(name, k)
        await r.hset(part.meta, mapping={"status": "running", "part": str(k), "sb": meta["sb"], "sl": meta["sl"]})
        await r.hset(part.count, mapping=counts(k))
        pipe = r.pipeline(transaction=False)
        for i in range(STREAMS[k]):
            u = url_of(site, k, i)
            pipe.xadd(part.rec, {"url": u, "data": json.dumps({**data, "url": u}), "new": str(i % 3), "proc": f"p{k}"})
        for i in range(LEASES[k]):
            pipe.zadd(part.leases, {f"h{k}.test {json.dumps([url_of(site, k, 1000 + i), 5, 0, 0, '', ''])}":
                                    now + 5000 + 1000 * k + i})
        for i in range(HOSTS[k]):
            pipe.sadd(part.hosts, f"h{k}-{i}.test")
        await pipe.execute()
        if k in HELD:  # the first HELD[k] leases of partition k are the lost process's
            members = await r.zrange(part.leases, 0, HELD[k] - 1)
            await r.sadd(part.held(PROC), *members)
    info = {"host": "gone.example", "pid": 4242, "state": "RUNNING", "workers": 2, "busy": 2, "pages": 9, "rate": 0.0}
    await r.hset(control.procs, PROC, json.dumps(info))
    await r.hset(control.beats, PROC, str(now - 3_600_000))  # silent for an hour: lost


def total(field: str) -> int:
    return sum(counts(k)[field] for k in range(PARTS))


async def test_every_reader_sums_the_partitions(serve, shared_url: str, rundir, tmp_path) -> None:
    site = await serve(tree(3))
    base, name = unique("p1"), unique("parted")
    entry, meta = await a_record(shared_url, site.url, base)
    r = cluster.client(shared_url)
    sync = sync_redis(shared_url)
    try:
        await write_parted(r, name, site.url, entry, meta)

        # the monitor's view: every count summed, the lost process's leases found in each partition
        view = ClusterView(r, name, [site.url])
        await view.read()
        snap = view.stats.snap
        assert len(view.partitions or ()) == PARTS
        assert view.records == total("records") == sum(STREAMS)
        assert (snap.queued, snap.seen, snap.in_flight) == (total("queued"), total("seen"), sum(LEASES))
        assert view.totals["hosts"] == sum(HOSTS)
        assert (view.totals["retired"], view.totals["over"], view.totals["rejected"]) == \
            (total("retired"), total("over"), total("rejected"))
        (row,) = view.processes()
        assert row.lost and row.leases == sum(HELD.values())
        assert row.lease_left is not None and 3.0 < row.lease_left <= 6.0  # partition 1's first: now + 6 s
        await r.hincrby(Keys(name, 2).count, "records", 5)  # a later read reads the partitions again
        await view.read()
        assert view.records == sum(STREAMS) + 5
        await r.hincrby(Keys(name, 2).count, "records", -5)

        # the dashboard's row
        assert name in await names(r) and not any(n.startswith(f"{name}:") for n in await names(r))
        crawl = RedisCrawl(name)
        await crawl.read(r, time.time())
        assert crawl.summary is not None
        assert (crawl.summary.records, crawl.summary.queued) == (sum(STREAMS), total("queued"))
        await crawl.read(r, time.time())  # and again, knowing its partitions
        assert crawl.summary.records == sum(STREAMS)

        # the test helpers read every partition too
        assert records_of(sync, name) == sum(STREAMS)
        assert recorded_by(sync, name) == {f"p{k}": n for k, n in enumerate(STREAMS) if n}

        # `ctl NAME status`, a child process
        status = run("ctl", name, "--redis", shared_url, "status")
        assert status.returncode == 0, status.stderr
        got = json.loads(status.stdout)
        assert (got["records"], got["queued"], got["seen"], got["in_flight"]) == \
            (sum(STREAMS), total("queued"), total("seen"), sum(LEASES))
        assert (got["hosts"], got["hosts_retired"], got["over_budget"], got["partitions"]) == \
            (sum(HOSTS), total("retired"), total("over"), PARTS)
        assert [p["leases"] for p in got["processes"]] == [sum(HELD.values())]

        # `crawltop export`: every partition's records, each once, each partition's in its order
        out = tmp_path / "all.jsonl"
        done = run("export", "--redis", shared_url, name, "--jsonl", str(out))
        assert done.returncode == 0, done.stderr
        assert f"exported {sum(STREAMS)} records" in done.stderr
        urls = [json.loads(line)["url"] for line in out.read_text().splitlines()]
        assert len(urls) == len(set(urls)) == sum(STREAMS)
        for k in range(PARTS):
            assert [u for u in urls if u.startswith(f"{site.url}part{k}/")] == \
                [url_of(site.url, k, i) for i in range(STREAMS[k])]
        first = json.loads(out.read_text().splitlines()[0])
        assert first["status"] == json.loads(entry[b"data"])["status"] and "num_new_urls" in first

        # `export --trim`: each stream trimmed up to what was exported of it
        trimmed = run("export", "--redis", shared_url, name, "--jsonl", str(tmp_path / "again.jsonl"), "--trim")
        assert trimmed.returncode == 0, trimmed.stderr
        assert f"trimmed {sum(STREAMS)} exported records" in trimmed.stderr
        assert [await r.xlen(Keys(name, k).rec) for k in range(PARTS)] == [0] * PARTS

        # a crawl of one partition reads as it always did: the control prefix's own keys
        one = ClusterView(r, base, [site.url])
        await one.read()
        k1 = Keys(base)
        assert one.partitions is not None and [k.prefix for k in one.partitions] == [k1.prefix]
        assert one.records == int(await r.hget(k1.count, "records")) == await r.xlen(k1.rec) > 0
        assert one.stats.snap.seen == int(await r.hget(k1.count, "seen"))
        assert records_of(sync, base) == one.records == sum(recorded_by(sync, base).values())
    finally:
        await r.aclose()
        sync.close()


def test_a_tail_reads_every_partition_once_as_the_streams_grow(redis_url) -> None:
    """The `--processes` parent's tail (cli/gather.py) over partitions: what is new in each
    stream, each record once, each stream in its order, however the partitions grow."""
    r = redis.Redis.from_url(redis_url)
    name = "tailparts"
    r.hset(Keys(name).meta, mapping={"status": "running", "parts": str(PARTS)})
    added = [0] * PARTS

    def add(k: int, n: int) -> None:
        pipe = r.pipeline()
        for i in range(added[k], added[k] + n):
            u = f"http://h{k}.test/{i}"
            pipe.xadd(Keys(name, k).rec, {"url": u, "data": json.dumps({"url": u}), "new": 0, "proc": "p"})
        added[k] += n
        pipe.execute()

    seen: list[dict] = []
    tail = Tail(r, name, None, seen.append)
    assert tail.read() == 0
    add(0, 3)
    add(2, PAGE)  # more than a page's share of one stream
    assert tail.read() == 3 + PAGE // PARTS  # one page: each stream's share
    add(3, 5)
    add(0, 2)
    assert tail.drain() == PAGE - PAGE // PARTS + 7
    assert tail.read() == 0
    urls = [rec["url"] for rec in seen]
    assert len(urls) == len(set(urls)) == sum(added)
    for k in range(PARTS):
        assert [u for u in urls if u.startswith(f"http://h{k}.test/")] == [f"http://h{k}.test/{i}"
                                                                         for i in range(added[k])]
    assert tail.records.count == sum(added)
    def host(u: str) -> str:
        return u.split("/")[2]

    # what `export` reads: the same records, each stream's in its order (a stable sort by stream)
    assert sorted((rec["url"] for rec in StreamRecords(r, name)), key=host) == sorted(urls, key=host)
    r.close()


async def test_a_crawl_the_engines_partitioned_reads_whole(serve, shared_url: str, rundir, tmp_path) -> None:
    """Two real engines on a crawl of 4 partitions: its hosts spread over them, and the view,
    the dashboard, the helpers and `export` all count every record the engines wrote, once."""
    import asyncio

    # six sites on six loopback addresses: hosts whose partitions (CRC-32 of the address) are all four
    hosts = [await serve(tree(6), address=f"127.0.0.{i}") for i in range(1, 7)]
    roots = tuple(h.url for h in hosts)
    name = unique("real")
    members = await engines(shared_url, name, CrawlConfig(roots=roots, concurrency=2), 2, partitions=PARTS)
    await asyncio.gather(*(m.crawl() for m in members))
    r = cluster.client(shared_url)
    sync = sync_redis(shared_url)
    try:
        assert await r.hget(Keys(name).meta, "status") == b"finished"
        lengths = [await r.xlen(Keys(name, k).rec) for k in range(PARTS)]
        written = sum(m.stats.records for m in members)
        assert sum(lengths) == written > 0 and all(lengths), lengths  # records in every partition
        view = ClusterView(r, name, list(roots))
        await view.read()
        assert view.records == written and view.stats.snap.queued == 0 and view.stats.snap.in_flight == 0
        assert view.totals["hosts"] >= len(hosts)
        crawl = RedisCrawl(name)
        await crawl.read(r, time.time())
        assert crawl.summary is not None and crawl.summary.records == written
        assert records_of(sync, name) == written == sum(recorded_by(sync, name).values())
        out = tmp_path / "real.jsonl"
        done = run("export", "--redis", shared_url, name, "--jsonl", str(out))
        assert done.returncode == 0, done.stderr
        urls = [json.loads(line)["url"] for line in out.read_text().splitlines()]
        assert len(urls) == len(set(urls)) == written
        assert {h.url.rstrip("/") + "/" for h in hosts} <= set(urls)
    finally:
        await r.aclose()
        sync.close()
