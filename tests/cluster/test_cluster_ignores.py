"""A live ignore on the Redis frontier takes every URL that is queued as far as the crawler
knows, as MemoryFrontier's does (core/queueing/hosts.py remove_if): the links this process
added that have not reached Redis yet, and the URLs waiting out a back-off of their own
(`later`), not only what its hosts' queues hold; and every engine has a new pattern as soon
as the bell tells it, not a beat later. The crawl-wide test (engines, held pages) is
test_cluster_frontier.py's test_an_ignore_holds_for_the_whole_crawl."""
from __future__ import annotations

import asyncio
import json

import pytest
from support.cluster import engines, unique
from support.wait import wait_until, wait_value

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.bell import is_cluster
from crawltop.core.cluster.keys import Keys
from crawltop.core.errors import Ignored
from crawltop.core.output.records import Record
from crawltop.core.queueing.frontier import Item

pytestmark = pytest.mark.timeout(60)

BASE = "http://127.0.0.1:1/"  # never fetched: these tests drive the frontier by hand


def ignored(item: Item) -> Record:
    record = Record(url=item.url, depth=item.depth, tries=item.tries)
    record.fail(Ignored("/m"))
    return record


async def recorded(r, k: Keys) -> dict[str, str]:
    return {f[b"url"].decode(): json.loads(f[b"data"])["error_kind"] for _id, f in await r.xrange(k.rec)}


async def test_the_links_still_on_their_way_are_taken(redis_url):
    """add() said yes to them, so they are queued: links waiting to be batched (an ADD
    50 ms later) and links riding with a page's DONE not sent yet. A scan of Redis alone
    finds neither, and they would be fetched despite the ignore."""
    config = CrawlConfig(roots=(BASE,))
    r = cluster.client(redis_url)
    await cluster.start(r, redis_url, "way", config)
    k = Keys("way")
    f = cluster.frontier(redis_url, "way", config)
    f.add(Item(BASE, 10, 0))
    await f.flush()
    root = await f.pop()
    for i in range(3):  # found on the root page: they go with its DONE
        f.add(Item(f"{BASE}m{i}", 10, 1))
        f.add(Item(f"{BASE}k{i}", 10, 1))
    f.sink.write(Record(url=root.url, status=200))
    f.done(root)
    for i in range(3, 6):  # found elsewhere (seeds, sitemaps): they wait for an ADD
        f.add(Item(f"{BASE}m{i}", 10, 1))
        f.add(Item(f"{BASE}k{i}", 10, 1))
    # no await between the adds and the call: nothing of theirs can have reached Redis
    removed = await f.remove_matching(lambda url: "/m" in url)
    assert sorted(x.url for x in removed) == [f"{BASE}m{i}" for i in range(6)]
    host = f.hosts.key(BASE)
    assert sorted(json.loads(x)[0] for x in await r.lrange(k.hq(host), 0, -1)) == [f"{BASE}k{i}" for i in range(6)]
    assert int(await r.hget(k.count, "queued")) == 6 and await r.zcard(k.leases) == 6
    assert int(await r.hget(k.count, "seen")) == 13  # every one of them is seen: never queued again
    for item in removed:
        f.sink.write(ignored(item))
        f.done(item)
    await f.flush()
    assert await recorded(r, k) == {BASE: None, **{f"{BASE}m{i}": "ignored" for i in range(6)}}
    assert await r.zcard(k.leases) == 0 and int(await r.hget(k.count, "queued")) == 6
    assert await f.remove_matching(lambda url: "/m" in url) == []  # taken once
    await f.close()
    await r.aclose()


async def test_a_url_waiting_out_its_back_off_is_taken(redis_url):
    """A URL given back with a back-off of its own (a retry after Retry-After) waits in
    `later`, not in its host's queue; it is queued all the same, so an ignore takes it."""
    config = CrawlConfig(roots=(BASE,))
    r = cluster.client(redis_url)
    await cluster.start(r, redis_url, "later", config)
    k = Keys("later")
    f = cluster.frontier(redis_url, "later", config)
    f.add(Item(f"{BASE}m1", 10, 0))
    f.add(Item(f"{BASE}k1", 10, 0))
    await f.flush()
    first = await f.pop()
    assert first.url == f"{BASE}m1"
    f.requeue(first, after=600.0)  # far in the future: it stays in `later` for the whole test
    f.done(first)
    await f.flush()
    assert await r.zcard(k.later) == 1 and int(await r.hget(k.count, "queued")) == 2
    removed = await f.remove_matching(lambda url: "/m" in url)
    assert [x.url for x in removed] == [f"{BASE}m1"]
    assert await r.zcard(k.later) == 0 and int(await r.hget(k.count, "queued")) == 1
    f.sink.write(ignored(removed[0]))
    f.done(removed[0])
    await f.flush()
    assert await recorded(r, k) == {f"{BASE}m1": "ignored"}
    assert await r.zcard(k.leases) == 0
    assert [json.loads(x)[0] for x in await r.lrange(k.hq(f.hosts.key(BASE)), 0, -1)] == [f"{BASE}k1"]
    await f.close()
    await r.aclose()


async def subscribers(r, channel: str) -> int:
    """Listeners on the crawl's bell: a sharded channel's on a cluster (core/cluster/bell.py)."""
    if is_cluster(r):
        await r.initialize()
        got = await r.execute_command("PUBSUB SHARDNUMSUB", channel, target_nodes=r.get_node_from_key(channel))
    else:
        got = await r.pubsub_numsub(channel)
    return int(dict(got if isinstance(got[0], tuple) else zip(got[::2], got[1::2], strict=True))[channel.encode()])


@pytest.mark.redis
async def test_the_bell_brings_an_ignore_to_every_engine_at_once(shared_url):
    """No beat runs here (the engines are not crawling): the bell alone brings a pattern
    added in one engine to the other, and its removal back. Waiting for the other's next
    beat (a second) would let it queue, and anyone fetch, the links that match meanwhile."""
    config = CrawlConfig(roots=(BASE,), concurrency=1)
    redis_url, name = shared_url, unique("ring")
    one, other = await engines(redis_url, name, config, 2)
    k = Keys(name)
    r = cluster.client(redis_url)
    one.frontier.add(Item(BASE, 10, 0))
    await one.frontier.flush()
    root = await one.frontier.pop()  # leased: the crawl is not over while the test looks
    waiting = asyncio.ensure_future(other.frontier.pop())  # nothing queued: it waits, and listens
    await wait_value(lambda: subscribers(r, k.bell), lambda v: v == 2, interval=0.01)
    assert (await one.add_ignore(r"/m\d+$")).ok
    await wait_until(lambda: r"/m\d+$" in other.ignore_rules, what="the other engine's ignore")
    assert other.remove_ignore(r"/m\d+$")
    await wait_until(lambda: r"/m\d+$" not in one.ignore_rules, what="the removal in the first engine")
    assert await r.hkeys(k.ignores) == [] and not waiting.done()
    one.frontier.sink.write(Record(url=root.url, status=200))
    one.frontier.done(root)
    await one.frontier.flush()
    # the last DONE leaves nothing anywhere: the other engine, still waiting, has the crawl
    # finished (one partition: that DONE said so; several: the waiting engine's finish check
    # found every partition empty twice)
    await asyncio.wait_for(other.frontier.finished.wait(), 10)
    assert (await r.hget(k.meta, "status")) == b"finished"
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    for m in (one, other):
        await m.frontier.close()
    await r.aclose()
