"""What the monitor says of a Redis Cluster's nodes: each master's address, keys and memory,
the one serving the crawl's slot marked (the processes panel, `ctl status`'s `nodes`), and
while a master is down, its address on the status line, not only REDIS DOWN."""
from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator

import pytest
from support.cluster import engines, run, slow_tree, sync_redis, unique
from support.frozen import FrozenCluster
from support.rediscluster import LocalCluster
from support.wait import until

from crawltop.core import CrawlConfig
from crawltop.core.cluster import connect as cluster
from crawltop.core.cluster.keys import Keys
from crawltop.core.cluster.nodes import NodeRow
from crawltop.core.cluster.view import ClusterView
from crawltop.tui.app import CrawlApp

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]


async def test_the_panel_shows_each_master_and_the_crawls_slot(serve, cluster_six: LocalCluster, rundir) -> None:
    """Two engines crawl on six nodes, an attached monitor (no engine of its own) shows the
    three masters with their keys and memory, and how many of the crawl's 64 partitions each
    serves (the slots of their hash tags); `ctl status` says the same."""
    name = unique("nodes")
    site = await serve(slow_tree(120, 0.02))
    members = await engines(cluster_six.url, name, CrawlConfig(roots=(site.url,), concurrency=2), 2)
    running = asyncio.gather(*(m.crawl() for m in members))
    r = cluster.client(cluster_six.url)
    view = ClusterView(r, name, [site.url])
    app = CrawlApp(view, refresh_hz=8)
    rc = sync_redis(cluster_six.url)
    served = Counter(rc.get_node_from_key(Keys(name, p).meta).name for p in range(64))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            panel = app.processes_panel
            assert panel is not None
            await until(pilot, lambda: panel.nodes.row_count == 3 and any(n.keys for n in view.nodes()))
            rows = {n.address: n for n in view.nodes()}
            assert set(rows) == {f"127.0.0.1:{p}" for p in cluster_six.masters()}
            assert {a: n.crawl for a, n in rows.items()} == served and sum(served.values()) == 64
            assert all(n.up and n.memory and n.memory > 100_000 and n.keys >= 10 for n in rows.values())
            assert panel.nodes_heading.display and panel.nodes.display
            for address, count in served.items():
                line = panel.nodes.line_of(address)
                assert f"{count} partitions" in line and " - " not in line, line
        await running
    finally:
        await r.aclose()
    done = await asyncio.to_thread(run, "ctl", name, "--redis", cluster_six.url, "status")
    assert done.returncode == 0, done.stderr
    nodes = json.loads(done.stdout)["nodes"]
    assert sorted(n["address"] for n in nodes) == sorted(rows)
    assert {n["address"]: n["crawl"] for n in nodes} == served
    assert all(n["up"] and n["keys"] >= 0 and n["memory"] > 0 for n in nodes)


@pytest.fixture
def three_masters() -> Iterator[LocalCluster]:
    c = LocalCluster.start(3, replicas=0)
    yield c
    c.stop()


async def test_a_master_down_is_named_on_the_status_line(three_masters: LocalCluster) -> None:
    """The master serving most of the crawl's partitions is killed (no replica: it stays
    down): the monitor's status says REDIS DOWN with that master's address and how many
    partitions wait on it; the other masters still answer."""
    c, name = three_masters, "down"
    r = cluster.client(c.url)
    try:
        await cluster.start(r, c.url, name, CrawlConfig(roots=("http://127.0.0.1:9/",)))
        view = ClusterView(r, name, [])
        await view.read()
        assert view.merged(None).notice == "" and all(n.up for n in view.nodes())
        holder = max(view.nodes(), key=lambda n: n.crawl)
        assert holder.parts == 64 and 0 < holder.crawl < 64
        port = int(holder.address.rsplit(":", 1)[1])
        victim = c.ports.index(port)
        c.procs[victim].kill()
        c.procs[victim].wait()
        view._nodes_at = -10.0  # the next read asks the nodes again (they are read once a second)
        with pytest.raises(Exception):  # noqa: B017,PT011  an outage, whichever redis-py raises
            await view.read()
        notice = view.merged(None).notice
        assert notice.startswith("REDIS DOWN: retrying") and holder.address in notice, notice
        assert f"{holder.crawl} partitions of this crawl waiting" in notice, notice
        assert [n.up for n in view.nodes() if n.address != holder.address] == [True, True]
    finally:
        await r.aclose()


class NodesCluster(FrozenCluster):
    """The frozen shared crawl on a Redis Cluster of three masters, one of them down."""

    def nodes(self) -> list[NodeRow]:
        return [NodeRow("10.0.0.11:7000", 48_211, 61_400_000, True, True),
                NodeRow("10.0.0.12:7000", 3_102, 4_200_000, False, True),
                NodeRow("10.0.0.13:7000", None, None, False, False)]


async def _settle(pilot) -> None:
    await pilot.pause(0.1)
    await pilot.wait_for_scheduled_animations()


class TestNodesPanel:
    def test_nodes_120x40(self, snap_compare) -> None:
        assert snap_compare(CrawlApp(NodesCluster()), terminal_size=(120, 40), run_before=_settle)
