"""Starting or joining a shared crawl: connect, check what the key prefix holds, say no
in one line when it cannot be ours.

Every refusal is a `UsageError` (exit 2 in the CLI): Redis unreachable, a wrong or
missing password, a crawl name that exists with other settings, a prefix holding
foreign data, joining a crawl that does not exist.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import time
from typing import Any, cast

import redis
import redis.asyncio as aioredis
import redis.cluster
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import AuthenticationError, RedisClusterException, RedisError, ResponseError
from redis.utils import HIREDIS_AVAILABLE

from ..config import CrawlConfig
from ..errors import UsageError
from ..storage.schema import config_from_json, config_to_json
from . import seen
from .defaults import DEFAULT_CLUSTER_PARTITIONS
from .frontier import OUTAGE, RedisFrontier
from .keys import MAGIC, OLD_MAGICS, Keys, parts_of, process_id
from .keys import partitions as partitions_of

# Settings each process may choose for itself; every other one is the crawl's.
# (--checks sizes this process's check pool; --dns-server names a server as this machine sees it.)
PER_PROCESS = {"concurrency", "checks", "dns_servers", "output", "start_paused", "backoff"}


def client(url: str, *, timeout: float = 10.0, linked: bool = False) -> aioredis.Redis:
    """`linked`: a long-lived client whose every call goes through a Link (an engine's
    frontier, a monitor's view), whose tasks are cancelled when they end. It gets no
    socket timeout, so redis-py never wraps a write in `asyncio.wait_for`, which loses a
    cancel on Python 3.11 (link.py says how); the Link bounds each round trip instead.
    Connecting stays bounded by `timeout` either way.

    A node of a Redis Cluster gives redis-py's asyncio `RedisCluster` (every master, each
    command sent to the node serving its key's slot, MOVED followed); anything else a
    plain client. It is typed as a plain one: it answers every command this package sends
    (scripts and pipelines routed by their keys); the wake-up channel differs and goes
    through core/cluster/bell.py."""
    socket_timeout = None if linked else timeout
    try:
        if cluster_node(url, timeout):
            rc = RedisCluster.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=timeout,
                                       health_check_interval=30)
            return cast(aioredis.Redis, rc)
        r = aioredis.Redis.from_url(url, socket_timeout=socket_timeout,
                                    socket_connect_timeout=timeout, health_check_interval=30)
    except (ValueError, RedisClusterException) as exc:
        raise UsageError(f"bad --redis URL {url!r}: {exc} (want redis://HOST:PORT/DB or unix:///PATH)") from None
    pool = r.connection_pool
    pool.connection_class = _packed_by_hiredis(pool.connection_class)
    return r


def sync_client(url: str, **kwargs: Any) -> redis.Redis:
    """The blocking client of the same kind (the export, the record tail, the WARC
    writer's digest map): a cluster's for a cluster node."""
    if cluster_node(url, float(kwargs.get("socket_timeout") or 10.0)):
        try:  # it reads the cluster's shape at once: a cluster short of slots or nodes says so here
            return cast(redis.Redis, redis.cluster.RedisCluster.from_url(url, **kwargs))
        except (RedisError, RedisClusterException) as exc:
            raise UsageError(f"Redis Cluster at {url}: {_one_line(exc)}") from None
    return redis.Redis.from_url(url, **kwargs)


_CLUSTER: dict[str, bool] = {}  # URL -> a cluster node: asked once per URL and process
PROBE = 3.0  # seconds the cluster probe waits at most for a node that does not answer


def cluster_node(url: str, timeout: float = 10.0) -> bool:
    """Whether `url` is a node of a Redis Cluster (INFO's cluster_enabled). Every caller
    makes its client synchronously, so this asks synchronously: once per URL and process,
    one round trip (a Unix socket is never a cluster: not even that). A server that cannot
    be asked (down, a password wanted, INFO hidden) is taken as a plain one, whose first
    command then says what is wrong, and is asked again next time. The probe blocks its
    caller (a monitor's tick among them), so it waits PROBE at most, not `timeout`."""
    if url in _CLUSTER:
        return _CLUSTER[url]
    if url.startswith("unix:"):
        return False
    try:
        wait = min(timeout, PROBE)
        probe = redis.Redis.from_url(url, socket_timeout=wait, socket_connect_timeout=wait)
    except ValueError:
        return False
    try:
        enabled = str(probe.info("cluster").get("cluster_enabled", "0")) == "1"
    except (redis.RedisError, OSError):
        return False
    finally:
        probe.close()
    _CLUSTER[url] = enabled
    return enabled


_PACKED: dict[type[AbstractConnection], type[AbstractConnection]] = {}  # one subclass per class


def _packed_by_hiredis(cls: type[AbstractConnection]) -> type[AbstractConnection]:
    """cls, its commands packed by hiredis in C, as redis-py's sync client already does.
    Its asyncio client packs in Python, joining the buffer again for every argument: 100 µs
    for a DONE batch of 200 arguments against 13 (byte for byte the same), 3% of an
    engine's CPU under `--processes` (docs/benchmarks/redis.md, "Syscalls off the hot path").
    What hiredis can't pack as
    redis-py would (another encoding, a command name of two words, a type redis-py refuses
    with its own error) goes to redis-py."""
    if cls in _PACKED:
        return _PACKED[cls]
    if not HIREDIS_AVAILABLE:  # redis-py's own test of hiredis (installed, and recent enough)
        return cls
    from hiredis import pack_command

    class Packed(cls):  # type: ignore[valid-type,misc]  # a subclass made at run time
        def pack_command(self, *args: Any) -> list[bytes]:
            enc, first = self.encoder, args[0]
            if (enc.encoding == "utf-8" and enc.encoding_errors == "strict"
                    and isinstance(first, (str, bytes)) and first.split() == [first]):
                try:
                    return [pack_command(args)]
                except TypeError:
                    pass
            return super().pack_command(*args)

    Packed.__name__ = Packed.__qualname__ = f"Hiredis{cls.__name__}"
    _PACKED[cls] = Packed
    return Packed


def shared(config: CrawlConfig) -> dict[str, Any]:
    raw = json.loads(config_to_json(config))
    return {k: v for k, v in raw.items() if k not in PER_PROCESS}


async def check(r: aioredis.Redis, url: str) -> None:
    """Reachable and authenticated, or a one-line UsageError."""
    try:
        await r.ping()
    except AuthenticationError as exc:
        raise UsageError(f"Redis at {url} refused the password: {exc}") from None
    except ResponseError as exc:
        if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            raise UsageError(f"Redis at {url} wants a password (redis://:PASSWORD@HOST:PORT/DB): {exc}") from None
        raise UsageError(f"Redis at {url}: {exc}") from None
    except OUTAGE as exc:
        raise UsageError(f"cannot reach Redis at {url}: {exc}") from None
    except RedisClusterException as exc:  # no node of the cluster answers, or slots without a master
        raise UsageError(f"Redis Cluster at {url}: {_one_line(exc)} (redis-cli --cluster check HOST:PORT "
                         f"says what is wrong)") from None
    if isinstance(r, RedisCluster):
        await _whole_cluster(r, url)


async def _whole_cluster(r: aioredis.Redis, url: str) -> None:
    """On a cluster, every slot served (a crawl's keys may be in any of them) and every
    master reachable, or a one-line UsageError: better than a crawl that stops at its
    first key on a missing slot."""
    rc = cast(RedisCluster, r)
    try:
        infos = await rc.cluster_info(target_nodes=RedisCluster.PRIMARIES)
    except (RedisError, RedisClusterException, OSError) as exc:
        raise UsageError(f"Redis Cluster at {url}: a master does not answer ({_one_line(exc)})") from None
    # one master: its answer; more: node name -> its answer
    answers: dict[str, Any] = {url: infos} if "cluster_state" in infos else dict(infos)
    for node, info in answers.items():
        info = info if isinstance(info, dict) else {}
        state, ok = info.get("cluster_state", "?"), info.get("cluster_slots_ok", "?")
        if state != "ok" or str(ok) != "16384":
            raise UsageError(f"Redis Cluster at {url} is not whole: node {node} says cluster_state:{state}, "
                             f"{ok} of 16384 slots ok; fix the cluster (redis-cli --cluster check HOST:PORT) "
                             f"and start again")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


async def _meta(r: aioredis.Redis, keys: Keys, *, old_ok: bool = False) -> dict[str, str] | None:
    """The crawl's meta hash; None if the prefix is empty; UsageError if it isn't ours, or
    if it is a crawl of an older format (one queue, no per-host state: continuing it would
    misread it), unless `old_ok` (export reads only its records, whose format is the same)."""
    try:
        raw = cast("dict[bytes, bytes]", await r.hgetall(keys.meta))  # a client without decode_responses
    except ResponseError as exc:  # WRONGTYPE: someone else's key
        raise UsageError(f"Redis key prefix {keys.prefix} holds foreign data ({exc})") from None
    meta = {k.decode(): v.decode() for k, v in raw.items()}
    if meta:
        if meta.get("magic") in OLD_MAGICS and not old_ok:
            raise UsageError(
                f"crawl {keys.name!r} in Redis is in an older crawltop's format ({meta['magic']}: "
                f"{OLD_MAGICS[meta['magic']]}) and cannot be continued; export its records with `crawltop export "
                f"--redis URL {keys.name} --jsonl FILE`, then delete its keys (crawltop:{{{keys.name}}}:*) "
                f"or use another --name")
        if meta.get("magic") != MAGIC and meta.get("magic") not in OLD_MAGICS:
            raise UsageError(f"Redis key prefix {keys.prefix} holds foreign data (no crawltop crawl there)")
        return meta
    tag = keys.prefix.replace("{", "\\{").replace("}", "\\}")
    async for _key in r.scan_iter(match=tag + "*", count=1000):
        raise UsageError(f"Redis key prefix {keys.prefix} holds foreign data (keys without a crawl)")
    async for key in r.scan_iter(match=tag[:-3] + ":*", count=1000):  # crawltop:{NAME:K}:...: a partition's
        found = key.decode() if isinstance(key, bytes) else str(key)
        if found.endswith("}:meta"):
            continue  # a partition's meta alone: a crawl being made now, or a start cut short
        raise UsageError(f"Redis holds partitions of an earlier crawl named {keys.name!r} without its control keys "
                         f"({found}...): delete crawltop:{{{keys.name}:*}} keys or use another --name")
    return None


async def start(r: aioredis.Redis, url: str, name: str, config: CrawlConfig, *,
                expect_urls: int | None = None, partitions: int | None = None) -> tuple[bool, str]:
    """Create crawl NAME, or continue it if it exists with the same settings.
    `expect_urls` (--expect-urls) plans its seen set (core/cluster/seen.py) and `partitions`
    (--partitions) splits it: both fixed at creation; given again for an existing crawl,
    each must be the same. Returns (created, status before)."""
    await check(r, url)
    keys = Keys(name)
    meta = await _meta(r, keys)
    mine = shared(config)
    if meta is None:
        expect = expect_urls or seen.PLANNED
        limit = await _intset_limit(r)
        count = partitions or default_partitions(r)
        fields = {"config": json.dumps(mine, sort_keys=True), "roots": json.dumps(list(config.roots)),
                  "status": "running", "created": str(time.time()), "expect": str(expect),
                  "sb": str(seen.plan(expect, limit)), "sl": str(limit)}
        if count > 1:
            fields["psl"] = psl_version()
            # each partition's own meta first (its seen set's plan, and `part`: it never
            # finishes the crawl alone), so no process ever runs a script on a partition
            # without one; the crawl exists once its control meta does
            fields["parts"] = str(count)
            plan = str(seen.plan(max(1, expect // count), limit))
            for part in partitions_of(name, count):
                await r.eval(_CREATE, 1, part.meta, MAGIC, "part", "1", "status", "running", "sb", plan, "sl",
                             str(limit))
        # magic and the rest in one step: another process never sees a crawl without its
        # settings or its seen set's plan (it would file URLs in other buckets)
        flat = [x for pair in fields.items() for x in pair]
        if await r.eval(_CREATE, 1, keys.meta, MAGIC, *flat):
            return True, "new"
        meta = await _meta(r, keys) or {}
    theirs = json.loads(meta.get("config", "{}"))
    if theirs != mine:
        diff = sorted(k for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
        raise UsageError(f"crawl {name!r} exists in Redis with other settings ({', '.join(diff)}); "
                         f"join it with: crawltop join {name} --redis URL")
    _same_suffixes(name, meta)
    if partitions is not None and partitions != parts_of(meta):
        raise UsageError(f"crawl {name!r} exists in Redis with --partitions {parts_of(meta)}, not {partitions}: "
                         f"its partitions are fixed at creation; leave --partitions out to continue it")
    if expect_urls is not None and str(expect_urls) != meta.get("expect"):
        raise UsageError(f"crawl {name!r} exists in Redis planned for --expect-urls {meta.get('expect', '?')}, "
                         f"not {expect_urls}: its seen set's buckets are fixed at creation (they grow past "
                         f"the plan on their own); leave --expect-urls out to continue it")
    return False, await _running(r, keys, meta)


_CREATE = """
if redis.call('HSETNX', KEYS[1], 'magic', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return 1
"""


def psl_version() -> str:
    """The version of tldextract, whose bundled list of public suffixes decides a host's
    registered domain, so its partition (keys.partition_of)."""
    return importlib.metadata.version("tldextract")


def _same_suffixes(name: str, meta: dict[str, str]) -> None:
    """An engine with another list of public suffixes would file some hosts in other
    partitions than the crawl's: their URLs fetched twice, their politeness split."""
    theirs = meta.get("psl")
    if parts_of(meta) > 1 and theirs and theirs != psl_version():
        raise UsageError(f"crawl {name!r} files hosts into partitions by tldextract {theirs}'s list of public "
                         f"suffixes; this machine has tldextract {psl_version()}: install tldextract=={theirs} "
                         f"to join it")


async def _intset_limit(r: aioredis.Redis) -> int:
    """The server's set-max-intset-entries: a seen bucket holds at most that many, so it stays
    an intset (on a cluster, the smallest of its masters'). A server that hides CONFIG (a
    managed Redis, ACLs) is taken to have Redis's default."""
    try:
        got: Any = await r.config_get("set-max-intset-entries")
    except (RedisError, RedisClusterException):
        return seen.INTSET_MAX
    values = [got] if "set-max-intset-entries" in got else list(got.values())  # a cluster: per node
    limits = [seen.limit_of(v.get("set-max-intset-entries", seen.INTSET_MAX)) for v in values if isinstance(v, dict)]
    return min(limits) if limits else seen.INTSET_MAX


async def join(r: aioredis.Redis, url: str, name: str, *, resume: bool = True,
               old_ok: bool = False) -> tuple[CrawlConfig, str]:
    """The settings of existing crawl NAME, and its status before we joined (a stopped
    crawl runs again, unless `resume` is False: export and the monitor only look).
    `old_ok`: a crawl of an older format is fine too (export reads only its records)."""
    await check(r, url)
    keys = Keys(name)
    meta = await _meta(r, keys, old_ok=old_ok)
    if meta is None:
        raise UsageError(f"no crawl named {name!r} in Redis at {url}")
    if resume:  # (an engine: it files hosts into partitions)
        _same_suffixes(name, meta)
    raw = json.loads(meta["config"])
    raw["roots"] = json.loads(meta["roots"])
    config = config_from_json(json.dumps(raw))
    return config, (await _running(r, keys, meta) if resume else meta.get("status", "running"))


async def _running(r: aioredis.Redis, keys: Keys, meta: dict[str, str]) -> str:
    """A stopped crawl runs again when a process joins it; a finished one stays finished."""
    status = meta.get("status", "running")
    if status == "stopped":
        await r.hset(keys.meta, "status", "running")
        await r.hdel(keys.ctl, "stop")
    return status


def default_partitions(r: aioredis.Redis) -> int:
    """One partition on one server (the layout and speed of a crawl without them); on a
    Redis Cluster enough that every master holds a fair share of them (docs/scaling.md),
    or CRAWLTOP_PARTITIONS (the tests run a one-node cluster with 16)."""
    if not isinstance(r, RedisCluster):
        return 1
    return int(os.environ.get("CRAWLTOP_PARTITIONS") or 0) or DEFAULT_CLUSTER_PARTITIONS


def partitions_in(url: str, name: str) -> int:
    """Crawl NAME's partition count (its meta's `parts`), read once by each engine."""
    r = sync_client(url, socket_timeout=10)
    try:
        return parts_of(cast("dict[bytes, bytes]", r.hgetall(Keys(name).meta)))
    finally:
        r.close()


def frontier(url: str, name: str, config: CrawlConfig, *, lease: float | None = None,
             parts: int | None = None) -> RedisFrontier:
    """A RedisFrontier on a fresh client (made in the loop that will use it); a crawl of
    several partitions (`parts`, read from the crawl if not given) gets a PartedFrontier.
    The lease (how long a dead process's URLs wait before they are fetched again) defaults
    to 15 s; CRAWLTOP_LEASE=SECONDS changes it (the tests kill processes)."""
    parts = partitions_in(url, name) if parts is None else parts
    lease = lease or float(os.environ.get("CRAWLTOP_LEASE") or 0) or None
    kwargs = {} if lease is None else {"lease": lease}
    if parts > 1:
        from .parted import PartedFrontier

        return PartedFrontier(client(url, linked=True), Keys(name), process_id(), parts=parts,
                              max_pages=config.max_pages, **kwargs)
    return RedisFrontier(client(url, linked=True), Keys(name), process_id(), max_pages=config.max_pages, **kwargs)

