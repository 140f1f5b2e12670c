"""What each real implementation of the control surface declares in `parts` (core/surface.py):
the declarations replaced run-time probes, so a part dropped here would silently turn a
key into "cannot steer" in the TUI."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from support.ctl import cli, status, wait_gone

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.cluster.frontier import RedisFrontier
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.member import Member
from crawltop.core.cluster.view import ClusterView
from crawltop.core.sockets.client import RemoteCrawler
from crawltop.core.sockets.rundir import resolve
from crawltop.core.sockets.server import Listening

pytestmark = pytest.mark.timeout(60)


def _listening(engine: Crawler | Member, tmp_path: Path) -> Listening:
    path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return Listening(engine, "t", path, sock)


async def test_a_crawler_and_its_listening_wrapper_declare_its_steering(tmp_path: Path) -> None:
    crawler = Crawler(CrawlConfig(roots=("http://127.0.0.1:9/",), robots=False))
    parts = crawler.parts
    assert parts.steer is crawler.steering
    assert parts.ignoring is crawler.steering and parts.host_table is crawler.steering
    assert parts.detach is None and parts.cluster is None  # the crawl is here: nothing to detach from
    served = _listening(crawler, tmp_path).parts
    assert (served.steer, served.detach, served.cluster) == (crawler.steering, None, None)


async def test_a_redis_member_steers_and_a_view_without_an_engine_does_not(tmp_path: Path) -> None:
    client = aioredis.Redis.from_url("redis://127.0.0.1:9")  # never connected: parts ask nothing of Redis
    crawler = Crawler(CrawlConfig(roots=("http://127.0.0.1:9/",), robots=False))
    member = Member(crawler, RedisFrontier(client, Keys("t"), "proc"))
    assert member.parts.steer is member and member.parts.host_table is member
    assert member.parts.detach is None and member.parts.cluster is None

    alone = ClusterView(client, "t", [])
    parts = alone.parts
    assert parts.steer is None and parts.host_table is None  # no engine here: no host table, no seeds
    assert parts.ignoring is alone and parts.detach is alone and parts.cluster is alone

    with_engine = ClusterView(client, "t", [], local=_listening(member, tmp_path))
    parts = with_engine.parts
    assert parts.steer is member and parts.cluster is with_engine and parts.detach is None
    await client.aclose()


async def test_a_remote_crawl_has_its_host_table_and_detach(site: str, rundir: Path) -> None:
    rc, out, err = await cli("crawl", site, "--detach", "--name", "parts", "-c", "2", "--no-robots")
    assert rc == 0, err
    pid = (await status("parts"))["pid"]
    remote = await RemoteCrawler.connect(resolve("parts"))
    try:
        parts = remote.parts
        assert parts.host_table is remote and parts.detach is remote
        assert parts.steer is None and parts.cluster is None
        assert parts.ignoring is None  # ignores go over the socket with `ctl`, not from an attached monitor
    finally:
        remote.stop()
        remote.detach()
    await wait_gone(pid, 30)
