"""A crawl in partitions (core/cluster/parted.py): spread over a cluster's masters by site,
never finished early whatever the order of link adds, DONEs and finish checks, --max-pages
exact across engines, bad --partitions refused in one line."""
from __future__ import annotations

import asyncio
import json
import random
import time

import pytest
from support.cluster import engines, run, stream_entries, sync_redis, unique
from support.sites import page, slow

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.finish import finished
from crawltop.core.cluster.keys import Keys, encode_item, partition_of
from crawltop.core.cluster.parted import PartedFrontier
from crawltop.core.cluster.seen import fingerprint
from crawltop.core.output.records import Record
from crawltop.core.queueing.frontier import Item

pytestmark = [pytest.mark.redis, pytest.mark.timeout(180)]

HOSTS = 120  # loopback addresses, each its own site (and registered domain)


def address(i: int) -> str:
    return f"127.1.{i // 250}.{i % 250 + 1}"


@pytest.mark.parametrize("cluster_url", ["six"], indirect=True)
async def test_a_many_site_crawl_spreads_its_keys_over_every_master(serve, cluster_url: str) -> None:
    sites = [await serve({"/": page("/a", "/b"), "/a": page("/b"), "/b": page("/")}, address(i))
             for i in range(HOSTS)]
    roots = tuple(s.url + "/" for s in sites)
    name = "spread"  # fixed: its partitions' slots, so their masters, are the same every run
    members = await engines(cluster_url, name, CrawlConfig(roots=roots, concurrency=16, max_tries=1), 2)
    await asyncio.gather(*(m.crawl() for m in members))
    r = sync_redis(cluster_url)
    entries = stream_entries(r, name)
    urls = [e[b"url"].decode() for e in entries]
    assert len(urls) == len(set(urls)) == 3 * HOSTS
    assert set(urls) == {f"{s.url}/{p}" for s in sites for p in ("", "a", "b")}
    meta = r.hgetall(Keys(name).meta)
    parts = int(meta[b"parts"])
    assert parts == 64  # a cluster's default
    used = {partition_of(s.url.removeprefix("http://"), parts) for s in sites}
    assert len(used) > parts / 2  # the sites fill most partitions
    rc = cluster.sync_client(cluster_url)
    shares = []
    for node in rc.get_primaries():
        client = rc.get_redis_connection(node)
        shares.append(sum(1 for _ in client.scan_iter(match="crawltop:{spread:*", count=1000)))
    total = sum(shares)
    assert total > 5 * HOSTS  # host state, queues' traces, seen buckets, counts, streams
    assert all(0.20 <= s / total <= 0.45 for s in shares), shares
    assert len(shares) == 3


@pytest.mark.parametrize("shared_url", ["server", "one"], indirect=True)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_interleavings_never_finish_early(shared_url: str, seed: int) -> None:
    """Three processes take URLs, finish them with links to every partition, and check for
    the end, in a random order, their calls overlapping. Whenever a check says finished,
    nothing may be left: every URL added was finished, none is queued or leased."""
    rnd = random.Random(seed)
    name, base = unique("mix"), "http://h{}.test/p/{}"
    config = CrawlConfig(roots=(base.format(0, 0),))
    r = cluster.client(shared_url)
    await cluster.start(r, shared_url, name, config, partitions=5)
    await r.aclose()
    procs = [cluster.frontier(shared_url, name, config) for _ in range(3)]
    assert all(isinstance(f, PartedFrontier) for f in procs)
    added: set[str] = {config.roots[0]}
    finished: set[str] = set()
    procs[0].add(Item(config.roots[0], 10, 0))
    await procs[0].flush()
    budget = 120  # URLs the crawl may grow to

    async def work(f: PartedFrontier) -> None:
        nonlocal budget
        while not f.finished.is_set():
            try:
                async with asyncio.timeout(0.3):
                    item = await f.pop()
            except TimeoutError:
                continue
            await asyncio.sleep(rnd.random() * 0.01)
            for _ in range(rnd.randint(0, 4) if budget > 0 else 0):
                url = base.format(rnd.randint(0, 30), rnd.randint(0, 5))
                if f.add(Item(url, 10, item.depth + 1)):
                    added.add(url)
                    budget -= 1
            f.sink.write(Record(url=item.url, status=200))
            f.done(item)
            finished.add(item.url)

    async def check(f: PartedFrontier) -> None:
        while not f.finished.is_set():
            await asyncio.sleep(rnd.random() * 0.005)
            f._checked = 0.0
            await f._finish_check()
            if f.finished.is_set():
                # the end, as one process saw it: every URL added anywhere was finished
                assert added <= finished, added - finished

    await asyncio.wait_for(asyncio.gather(*(work(f) for f in procs), check(procs[2])), 120)
    assert added == finished
    shared = stream_entries(sync_redis(shared_url), name)
    assert sorted(e[b"url"].decode() for e in shared) == sorted(finished)  # each once
    for f in procs:
        await f.close()


@pytest.mark.parametrize("shared_url", ["server", "one"], indirect=True)
async def test_max_pages_holds_across_engines_and_partitions(serve, shared_url: str) -> None:
    routes = {"/": page(*[f"/p{i}" for i in range(200)])}
    routes.update({f"/p{i}": page(f"/p{(i * 7) % 200}", f"/q{i}") for i in range(200)})
    routes.update({f"/q{i}": page() for i in range(200)})
    site = await serve(routes)
    name = unique("cap")
    config = CrawlConfig(roots=(site.url,), max_pages=90, concurrency=4)
    members = await engines(shared_url, name, config, 2, partitions=8)
    await asyncio.gather(*(m.crawl() for m in members))
    urls = [e[b"url"].decode() for e in stream_entries(sync_redis(shared_url), name)]
    assert len(urls) == len(set(urls))
    assert 90 - 2 * 6 <= len(urls) <= 90  # never past it; short by at most a block (90 // 16) per engine


def test_bad_partitions_are_refused_in_one_line(redis_url: str) -> None:
    root = "http://127.0.0.1:9/"
    for args, says in [(["--partitions", "0"], "--partitions"),
                       (["--partitions", "x"], "--partitions"),
                       (["--partitions", "20000"], "--partitions")]:
        done = run("crawl", root, "--redis", redis_url, "--name", "bad", "--headless", *args)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    done = run("crawl", root, "--partitions", "4", "--headless")
    assert done.returncode == 2 and "--partitions splits a crawl in Redis" in done.stderr
    done = run("join", "any", "--redis", redis_url, "--partitions", "4")
    assert done.returncode == 2 and "--partitions: that is a crawl-level setting" in done.stderr
    name = unique("fixed")
    r = sync_redis(redis_url)
    made = run("crawl", root, "--redis", redis_url, "--name", name, "--partitions", "4", "--headless",
               "--max-tries", "1", "--timeout", "1")
    assert made.returncode in (0, 1), made.stderr
    assert r.hget(Keys(name).meta, "parts") == b"4"
    again = run("crawl", root, "--redis", redis_url, "--name", name, "--partitions", "8", "--headless",
                "--max-tries", "1", "--timeout", "1")
    assert again.returncode == 2
    assert f"crawl {name!r} exists in Redis with --partitions 4, not 8" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("shared_url", ["server"], indirect=True)
async def test_every_order_of_reads_adds_and_dones_finishes_only_at_the_end(shared_url: str) -> None:
    """The finish check against the scripts, one Redis call at a time: two processes pop a
    URL, add its links to other partitions, then DONE it with its own partition's links; a
    checker reads the partitions one by one (core/cluster/finish.py's two passes). A random
    scheduler picks who makes the next call, for many schedules. Whenever the checker says
    finished, every URL added was done; once all is done, it says so."""
    for seed in range(40):
        await one_schedule(shared_url, seed)


async def one_schedule(url: str, seed: int) -> None:
    """One random schedule of the test above."""
    parts = 3
    rnd = random.Random(seed)
    name = unique("order")
    config = CrawlConfig(roots=("http://h0.test/",))
    r = cluster.client(url)
    await cluster.start(r, url, name, config, partitions=parts)
    f = cluster.frontier(url, name, config)
    assert isinstance(f, PartedFrontier)
    added, done, held, grown = set(), set(), set(), [0]

    def link(u: str) -> tuple[int, list]:
        host = u.split("/")[2]
        return f.part_of(host), [fingerprint(u), host, 0, encode_item(Item(u, 10, 0))]

    async def call(script, p: int, *args) -> list:
        return await script(f.pkeys(p), f.std_args(*args))

    p0, root = link(config.roots[0])
    await call(f._add, p0, *root)
    added.add(config.roots[0])

    async def worker(turn: asyncio.Queue[None]) -> None:
        while True:
            await turn.get()
            queued = [q for q in range(parts) if any(link(u)[0] == q for u in added - done - held)]
            p = rnd.choice(queued or range(parts))
            out = (await call(f._pop, p, 1, 60_000, 0))[0]
            if not out:
                continue
            member = out[0].decode()
            url = json.loads(member.split(" ", 1)[1])[0]
            held.add(url)
            mine, others = [], {}
            # mostly one link, mostly to another partition: one URL outstanding at a
            # time, the moment a check that reads partitions one by one could misread
            for _ in range(rnd.choice((0, 1, 1, 1, 2)) if grown[0] < 40 else 0):
                new = f"http://h{rnd.randrange(9)}.test/{grown[0]}"
                q, args = link(new)
                if new not in added:
                    grown[0] += 1
                added.add(new)
                (mine if q == p else others.setdefault(q, [])).extend(args)
            for q, args in others.items():  # links to other partitions first, a call each
                await turn.get()
                await call(f._add, q, *args)
            await turn.get()
            await call(f._done, p, 0, member, url, json.dumps({"url": url}), "", 0, 0, len(mine) // 4, *mine)
            done.add(url)

    async def checker(turn: asyncio.Queue[None]) -> bool:
        async def read() -> list[tuple[int, int, int]]:
            state = []
            for k in f.parts:  # one partition a turn: the others move in between
                await turn.get()
                q, n, c = await f._empty([k.count, k.leases], [])
                state.append((int(q), int(n), int(c)))
            return state
        while True:
            if await finished(read):
                assert added == done, (seed, added - done)
                return True

    turns = [asyncio.Queue(), asyncio.Queue(), asyncio.Queue()]
    tasks = [asyncio.ensure_future(worker(turns[0])), asyncio.ensure_future(worker(turns[1])),
             asyncio.ensure_future(checker(turns[2]))]
    steps = 0
    while not tasks[2].done() and steps < 20_000:
        turns[rnd.randrange(3)].put_nowait(None)
        await asyncio.sleep(0)
        await asyncio.sleep(0.0002)  # the chosen one's call lands before the next pick
        steps += 1
    for t in tasks[:2]:
        t.cancel()
    assert tasks[2].done() and tasks[2].result() is True, f"seed {seed}: never finished ({len(done)} done)"
    assert added == done
    await f.close()
    await r.aclose()


async def test_a_dead_master_stops_only_its_own_partitions(serve) -> None:
    """Three masters, no replicas, full coverage not required (so the survivors still
    serve): one master dies for good mid-crawl. Every page of the sites whose partitions
    live on the other two is still crawled and recorded once, but one: a page that links to
    a site on the dead master waits with its link (its record would otherwise say its links
    were queued), and holds up no other; the engines say how many partitions wait, and on
    which node; the dead master's sites simply wait."""
    from redis.crc import key_slot
    from support.rediscluster import LocalCluster, say

    c = LocalCluster.start(3, replicas=0, node_timeout=1000)
    try:
        for port in c.ports:
            assert "OK" in say(port, "CONFIG", "SET", "cluster-require-full-coverage", "no")
        name, parts, n = "iso", 16, 24
        master_of = {p: c.node_of(key_slot(Keys(name, p).meta.encode())) for p in range(parts)}
        control = c.node_of(key_slot(Keys(name).meta.encode()))
        victim = next(port for port in c.ports if port != control and port in master_of.values())
        sites = [await serve({"/": page(*[f"/p{j}" for j in range(8)]),
                              **{f"/p{j}": slow(0.05 if k % 2 else 0.3) for j in range(8)}}, address(k))
                 for k in range(n)]
        on_victim = {s.url for s in sites if master_of[partition_of(s.url.removeprefix("http://"), parts)] == victim}
        assert on_victim and len(on_victim) < n  # (the fixed name puts sites on both sides)
        linker = next(s for s in sites if s.url not in on_victim)
        far = min(on_victim)
        linker.routes["/p7"] = slow(3.0, page(far + "/far"))  # late: it asks for the dead master after the kill
        config = CrawlConfig(roots=tuple(s.url + "/" for s in sites), concurrency=8)
        members = await engines(c.url, name, config, 2, partitions=parts)
        running = asyncio.gather(*(m.crawl() for m in members))
        r = sync_redis(c.url)

        def recorded() -> set[str]:
            return {e[b"url"].decode() for e in stream_entries(r, name)}

        await until_true(lambda: len(recorded()) >= 20, 60)
        c.procs[c.ports.index(victim)].kill()
        c.procs[c.ports.index(victim)].wait()
        live = {f"{s.url}/{p}" for s in sites if s.url not in on_victim for p in ["", *(f"p{j}" for j in range(8))]}
        live.discard(linker.url + "/p7")
        await until_true(lambda: live <= recorded_live(r, name, master_of, victim), 90)
        await until_true(lambda: linker.hits.get("/p7", 0) >= 1, 60)
        await asyncio.sleep(4.5)  # its 3 s answer, and time for its DONE, had it not waited
        assert linker.url + "/p7" not in recorded_live(r, name, master_of, victim)
        assert linker.hits.get("/p7") == 1  # fetched, and waiting for its link's partition
        urls = [e[b"url"].decode() for e in stream_entries_live(r, name, master_of, victim)]
        assert len(urls) == len(set(urls))  # each once
        notices = [m.engine.stats.notice for m in members]
        # only the dead master's partitions wait: its failures never fail the calls in flight
        # on the others (redis-py's cluster client closes every node's connections on one's)
        waiting = f"{list(master_of.values()).count(victim)} partitions waiting (127.0.0.1:{victim} unreachable)"
        assert any(waiting in x for x in notices), (waiting, notices)
        for m in members:
            m.stop()
        await asyncio.wait_for(running, 60)
    finally:
        c.stop()


def stream_entries_live(r, name: str, master_of: dict[int, int], dead: int) -> list[dict]:
    """The record streams of the partitions on masters still alive."""
    return [fields for p, port in master_of.items() if port != dead
            for _id, fields in r.xrange(Keys(name, p).rec)]


def recorded_live(r, name: str, master_of: dict[int, int], dead: int) -> set[str]:
    return {e[b"url"].decode() for e in stream_entries_live(r, name, master_of, dead)}


async def until_true(cond, timeout: float) -> None:
    from support.wait import wait_until

    await wait_until(cond, timeout, interval=0.2)


async def test_a_node_failing_never_fails_the_calls_in_flight_on_another() -> None:
    """One batch over two masters: the dead one's calls fail at once, the live one's (a
    script busy for 0.3 s) still answer. redis-py's cluster client closes every node's
    connections when one fails, which failed the live calls too (core/cluster/nodecalls.py)."""
    from redis.crc import key_slot
    from support.rediscluster import LocalCluster

    from crawltop.core.cluster.nodecalls import NodeClients, by_node, is_outage

    c = LocalCluster.start(3, replicas=0, node_timeout=60_000)
    r = cluster.client(c.url)
    nodes = NodeClients(r)
    try:
        tag = {c.node_of(key_slot(f"{{t{i}}}".encode())): f"{{t{i}}}" for i in range(50)}
        live, dead = c.ports[:2]
        busy = r.register_script("local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] "
                              "repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - s > 300000 "
                              "return redis.call('INCR', KEYS[1])")
        await by_node(nodes, [(busy, [tag[live] + "n"], []), (busy, [tag[dead] + "n"], [])], 5)  # (loaded, connected)
        c.procs[1].kill()
        c.procs[1].wait()
        for attempt in range(3):
            replies, _ = await by_node(nodes, [(busy, [tag[live] + "n"], []), (busy, [tag[dead] + "n"], [])], 5)
            assert replies[0] == attempt + 2, replies  # the live master answered, each time
            assert isinstance(replies[1], BaseException) and is_outage(replies[1]), replies
    finally:
        await nodes.aclose()
        await r.aclose()
        c.stop()


@pytest.mark.parametrize("shared_url", ["server"], indirect=True)
async def test_news_of_a_host_due_sooner_reaches_every_process_without_a_probe(shared_url: str) -> None:
    """A process asks a partition only when the last reply it had from there said a host
    comes due. Another process's ADD that brings the first due host forward rings "LANE:MS"
    for everyone, and the listener moves its due time forward; an ADD that changes nothing
    of the kind rings nothing."""
    name, parts = unique("soon"), 4
    config = CrawlConfig(roots=("http://h0.test/",))
    r = cluster.client(shared_url)
    await cluster.start(r, shared_url, name, config, partitions=parts)
    a, b = cluster.frontier(shared_url, name, config), cluster.frontier(shared_url, name, config)
    assert isinstance(a, PartedFrontier) and isinstance(b, PartedFrontier)
    hosts = [h for h in (f"h{i}.test" for i in range(100)) if b.part_of(h) == 1][:2]
    pubsub = r.pubsub()
    await pubsub.subscribe(Keys(name, 1).bell)
    await pubsub.get_message(timeout=1)  # (the subscription's own)
    listening = asyncio.ensure_future(a._listen())
    try:
        await asyncio.sleep(0.3)  # a's subscription is in place
        a._wakes[0][1] = -1.0  # what a knows: nothing there could come due
        reply = await b._add(b.pkeys(1), b.std_args(fingerprint(f"http://{hosts[0]}/"), hosts[0], 0,
                                                     encode_item(Item(f"http://{hosts[0]}/", 10, 0))))
        assert (int(reply[4]), int(reply[5])) == (0, -1)  # the ADD's own reply: due now in lane 0, none in 1
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=2)
        assert message is not None and message["data"] == b"0:0", message
        for _ in range(100):
            if 0 <= a._wakes[0].get(1, -1.0) <= time.monotonic():
                break
            await asyncio.sleep(0.02)
        assert 0 <= a._wakes[0][1] <= time.monotonic(), a._wakes[0]
        await b._add(b.pkeys(1), b.std_args(fingerprint(f"http://{hosts[1]}/"), hosts[1], 0,
                                            encode_item(Item(f"http://{hosts[1]}/", 10, 0))))
        assert await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5) is None  # due already
    finally:
        listening.cancel()
        await pubsub.aclose()
        for f in (a, b):
            await f.close()
        await r.aclose()


@pytest.mark.parametrize("shared_url", ["server"], indirect=True)
async def test_a_reply_older_than_a_ring_only_brings_a_partition_sooner(shared_url: str) -> None:
    """An ADD's or DONE's reply says when its partition comes due; a ring heard while the call
    was on its way may be newer, and then the reply may only bring the due time sooner."""
    name = unique("race")
    config = CrawlConfig(roots=("http://h0.test/",))
    r = cluster.client(shared_url)
    await cluster.start(r, shared_url, name, config, partitions=4)
    f = cluster.frontier(shared_url, name, config)
    assert isinstance(f, PartedFrontier)
    try:
        now = time.monotonic()
        f._wakes[0][2] = now + 0.1  # a ring said: soon
        before = f._rung.get(2, 0)
        f._rung[2] = before + 1  # (that ring came while the call was on its way)
        f._changed(2, [5000, 3000], before)
        assert f._wakes[0][2] == pytest.approx(now + 0.1, abs=0.05)  # not put off by the older reply
        assert 2 not in f._wakes[1]  # rung, unknown: probed anyway
        f._changed(2, [0, -1], before)
        assert f._wakes[0][2] <= time.monotonic()  # sooner: taken
        f._changed(2, [5000, -1], f._rung[2])  # no ring since the call: the reply is the news
        assert f._wakes[0][2] == pytest.approx(time.monotonic() + 5, abs=0.5) and f._wakes[1][2] == -1.0
        f._changed(2, [1, 2, 3, 4], f._rung[2])  # not a partition's reply: asked again
        assert 2 not in f._wakes[0] and 2 not in f._wakes[1]
    finally:
        await f.close()
        await r.aclose()
