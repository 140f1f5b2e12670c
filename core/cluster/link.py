"""Link: the one owner of a process's Redis connection, for the frontier, the member
and the view alike.

It counts round trips, says whether Redis is `down` (the monitor shows REDIS DOWN), and
decides what a failure means: an outage (connection lost, timeout, Redis loading; on a
Redis Cluster a failover, or the crawl's slot moving to another master) is retried with
backoff by `call` and only reported by `once`, and `where` says which node failed; any
other Redis error, or a refused password, is fatal: `on_error` stops the crawl with it,
never a hang.

Each round trip is bounded here (`timeout`, with `asyncio.timeout`), not by redis-py's
socket timeout: with one, redis-py wraps every command's write in `asyncio.wait_for`,
which on Python 3.11 returns normally when a cancel arrives just as the write completes
(CPython #86296, fixed in 3.12 by basing wait_for on asyncio.timeout). The task cancelled
then goes on as if it never was: that is how an engine's heartbeat outlived its crawl
after Ctrl-C on `--processes` and kept the process alive. So the clients a Link
uses come from `connect.client(url, linked=True)`: no socket timeout, no wait_for.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import (
    AskError,
    AuthenticationError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..errors import UsageError

# TimeoutError is an OSError. On a Redis Cluster, a failover is an outage too: a master lost
# and its replica not promoted yet (CLUSTERDOWN, TRYAGAIN, a slot without a master, redis-py
# giving up its own retries: ClusterError), never a reason to stop the crawl.
OUTAGE = (RedisConnectionError, RedisTimeoutError, BusyLoadingError, OSError, ClusterError, TryAgainError,
          SlotNotCoveredError)
# What a Redis Cluster node says to a script while the crawl's slot is moving (resharding:
# the slot guard of core/cluster/scripts.py) or while the cluster is down: the script stopped
# before it wrote anything, so it is an outage, retried whole, never a script error.
MOVING = ("Script attempted to access a non local key", "Script attempted to execute a command while the cluster",
          "Script attempted to execute a write command while the cluster")
# redis-py's cluster client rebuilds its map of slots when a node drops, and while no node
# it knows answers for a slot it raises a plain RedisClusterException (not a RedisError) in
# these words: an outage too. Its other words for it ("No way to dispatch", "all keys must
# map to the same key slot") are mistakes of ours, fatal.
AWAY = ("cannot be connected", "All slots are not covered", "could not agree", "No targets were found")
MAX_WAIT = 2.0  # seconds between tries at most, while Redis is away
TIMEOUT = 10.0  # one round trip at most: a Redis that does not answer is an outage

T = TypeVar("T")


class Link:
    def __init__(self, client: aioredis.Redis, *, timeout: float = TIMEOUT) -> None:
        self.redis = client
        self.timeout = timeout  # each try of a round trip (TimeoutError: an outage)
        self.down = False  # Redis unreachable right now: calls are being retried
        self.round_trips = 0
        self.where: str | None = None  # while down: "HOST:PORT what", the node that failed last, if known
        self.closed = False  # after close(): an outage is no longer waited out
        self.on_down: Callable[[bool], None] | None = None
        self.on_error: Callable[[BaseException], None] | None = None

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """One round trip, retried with backoff while Redis is away (nothing is lost:
        every script is safe to run again after a failure we cannot see the end of).
        `fn` makes a fresh request per try. Any other Redis error is fatal (UsageError)."""
        wait = 0.05
        while True:
            try:
                async with asyncio.timeout(self.timeout):
                    result = await fn()
            except AuthenticationError as exc:  # a ConnectionError to redis-py, but no outage
                raise self._fatal(exc) from None
            except (*OUTAGE, RedisError, RedisClusterException) as exc:
                if not isinstance(exc, OUTAGE) and not moving(exc):
                    raise self._fatal(exc) from None
                if self.closed:
                    _raise_as_outage(exc)
                self._set_down(True, exc)
                await asyncio.sleep(wait)
                wait = min(wait * 2, MAX_WAIT)
                continue
            self.round_trips += 1
            self._set_down(False)
            return result

    async def once(self, request: Awaitable[T]) -> T:
        """One round trip, not retried (a monitor polls again anyway): any failure marks
        the link down and is raised."""
        try:
            async with asyncio.timeout(self.timeout):
                result = await request
        except (*OUTAGE, RedisError, RedisClusterException) as exc:
            self._set_down(True, exc)
            _raise_as_outage(exc)
        self.round_trips += 1
        self._set_down(False)
        return result

    def background(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        """A task talking to Redis on its own. A fatal error has already stopped the crawl
        (on_error); what the task held comes back when its leases run out."""
        async def run() -> Any:
            try:
                return await coro
            except (UsageError, *OUTAGE):
                return None

        return asyncio.ensure_future(run())

    async def close(self) -> None:
        self.closed = True
        await self.redis.aclose()

    def _fatal(self, exc: Exception) -> UsageError:
        fatal = UsageError(f"Redis refused a request: {exc}")
        if self.on_error is not None:
            self.on_error(fatal)
        return fatal

    def down_text(self) -> str:
        """The notice while down: which node failed and how, when redis-py says."""
        if not self.down:
            return ""
        return f"REDIS DOWN: retrying ({self.where})" if self.where else "REDIS DOWN: retrying"

    def _set_down(self, down: bool, exc: BaseException | None = None) -> None:
        where = None
        if down:
            node = node_of(exc)
            where = f"{node} {why(exc)}" if node else self.where
        changed = down != self.down or where != self.where
        self.down, self.where = down, where
        if changed and self.on_down is not None:
            self.on_down(down)


def node_of(exc: BaseException | None) -> str | None:
    """HOST:PORT of the node a failure came from, as redis-py's cluster client tags it (the
    node it sent the command to); None when it does not say (a plain client, redis-py
    giving up after its own retries)."""
    name = getattr(exc, "last_failed_node_name", None)
    if isinstance(name, str):
        return name
    node = getattr(exc, "connection", None)
    host, port = getattr(node, "host", None), getattr(node, "port", None)
    return f"{host}:{port}" if host and port else None


def why(exc: BaseException | None) -> str:
    """A failure in the words of a status line."""
    if isinstance(exc, (TryAgainError, AskError)) or (moving(exc) and "non local key" in str(exc)):
        return "moving the crawl's slot"
    if isinstance(exc, (ClusterDownError, SlotNotCoveredError)) or moving(exc):
        return "cluster down"
    if isinstance(exc, BusyLoadingError):
        return "loading its data"
    return "unreachable"


def _raise_as_outage(exc: Exception) -> NoReturn:
    """Raise `exc` as callers catch an outage (OUTAGE): redis-py's cluster client's plain
    RedisClusterException while its map is rebuilt becomes a ConnectionError."""
    if isinstance(exc, RedisClusterException) and not isinstance(exc, OUTAGE):
        raise RedisConnectionError(str(exc)) from exc
    raise exc


def moving(exc: BaseException | None) -> bool:
    """A cluster node's answer that the crawl's slot is moving, or the cluster down (MOVING),
    or redis-py finding no node for a slot while its map is rebuilt (AWAY)."""
    if isinstance(exc, RedisClusterException) and not isinstance(exc, OUTAGE):
        return any(m in str(exc) for m in AWAY)
    return isinstance(exc, ResponseError) and any(m in str(exc) for m in MOVING)


async def cancel_and_wait(task: asyncio.Future[Any], *, again: float = 0.5) -> None:
    """Cancel `task` and return once it has ended, cancelling it again every `again`
    seconds while it runs on: a cancel can still be lost in any library's
    `asyncio.wait_for` on Python 3.11 (see above), and a task we stop must not keep its
    process alive. Never raises what the task raised; our own cancel goes through."""
    while not task.done():
        task.cancel()
        await asyncio.wait((task,), timeout=again)
    if not task.cancelled():
        task.exception()  # retrieved: asyncio must not log "Task exception was never retrieved"
