"""The crawl's wake-up channel (`bell`, core/cluster/keys.py) on one Redis server and on a
Redis Cluster alike.

On one server the scripts PUBLISH and the processes SUBSCRIBE, as always. On a cluster a
PUBLISH goes over the cluster bus to every node, and a subscriber on any node hears it:
correct, but each ring costs every node. So there the channel is a *sharded* one
(SPUBLISH, SSUBSCRIBE, Redis 7.0): it lives on the node serving its slot, the crawl's hash
tag puts it beside the keys of the script that rings it, and only that node carries it.
redis-py's asyncio cluster client subscribes it on that node (`ClusterPubSub.ssubscribe`,
followed there through a failover or a slot move). Both ends must agree: a sharded message
never reaches a plain subscriber, so the scripts' text is chosen with the client
(`scripts.for_client`), and Python's rings go through `ring`.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

LISTEN_TICK = 1.0  # a sharded subscriber is polled: at most this long between two looks


def is_cluster(r: Any) -> bool:
    """The client is redis-py's cluster client (connect.client chose it for a cluster node)."""
    return isinstance(r, RedisCluster)


async def ring(r: aioredis.Redis, channel: str, message: bytes | str) -> None:
    """Publish on the crawl's channel as its scripts do."""
    if is_cluster(r):
        await r.spublish(channel, message)
    else:
        await r.publish(channel, message)


async def listen(r: aioredis.Redis, channel: str) -> AsyncGenerator[bytes, None]:
    """Each message on the channel, as it comes; RedisError and OSError are the caller's
    (it opens the channel again). The subscription is closed when the iteration ends."""
    if is_cluster(r):
        rc = cast(RedisCluster, r)
        await rc.initialize()  # the slots' owners, before asking one
        cpubsub = rc.pubsub()
        try:
            await cpubsub.ssubscribe(channel)
            while True:
                message = await cpubsub.get_sharded_message(ignore_subscribe_messages=True, timeout=LISTEN_TICK)
                if message is not None and message.get("type") in (b"smessage", "smessage"):
                    yield message["data"]
        finally:
            with contextlib.suppress(RedisError, OSError):  # a lost connection is closed already
                await cpubsub.aclose()
        return
    pubsub = r.pubsub()
    try:
        await pubsub.subscribe(channel)
        async for message in pubsub.listen():
            if message.get("type") == "message":
                yield message["data"]
    finally:
        with contextlib.suppress(RedisError, OSError):
            await pubsub.aclose()


async def listen_all(r: aioredis.Redis, channels: list[str]) -> AsyncGenerator[tuple[bytes, bytes], None]:
    """`listen` over several channels (a crawl's partitions each ring their own), each
    message with the channel it came on. On a cluster redis-py subscribes each channel on the
    node serving its slot."""
    if is_cluster(r):
        rc = cast(RedisCluster, r)
        await rc.initialize()
        cpubsub = rc.pubsub()
        # One read waiting on each node's connection at once: redis-py's own
        # get_sharded_message asks the nodes in turn, each for its whole timeout, so a ring
        # on the third node would wait for the first two to time out.
        waiting: dict[Any, asyncio.Future[Any]] = {}
        try:
            await cpubsub.ssubscribe(*channels)
            while True:
                for node_pubsub in list(cpubsub.node_pubsub_mapping.values()):  # (after a failover: new ones)
                    if node_pubsub not in waiting:
                        waiting[node_pubsub] = asyncio.ensure_future(
                            node_pubsub.get_message(ignore_subscribe_messages=True, timeout=LISTEN_TICK))
                if not waiting:
                    await asyncio.sleep(LISTEN_TICK)
                    continue
                done, _ = await asyncio.wait(waiting.values(), return_when=asyncio.FIRST_COMPLETED)
                for node_pubsub, fut in list(waiting.items()):
                    if fut in done:
                        del waiting[node_pubsub]
                        message = fut.result()  # a lost connection: the caller opens the bell again
                        if message is not None and message.get("type") in (b"smessage", "smessage"):
                            yield _bytes(message["channel"]), message["data"]
        finally:
            for fut in waiting.values():
                fut.cancel()
            with contextlib.suppress(RedisError, OSError):
                await cpubsub.aclose()
        return
    pubsub = r.pubsub()
    try:
        await pubsub.subscribe(*channels)
        async for message in pubsub.listen():
            if message.get("type") == "message":
                yield _bytes(message["channel"]), message["data"]
    finally:
        with contextlib.suppress(RedisError, OSError):
            await pubsub.aclose()


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value
