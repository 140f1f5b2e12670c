"""The seen set in Redis (core/cluster/seen.py): exact, in buckets that stay intsets. Ten
times the URLs a crawl planned for: every bucket still an intset, every URL found, none
lost, none counted twice; the plan is the crawl's own; a crawl of the previous layout is
refused in one line."""
from __future__ import annotations

import pytest
from support.cluster import run, sync_redis, unique

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster import scripts
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.seen import fingerprint, plan
from crawltop.core.errors import UsageError

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

PLANNED = 2_000


@pytest.mark.parametrize("shared_url", ["server", "six"], indirect=True)
async def test_ten_times_the_plan_stays_intsets_and_loses_nothing(shared_url: str) -> None:
    name = unique("seen")
    k = Keys(name)
    r = cluster.client(shared_url)
    await cluster.start(r, shared_url, name, CrawlConfig(roots=("http://127.0.0.1:1/",)), expect_urls=PLANNED)
    meta = await r.hgetall(k.meta)
    limit = int(meta[b"sl"])
    assert limit == 512 and int(meta[b"sb"]) == plan(PLANNED, limit) == 3  # 8 buckets of 250 planned
    add = r.register_script(scripts.for_client(scripts.SEEN_ADD, cluster.cluster_node(shared_url)))
    has = r.register_script(scripts.for_client(scripts.SEEN_HAS, cluster.cluster_node(shared_url)))
    keys = [k.meta, k.count, k.seen]
    fps = [fingerprint(f"http://h{i % 97}.test/p/{i}") for i in range(10 * PLANNED)]
    for at in range(0, len(fps), 1000):
        assert set(await add(keys, [0, *fps[at:at + 1000]])) == {1}  # every one new
    for at in range(0, len(fps), 1000):
        assert set(await add(keys, [0, *fps[at:at + 1000]])) == {0}  # every one found: seen
    assert int(await r.hget(k.count, "seen")) == len(fps)
    buckets = [key async for key in r.scan_iter(match=f"crawltop:{{{name}}}:seen:*", count=1000)]
    assert {await r.object("encoding", b) for b in buckets} == {b"intset"}
    assert max([await r.scard(b) for b in buckets]) <= limit
    members: list[bytes] = []
    for b in buckets:
        members += await r.smembers(b)
    assert len(members) == len(set(members)) == len(fps)  # each one once, in one bucket
    assert {m.decode() for m in members} == set(fps)
    assert any(b"." in b for b in buckets)  # past the plan, buckets spilled a level down
    assert all([await has(keys, [fp]) for fp in fps[::97]])
    assert not any([await has(keys, [fingerprint(f"http://other.test/{i}")]) for i in range(200)])
    await r.aclose()


async def test_the_plan_is_the_crawls_and_a_different_one_is_refused(redis_url: str) -> None:
    r = cluster.client(redis_url)
    config = CrawlConfig(roots=("http://127.0.0.1:1/",))
    await cluster.start(r, redis_url, "plan", config)
    assert (await r.hget(Keys("plan").meta, "expect")) == b"1000000"
    assert (await cluster.start(r, redis_url, "plan", config))[0] is False  # not given: the crawl's own
    with pytest.raises(UsageError, match="planned for --expect-urls 1000000, not 5000"):
        await cluster.start(r, redis_url, "plan", config, expect_urls=5000)
    await r.aclose()


def test_a_crawl_of_the_previous_layout_is_refused_in_one_line(redis_url: str) -> None:
    r = sync_redis(redis_url)
    r.hset(Keys("old").meta, mapping={"magic": "crawltop-cluster/2", "config": "{}", "roots": "[]"})
    for argv in (("crawl", "http://127.0.0.1:9/", "--name", "old"), ("join", "old")):
        done = run(*argv, "--redis", redis_url, timeout=60)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert "older crawltop's format" in lines[0] and "export" in lines[0], lines[0]


def test_expect_urls_goes_with_a_shared_crawl_only() -> None:
    done = run("crawl", "http://127.0.0.1:9/", "--expect-urls", "5000", "--headless", timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "--expect-urls" in lines[0] and "--redis" in lines[0], lines[0]
