"""The local clusters the cluster tests run on (tests/support/rediscluster.py) are whole: every
slot served, every node in agreement, and a key written through one node is read on another."""
from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster
from support.rediscluster import say

pytestmark = pytest.mark.redis


@pytest.mark.parametrize("which,masters", [("one", 1), ("six", 3)])
def test_a_local_cluster_is_whole(request, which: str, masters: int) -> None:
    cluster = request.getfixturevalue(f"cluster_{which}")
    assert len(cluster.masters()) == masters
    for port in cluster.ports:
        info = say(port, "CLUSTER", "INFO")
        assert "cluster_state:ok" in info and "cluster_slots_assigned:16384" in info, info
    rc = RedisCluster.from_url(cluster.url)
    try:
        for i in range(20):  # keys of many slots, through whichever node serves each
            rc.set(f"fixture-{which}-{i}", i)
        assert [int(rc.get(f"fixture-{which}-{i}")) for i in range(20)] == list(range(20))
        assert len(rc.get_primaries()) == masters
    finally:
        rc.close()
    plain = redis.Redis.from_url(cluster.urls()[-1])
    try:
        assert plain.info("cluster")["cluster_enabled"] == 1
    finally:
        plain.close()
