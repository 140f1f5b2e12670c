"""Script calls on many partitions, one pipeline per node, each node on its own.

A crawl in partitions sends a batch of script calls (DONEs, ADDs, heartbeats) to partitions
that live on several masters. One pipeline over all of them would fail whole when one
master fails over, and a retry would wait for that master: every partition would wait for
the few on it. Here each node's calls go in a pipeline of their own, all at once, each tried
once: a call's reply, or the failure of its node, comes back per call, and the caller keeps
the calls of a failed node for later (docs/scaling.md, "Failures").

The pipelines go through connections of their own, one pool per node (`NodeClients`):
redis-py's cluster client answers one failing node by closing the connections of every
node, the calls in flight on the healthy masters included, so one dead master failed them
all, again at each retry of its partitions. Only the map of slots is the cluster client's,
read again after a node fails.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import AskError, AuthenticationError, NoScriptError, RedisClusterException, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError

from .link import OUTAGE, moving

Call = tuple[AsyncScript, list[str], list[Any]]


def is_outage(exc: BaseException) -> bool:
    """A failure that passes (a node down, failing over, its slots moving: MOVED and ASK
    come back here, as these calls bypass the cluster client), not a mistake; a refused
    password is redis-py's ConnectionError too, but it does not pass."""
    return ((isinstance(exc, (*OUTAGE, AskError)) or moving(exc))  # (MovedError is an AskError)
            and not isinstance(exc, AuthenticationError))


def node_name(r: aioredis.Redis, key: str) -> str:
    """The node serving `key` ("" on one server), as the cluster client's map says now."""
    if not isinstance(r, RedisCluster):
        return ""
    try:
        return str(getattr(cast(RedisCluster, r).get_node_from_key(key), "name", ""))
    except (RedisError, RedisClusterException, IndexError, AttributeError):  # its map is being rebuilt
        return "?"


REFRESH_EVERY = 1.0  # seconds: a failing node has the cluster's map read again at most this often
REFRESH_MOVED = 0.1  # and a MOVED or ASK (a slot elsewhere now) this often


class NodeClients:
    """A plain client per cluster node, each with its own connections; on one server,
    the client itself."""

    def __init__(self, r: aioredis.Redis) -> None:
        self.r = r
        self._clients: dict[str, aioredis.Redis] = {}
        self._refreshed = 0.0
        self._refresh: asyncio.Task[None] | None = None
        self._closed = False

    def of(self, name: str) -> aioredis.Redis:
        if self._closed or not name or name == "?" or not isinstance(self.r, RedisCluster):
            return self.r  # (one server; a map being rebuilt: redis-py routes it; closed)
        client = self._clients.get(name)
        if client is None:
            node = cast(RedisCluster, self.r).get_node(node_name=name)
            if node is None:
                return self.r
            pool = aioredis.ConnectionPool(connection_class=node.connection_class, **node.connection_kwargs)
            client = self._clients[name] = aioredis.Redis(connection_pool=pool)
        return client

    def failed(self, moved: bool = False) -> None:
        """A node failed or a slot moved: the cluster's map is read again, in the
        background, at most once a REFRESH_EVERY (REFRESH_MOVED after a MOVED or ASK);
        redis-py does it only when its own commands fail, and these calls are not its own."""
        since = time.monotonic() - self._refreshed
        if self._closed or not isinstance(self.r, RedisCluster) or since < (REFRESH_MOVED if moved else REFRESH_EVERY):
            return
        if self._refresh is None or self._refresh.done():
            self._refreshed = time.monotonic()
            self._refresh = asyncio.ensure_future(self._read_map())

    async def _read_map(self) -> None:
        with contextlib.suppress(Exception):  # (a failed read is tried again at the next failure)
            await cast(RedisCluster, self.r).nodes_manager.initialize()

    async def aclose(self) -> None:
        """Before the cluster client closes: a map being read would reconnect it."""
        self._closed = True
        if self._refresh is not None:
            self._refresh.cancel()
            with contextlib.suppress(BaseException):
                await self._refresh
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            with contextlib.suppress(RedisError, OSError):
                await client.aclose()


async def by_node(nodes: NodeClients, calls: Sequence[Call], timeout: float) -> tuple[list[Any], int]:
    """Each call's reply or the exception that stopped it (its node's, or its own), and how
    many nodes were asked. A node gets `timeout` seconds, tried once (its calls come back as
    outages; the caller tries again later, after the map is read again), so the other
    nodes' replies never wait for a master failing over. A call cut short may have run:
    every script here is safe to run again (a DONE run twice finds its lease gone; a POP whose reply was lost leaves its
    URLs leased until the lease runs out, then they are fetched again). A script a node lacks
    (one restarted or promoted) is loaded and its calls run once more."""
    groups: dict[str, list[int]] = {}
    for i, (_script, keys, _args) in enumerate(calls):
        groups.setdefault(node_name(nodes.r, keys[0]), []).append(i)
    out: list[Any] = [None] * len(calls)

    async def one(name: str, indexes: list[int]) -> None:
        r = nodes.of(name)
        try:
            async with asyncio.timeout(timeout):
                replies = await _pipe(r, [calls[i] for i in indexes])
                again = [i for i, x in zip(indexes, replies, strict=True) if isinstance(x, NoScriptError)]
                for script in {id(calls[i][0]): calls[i][0] for i in again}.values():
                    await r.script_load(script.script)
                if again:
                    replies = [*replies]
                    redo = dict(zip(again, await _pipe(r, [calls[i] for i in again]), strict=True))
                    replies = [redo.get(i, x) for i, x in zip(indexes, replies, strict=True)]
        except Exception as exc:  # noqa: BLE001  a node's I/O failing is its outage, whatever raised it
            if not isinstance(exc, (*OUTAGE, RedisError, RedisClusterException)):
                # (Python 3.13.0's asyncio raises TypeError writing to a transport the node
                # closed: CPython gh-121784's fix came in 3.13.1)
                exc = RedisConnectionError(f"{name or 'Redis'}: {exc!r}")
            if name and name != "?":  # the node these calls went to (redis-py may name the last it tried)
                with contextlib.suppress(AttributeError):  # (what link.node_of reads)
                    setattr(exc, "last_failed_node_name", name)  # noqa: B010
            replies = [exc] * len(indexes)
        if any(isinstance(x, BaseException) and is_outage(x) for x in replies):
            nodes.failed(moved=any(isinstance(x, AskError) for x in replies))
        for i, x in zip(indexes, replies, strict=True):
            out[i] = x

    await asyncio.gather(*(one(name, ix) for name, ix in groups.items()))
    return out, len(groups)


async def _pipe(r: aioredis.Redis, calls: list[Call]) -> list[Any]:
    pipe = r.pipeline(transaction=False)
    for script, keys, args in calls:
        # (by name: redis-py's cluster pipeline blocks its evalsha method, not the command,
        # which it routes by the script's first key as it does outside a pipeline)
        pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    return list(await pipe.execute(raise_on_error=False))
