"""A Redis Cluster changing under a crawl: the crawl's slot moved to another master while
two engines crawl (keys half migrated: ASK, TRYAGAIN, MOVED, scripts loaded again on the new
master), and engines killed with kill -9 on a cluster. Each ends with every URL exported
exactly once and no script error. Each test has a cluster of its own: it changes it."""
from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.crc import key_slot
from support.cluster import records_of, run, start, sync_redis, unique
from support.rediscluster import LocalCluster, say
from support.sites import counting_site
from support.wait import wait_for

from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.totals import read_parts_sync

pytestmark = [pytest.mark.redis, pytest.mark.timeout(240)]


@pytest.fixture
def own_cluster() -> Iterator[LocalCluster]:
    c = LocalCluster.start(6, node_timeout=1500)
    yield c
    c.stop()


def _records(r, k: Keys) -> int:
    return records_of(r, k.name)  # summed over the crawl's partitions


def _held(r, k: Keys) -> int:
    """The leases every live process holds, over every partition (held:PROC is a partition's)."""
    procs = [p.decode() for p in r.hkeys(k.procs)]
    pipe = r.pipeline(transaction=False)
    for part in read_parts_sync(r, k.name):
        for proc in procs:
            pipe.scard(part.held(proc))
    return sum(pipe.execute())


def _host_part(r, name: str) -> Keys:
    """The keys of the partition holding the crawl's one host (its queue, state, leases and
    records): where every script of the crawl runs. With one partition, the crawl's own."""
    parts = read_parts_sync(r, name)
    return next(part for part in parts if r.scard(part.hosts))


def _exported_once(url: str, name: str, pages: int, tmp_path: Path) -> None:
    out = tmp_path / f"{name}.jsonl"
    done = run("export", "--redis", url, name, "--jsonl", str(out))
    assert done.returncode == 0, done.stderr
    urls = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    assert len(urls) == len(set(urls)) == pages, (len(urls), len(set(urls)))


def refusals(*ports: int) -> int:
    """The half-moved slot's answers the nodes gave so far (INFO errorstats: ASK from the old
    master, TRYAGAIN from the new; not ERR, which a client's setup commands that Redis 7.0
    does not know bump too)."""
    return sum(int(line.split("count=")[1].split(",")[0]) for port in ports
               for line in say(port, "INFO", "errorstats").splitlines()
               if line.startswith(("errorstat_ASK:", "errorstat_TRYAGAIN:")))


def _clean(err: str) -> None:
    assert "Traceback" not in err and "Script" not in err and "refused a request" not in err, err[-3000:]


def test_the_crawls_slot_moved_to_another_master_and_back_mid_crawl(own_cluster: LocalCluster, rundir,
                                                                      tmp_path) -> None:
    """The slot of the crawl's host (its partition's: the site's one host, so every script
    of the crawl runs there) is moved a key at a time, the engines meeting the half-moved slot
    between every two keys: there with the hosts' own keys first (a script whose declared
    keys are all still on the old master touches a host key already moved), and back with
    them last (a script sent to the new master touches one not moved yet). Then the crawl
    ends by itself, every page recorded once, no script error."""
    c, pages, name = own_cluster, 600, "rs"
    r = sync_redis(c.url)
    k = Keys(name)
    with counting_site(pages, 0.01) as site:
        common = ["--redis", c.url, "--headless", "-c", "3"]
        first = start("crawl", site.url, "--name", name, "--no-sitemaps", "--no-robots", *common)
        wait_for(lambda: _records(r, k) >= 30 or first.poll() is not None, what="the first records")
        part = _host_part(r, name)
        slot = key_slot(part.meta.encode())
        source = r.get_node_from_key(part.meta).port
        target = next(p for p in c.masters() if p != source)
        second = start("join", name, *common)
        wait_for(lambda: r.hlen(k.procs) >= 2 or second.poll() is not None, what="both engines")
        procs = (first, second)

        def engines_meet_it() -> None:  # the engines run into the half-moved slot between two keys
            seen = refusals(source, target)
            wait_for(lambda: refusals(source, target) > seen or any(p.poll() is not None for p in procs),
                     what="an engine refused by a master while the slot is half moved")

        def host_key(key: bytes) -> bool:
            return b":h:" in key or b":hq:" in key

        there = c.move_slot(slot, source, target, batch=4, between=engines_meet_it,
                            order=lambda key: not host_key(key))
        wait_for(lambda: _records(r, k) >= 200 or any(p.poll() is not None for p in procs), what="records again")
        back = c.move_slot(slot, target, source, batch=4, between=engines_meet_it, order=host_key)
        assert there >= 5 and back >= 5
        outs = [p.communicate(timeout=180) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _o, err in outs]
        for _o, err in outs:
            _clean(err)
        assert set(site.stats()["hits"]) == {"/", *(f"/p/{i}" for i in range(1, pages))}
    assert sync_redis(c.url).hget(k.meta, "status") == b"finished"
    assert c.node_of(slot) == source
    _exported_once(c.url, name, pages, tmp_path)


@pytest.fixture
def three_masters() -> Iterator[LocalCluster]:
    c = LocalCluster.start(3, replicas=0)
    yield c
    c.stop()


def test_a_script_on_a_half_moved_slot_stops_before_it_writes(three_masters: LocalCluster) -> None:
    """Why the slot guard: on a half-moved slot, a script sent to the new master (ASKING)
    reads a key not moved yet as missing, and one on the old master fails at a key moved
    already, after its writes. Guarded, it is refused before its first write on both,
    with the answer that the crawl's link takes for an outage."""
    import redis

    from crawltop.core.cluster.link import moving
    from crawltop.core.cluster.scripts import SHEBANG, for_client

    c, k = three_masters, Keys("g")
    slot = key_slot(k.meta.encode())
    source = c.node_of(slot)
    target = next(p for p in c.masters() if p != source)
    src, dst = redis.Redis(port=source), redis.Redis(port=target)
    for key in (k.meta, k.count, k.ready):
        src.set(key, "1")
    assert c.move_slot(slot, source, target, order=lambda key: key != k.count.encode(), limit=1) == 1
    # count is on the new master; meta and ready still on the old one
    body = SHEBANG + "redis.call('SET', KEYS[1], ARGV[2])\nreturn redis.call('GET', ARGV[1])"
    unguarded, guarded = body, for_client(body, cluster=True)

    def on(client: redis.Redis, ask: bool, *commands: tuple) -> object:
        pipe = client.pipeline(transaction=False)
        if ask:
            pipe.execute_command("ASKING")
        for command in commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)[-1]

    try:
        assert on(dst, True, ("EVAL", unguarded, 1, k.count, k.ready, "a")) is None  # ready read as missing
        failed = on(src, False, ("EVAL", unguarded, 1, k.meta, k.count, "a"))  # count moved: fails after its write
        assert isinstance(failed, redis.ResponseError) and moving(failed) and src.get(k.meta) == b"a"
        for client, key, other, ask in ((dst, k.count, k.ready, True), (src, k.meta, k.count, False)):
            answer = on(client, ask, ("EVAL", guarded, 1, key, other, "b"))
            assert isinstance(answer, redis.ResponseError) and moving(answer), answer
        # the guarded ones wrote nothing
        assert src.get(k.meta) == b"a" and on(dst, True, ("GET", k.count)) == b"a"
    finally:
        src.close()
        dst.close()


def test_engines_killed_with_kill_9_on_a_cluster(cluster_six: LocalCluster, rundir, tmp_path) -> None:
    """Both engines of a crawl on six nodes killed with kill -9, one after the other, and a
    third joins: what each held comes back when its lease runs out, and the crawl ends with
    every page recorded exactly once."""
    c, pages, name = cluster_six, 400, unique("k9")
    r = sync_redis(c.url)
    k = Keys(name)
    env = {"CRAWLTOP_LEASE": "3"}
    with counting_site(pages, 0.02) as site:
        common = ["--redis", c.urls()[1], "--headless", "-c", "4"]
        first = start("crawl", site.url, "--name", name, "--no-sitemaps", "--no-robots", *common, env=env)
        wait_for(lambda: _records(r, k) >= 30 or first.poll() is not None, what="the first records")
        second = start("join", name, *common, env=env)
        wait_for(lambda: r.hlen(k.procs) >= 2 or second.poll() is not None, what="both engines")
        for victim in (second, first):
            before = _records(r, k)
            wait_for(lambda v=victim, n=before: _records(r, k) >= n + 40 or v.poll() is not None, what="more records")
            held = _held(r, k)
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()
            assert victim.returncode == -signal.SIGKILL
            if victim is second:
                assert held > 0  # leases held at the kill: the dead one's must come back
        third = start("join", name, *common, env=env)
        _out, err = third.communicate(timeout=180)
        assert third.returncode == 0, err[-2000:]
        _clean(err)
        assert set(site.stats()["hits"]) == {"/", *(f"/p/{i}" for i in range(1, pages))}
    assert r.hget(k.meta, "status") == b"finished"
    _exported_once(c.url, name, pages, tmp_path)
