"""The Redis nodes under a shared crawl, as a monitor shows them: on a Redis Cluster, each
master's address, keys and memory, and how many of this crawl's partitions it serves (the
slot of each partition's hash tag: one for a crawl of one partition).

A failed master is an outage of the partitions it serves only (docs/scaling.md,
"Failures"): the rows say which node that is, so an operator knows what to bring back, and
whether this crawl waits on it at all. One `INFO memory keyspace` per master, all at once,
each bounded: a node that does not answer is a row marked down, never a stalled monitor.
"""
from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisClusterException, RedisError

ASK_TIMEOUT = 2.0  # seconds one node may take to answer before its row says it is down
EVERY = 1.0  # seconds between two reads of the nodes, at most once a second


@dataclass(frozen=True)
class NodeRow:
    """One master of the cluster."""
    address: str  # HOST:PORT, as the cluster names it
    keys: int | None  # DBSIZE (the keyspace's db0 keys); None when it did not answer
    memory: int | None  # INFO memory used_memory, bytes; None when it did not answer
    crawl: int  # this crawl's partitions it serves: they wait while it is down
    up: bool  # it answered the last read
    parts: int = 1  # the crawl's partitions in all

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def read_nodes(client: aioredis.Redis, keys: list[str]) -> list[NodeRow]:
    """Every master of a cluster client, in address order (`keys`: a key of each partition of
    the crawl, whose slots say which masters hold it); [] for a plain Redis (one server: the
    status line says all there is). Never raises: a node that fails is a row marked down."""
    if not isinstance(client, RedisCluster):
        return []
    rc = client
    try:
        primaries = sorted(rc.get_primaries(), key=lambda n: n.name)
        holders = [getattr(rc.get_node_from_key(key), "name", None) for key in keys]
    except (RedisError, RedisClusterException, AttributeError, IndexError):  # its slots not read yet
        return []

    async def one(node: Any) -> NodeRow:
        mine = holders.count(node.name)
        try:
            async with asyncio.timeout(ASK_TIMEOUT):
                info = await rc.info("memory", "keyspace", target_nodes=node)
        except (RedisError, RedisClusterException, OSError, TimeoutError):
            info = await _alone(node)
        if info is None:
            return NodeRow(node.name, None, None, mine, False, len(keys))
        db0 = info.get("db0")
        count = int(db0.get("keys", 0)) if isinstance(db0, dict) else 0
        return NodeRow(node.name, count, int(info.get("used_memory", 0)), mine, True, len(keys))

    return list(await asyncio.gather(*(one(n) for n in primaries)))


async def _alone(node: Any) -> dict[str, Any] | None:
    """A node asked again on a connection of its own: when another master fails, redis-py's
    cluster client drops its connections to every node to read the cluster's shape again,
    and a live node's answer in flight is lost with them. None: it does not answer."""
    pool = aioredis.ConnectionPool(connection_class=node.connection_class, max_connections=1,
                                   **node.connection_kwargs)
    alone = aioredis.Redis(connection_pool=pool)
    try:
        async with asyncio.timeout(ASK_TIMEOUT):
            return await alone.info("memory", "keyspace")
    except (RedisError, OSError, TimeoutError):
        return None
    finally:
        await alone.aclose()
        await pool.disconnect()


def down_nodes(rows: list[NodeRow]) -> str:
    """What the status says of masters that did not answer: their addresses, and whether
    this crawl's partition waits on one ("" when every master answered)."""
    down = [r for r in rows if not r.up]
    if not down:
        return ""
    waiting = sum(r.crawl for r in down)
    names = ", ".join(r.address for r in down)
    return (f"node {names} unreachable: {waiting} partition{'s' if waiting != 1 else ''} of this crawl waiting"
            if waiting else f"node {names} unreachable: no partition of this crawl on it")
