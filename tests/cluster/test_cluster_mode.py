"""A crawl on a Redis Cluster, as operators run it: `--redis` of any one node, and crawltop
finds the cluster and every master by itself (crawl, join, ctl, export, on a one-node
cluster and on three masters with three replicas). A cluster it cannot use is refused in
one line, exit 2: slots nobody serves, a master that does not answer."""
from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from support.cluster import recorded_by, records_of, run, start, sync_redis
from support.rediscluster import SLOTS, LocalCluster, say
from support.sites import counting_site
from support.wait import wait_for, wait_until

from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.defaults import DEFAULT_CLUSTER_PARTITIONS
from crawltop.core.cluster.keys import Keys, partition_of, partitions
from crawltop.core.cluster.link import Link
from crawltop.core.cluster.totals import read_parts_sync

pytestmark = [pytest.mark.redis, pytest.mark.timeout(180)]


def test_crawl_join_ctl_export_on_a_cluster(cluster_url: str, rundir, tmp_path) -> None:
    """Two processes on one crawl through one node's URL: paused and resumed with ctl, every
    page recorded once (the export), both processes at work, the crawl finished."""
    pages, name = 400, f"c{abs(hash(cluster_url)) % 10_000}"
    r = sync_redis(cluster_url)
    k = Keys(name)
    with counting_site(pages, 0.005) as site:
        common = ["--redis", cluster_url, "--headless", "-c", "3"]
        first = start("crawl", site.url, "--name", name, "--no-sitemaps", "--no-robots", *common)
        wait_for(lambda: records_of(r, name) >= 5 or first.poll() is not None,
                 what="the first records")
        second = start("join", name, *common)
        assert run("ctl", name, "--redis", cluster_url, "pause").returncode == 0
        assert r.hget(k.ctl, "paused") == b"1"
        status = json.loads(run("ctl", name, "--redis", cluster_url, "status").stdout)
        assert status["name"] == name and status["status"] in ("running", "finished"), status
        assert run("ctl", name, "--redis", cluster_url, "resume").returncode == 0
        outs = [p.communicate(timeout=150) for p in (first, second)]
        assert [first.returncode, second.returncode] == [0, 0], [err[-1500:] for _o, err in outs]
        hits = site.stats()["hits"]
    assert r.hget(k.meta, "status") == b"finished"
    out = tmp_path / "c.jsonl"
    done = run("export", "--redis", cluster_url, name, "--jsonl", str(out))
    assert done.returncode == 0, done.stderr
    urls = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    assert len(urls) == len(set(urls)) == pages
    assert set(hits) == {"/", *(f"/p/{i}" for i in range(1, pages))}
    assert sum(recorded_by(r, name).values()) == pages


@pytest.fixture
def quick_failover() -> Iterator[LocalCluster]:
    """Six nodes of their own (one master is killed), whose replicas take over 1.5 s after."""
    c = LocalCluster.start(6, node_timeout=1500)
    yield c
    c.stop()


def test_a_failover_mid_crawl_is_an_outage_and_the_crawl_goes_on(quick_failover: LocalCluster, rundir,
                                                                  tmp_path) -> None:
    """The master serving the crawl's slot (of its partitions, the one of the site's host:
    every POP and DONE of the crawl goes there) is killed mid-crawl: REDIS DOWN, with its
    address, until its replica takes over, then the crawl goes on and finishes; every page
    has exactly one record (a write the replica had not received yet could only mean a page
    fetched again, never one lost or recorded twice)."""
    c, pages = quick_failover, 300
    r = sync_redis(c.url)
    parts = int(os.environ.get("CRAWLTOP_PARTITIONS") or 0) or DEFAULT_CLUSTER_PARTITIONS  # a new crawl's
    with counting_site(pages, 0.02) as site:
        host = urlsplit(site.url).netloc
        k = partitions("fo", parts)[partition_of(host, parts)]
        victim = c.ports.index(r.get_node_from_key(k.meta).port)
        other = c.urls()[(victim + 1) % len(c.ports)]
        crawl = start("crawl", site.url, "--redis", other, "--name", "fo", "--headless", "-c", "4",
                      "--no-sitemaps", "--no-robots")
        wait_for(lambda: records_of(r, "fo") >= 40, what="the first records")
        assert len(read_parts_sync(r, "fo")) == parts and r.scard(k.hosts) == 1  # the host's partition, as computed
        c.procs[victim].kill()
        c.procs[victim].wait()
        _out, err = crawl.communicate(timeout=120)
        assert crawl.returncode == 0, err[-2000:]
        # the progress line named the master that went away while its replica took over: the
        # whole crawl waiting on it (one partition, or the control slot's master), or the
        # partitions it serves while the others go on
        said = rf"REDIS (DOWN: retrying|PARTLY DOWN: \d+ partitions? waiting) \(127\.0\.0\.1:{c.ports[victim]} "
        assert re.search(said, err), err[-2000:]
        hits = site.stats()["hits"]
    assert set(hits) == {"/", *(f"/p/{i}" for i in range(1, pages))}
    out = tmp_path / "fo.jsonl"
    done = run("export", "--redis", other, "fo", "--jsonl", str(out))
    assert done.returncode == 0, done.stderr
    urls = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    assert len(urls) == len(set(urls)) == pages


@pytest.fixture(scope="module")
def no_slots() -> Iterator[LocalCluster]:
    """A cluster node that serves no slot (its cluster never made)."""
    c = LocalCluster.start(1, slots=False)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def master_down() -> Iterator[LocalCluster]:
    """Three masters, no replicas, one of them killed: its slots have nobody."""
    c = LocalCluster.start(3, replicas=0)
    c.procs[1].kill()
    c.procs[1].wait()
    yield c
    c.stop()


COMMANDS = [("crawl", "http://127.0.0.1:9/", "--name", "n"), ("join", "n"), ("export", "n", "--jsonl", "-"),
            ("ctl", "n", "status")]


@pytest.mark.parametrize("argv", COMMANDS, ids=[a[0] for a in COMMANDS])
def test_a_cluster_without_every_slot_is_refused_in_one_line(no_slots: LocalCluster, argv) -> None:
    done = run(*argv, "--redis", no_slots.url, timeout=60)
    _one_line(done, "slots are not covered", no_slots.url)


@pytest.mark.parametrize("argv", COMMANDS[:3], ids=[a[0] for a in COMMANDS[:3]])
def test_a_master_that_does_not_answer_is_refused_in_one_line(master_down: LocalCluster, argv) -> None:
    done = run(*argv, "--redis", master_down.url, timeout=60)
    # before the others notice (node timeout): it does not answer; after: the cluster says it is not whole
    _one_line(done, ("does not answer", "not whole", "not covered"), master_down.url)


def _one_line(done, words: str | tuple[str, ...], url: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    words = (words,) if isinstance(words, str) else words
    assert any(w in lines[0] for w in words) and url in lines[0], lines[0]
    assert "foreign data" not in done.stderr



async def test_a_cluster_whose_slots_have_no_master_is_waited_out_then_used():
    """While no node serves a slot, redis-py's cluster client raises a plain
    RedisClusterException ("All slots are not covered"), not a RedisError: the Link takes
    it as an outage (down, retried, never a fatal error), and the call goes through once the
    slots are served."""
    c = LocalCluster.start(1, slots=False)
    try:
        cluster._CLUSTER[c.url] = True  # a cluster node, as its INFO says; its slots come later
        link = Link(cluster.client(c.url, linked=True))
        failed: list[BaseException] = []
        link.on_error = failed.append
        call = asyncio.ensure_future(link.call(lambda: link.redis.set("crawltop:{lost}:k", "v")))
        await wait_until(lambda: link.down, 10)
        assert not call.done() and not failed
        assert say(c.ports[0], "CLUSTER", "ADDSLOTSRANGE", "0", str(SLOTS - 1)).startswith("+OK")
        assert await asyncio.wait_for(call, 30) is True
        assert not link.down and not failed
        await link.redis.aclose()
    finally:
        c.stop()
