"""Where a shared crawl lives in Redis: one key prefix per crawl name (docs/scaling.md, "What lives where").

Every key of crawl NAME starts with `crawltop:{NAME}:` (the braces are a Redis Cluster
hash tag: all keys of one crawl land on one slot, so the scripts may touch them all). A
crawl of P > 1 partitions (meta's `parts`; core/cluster/parted.py) keeps the keys of its
hosts (hosts, hq:, h:, ready, checks, later, idle, idle:checks, bell, seen:, leases, owner,
held:, rec, count, and a meta of its own: the seen set's plan, `part`) under partition
K's prefix `crawltop:{NAME:K}:`, a host's partition from its registered domain
(partition_of); the rest below stays under `crawltop:{NAME}:`, and meta there also holds
`parts` and `granted` (--max-pages taken by processes, in blocks).

  meta          HASH   also expect (--expect-urls), sb and sl: the seen set's plan (seen.py)

  meta          HASH   magic, config (JSON), roots, status (running|finished|stopped), created
  hosts         SET    every host (the --queue-by key) that ever had a URL queued
  hq:HOST       LIST   HOST's queued items, FIFO (RPUSH; LPUSH for a URL given back)
  h:HOST        HASH   HOST's state, fields only when set (core/cluster/scripts.py HOST_FIELDS):
                       n next-allowed (ms), d delay (ms) and src its source, cd Crawl-delay,
                       ad adaptive, lv live delay, f in flight, x back-offs in a row, k strikes
                       in a row (retirement), u back-off
                       until, b when it began, w why, le last error, a admitted, o over
                       budget, p paused, r retired, ok pages, er error records, ms latency,
                       an answered (1: it sent an HTTP response once), l lane (1: checks)
  ready         ZSET   host -> next-allowed time (ms, the server's clock): every host of the
                       pages lane with queued URLs that is not paused nor at its --per-host
                       cap (one in flight until it answered; retired: 0)
  checks        ZSET   the same for the hosts of the checks lane (out of scope)
  idle          HASH   proc -> "since,last,n": processes whose last POP for pages found nothing
                       due; DONE and ADD ring `bell` for them, POP leaves them what they want
  idle:checks   HASH   the same for POPs for checks
  bell          CHANNEL  the lane ("0" pages, "1" checks), published when one of its hosts
                       comes due for an idle process; "ignores" when `ignores` changed (on a
                       Redis Cluster a sharded channel: core/cluster/bell.py)
  later         ZSET   "HOST ITEM" -> when (ms): a URL retried after a back-off of its own
  seen:I[.BITS] SETS   the seen set: 64-bit fingerprints of every URL ever queued, as integers,
                       in buckets that stay intsets (core/cluster/seen.py); `seen` names no key
  leases        ZSET   "HOST ITEM" -> lease deadline (ms, the server's clock): URLs in flight
  owner         HASH   url -> process id holding its lease
  held:PROC     SET    the "HOST ITEM"s PROC holds (its heartbeat renews exactly these)
  procs         HASH   process id -> JSON: host, pid, state, workers, busy, pages, rate (ProcessInfo)
  beats         HASH   process id -> its last heartbeat (ms, the server's clock)
  snap:PROC     STRING PROC's latest Stats snapshot (core/sockets/protocol.py encoding), expires
                       (at leave, its final one, kept FINAL_TTL for the monitors)
  left          SET    processes that left: a monitor reads each one's final snapshot once
  rec           STREAM one entry per Record: url, data (JSON), new (links it queued), proc
  count         HASH   records, rejected (records refused: lease lost), queued (URLs in host
                       queues and later), retired (hosts), over (URLs over budget), seen (URLs)
  ctl           HASH   whole-crawl control: paused (0|1), stop (0|1), concurrency
  ctl:PROC      HASH   the same for one process; overrides the whole-crawl fields
  ignores       HASH   live ignore patterns of the whole crawl (pattern -> who added it)
  digests       HASH   --warc: each archived payload's first copy (20-byte SHA-1 -> "uri date
                       record-id"), so every process writes a revisit for the others' payloads

Items are JSON arrays [url, redirects_left, depth, tries, via, discovery]: Lua's cjson
reads them when a reap counts one more try.
"""
from __future__ import annotations

import functools
import os
import socket
import zlib

from ..jsonfast import dumps_str, loads
from ..queueing.item import Item
from ..queueing.scope import registered_domain

MAGIC = "crawltop-cluster/3"  # /2: per-host queues; /3: the seen set in intset buckets
# Older layouts: exported, never continued (what each one lacks, for the refusal)
OLD_MAGICS = {"crawltop-cluster/1": "one queue, no per-host queues",
              "crawltop-cluster/2": "its seen set one set of strings, not buckets of integers"}


class Keys:
    """The key names of one crawl, or of one of its partitions (`part`): on a Redis Cluster a
    crawl of P > 1 partitions keeps each partition's queues, hosts, leases, seen set, counts
    and records under a hash tag of its own, `crawltop:{NAME:K}:`, so its partitions spread
    over the masters; the control keys (meta's settings, procs, beats, snapshots, ctl,
    ignores) stay under `crawltop:{NAME}:`. With one partition, the partition is the crawl:
    one prefix, the layout of a crawl without partitions."""

    def __init__(self, name: str, part: int | None = None) -> None:
        self.name, self.part = name, part
        self.prefix = f"crawltop:{{{name}}}:" if part is None else f"crawltop:{{{name}:{part}}}:"
        p = self.prefix
        self.meta, self.seen, self.leases = p + "meta", p + "seen", p + "leases"
        self.hosts, self.ready, self.later = p + "hosts", p + "ready", p + "later"
        self.idle, self.bell = p + "idle", p + "bell"
        self.checks, self.idle_checks = p + "checks", p + "idle:checks"  # the checks lane's ready and idle
        self.owner, self.procs, self.rec, self.count = p + "owner", p + "procs", p + "rec", p + "count"
        self.ctl, self.beats, self.ignores, self.left = p + "ctl", p + "beats", p + "ignores", p + "left"
        self.digests = p + "digests"

    def held(self, proc: str) -> str:
        return f"{self.prefix}held:{proc}"

    def snap(self, proc: str) -> str:
        return f"{self.prefix}snap:{proc}"

    def ctl_of(self, proc: str) -> str:
        return f"{self.prefix}ctl:{proc}"

    def hq(self, host: str) -> str:
        return f"{self.prefix}hq:{host}"

    def h(self, host: str) -> str:
        return f"{self.prefix}h:{host}"


def partitions(name: str, count: int) -> list[Keys]:
    """The keys of each partition of crawl NAME (meta's `parts`, absent: 1): with one, the
    crawl's own keys."""
    return [Keys(name)] if count <= 1 else [Keys(name, k) for k in range(count)]


def parts_of(meta: dict[str, str] | dict[bytes, bytes]) -> int:
    """A crawl's partition count, from its meta hash (a crawl from before partitions: 1)."""
    raw = meta.get("parts", meta.get(b"parts", b"1"))  # type: ignore[call-overload]
    try:
        return max(1, int(raw))
    except ValueError:
        return 1


def partition_of(host_key: str, count: int) -> int:
    """The partition of a host key (--queue-by's): hashed by its registered domain, so a
    site's hosts (www., cdn., docs.) and most of its links share one partition. CRC-32:
    the same in every process and on every machine (Python's hash() is salted)."""
    if count <= 1:
        return 0
    return _domain_hash(host_key) % count


@functools.lru_cache(maxsize=65536)
def _domain_hash(host_key: str) -> int:
    host = host_key.rsplit("@", 1)[-1].split(":", 1)[0] if not host_key.startswith("[") else host_key
    return zlib.crc32((registered_domain(host) or host).encode())


def encode_item(item: Item) -> str:
    """An item as compact JSON (orjson where it can: one per URL queued or leased)."""
    return dumps_str([item.url, item.redirects_left, item.depth, item.tries, item.via, item.discovery])


def split_member(member: str) -> tuple[str, str]:
    """A lease is "HOST ITEM": a host key has no space, so the first one splits them."""
    host, _, raw = member.partition(" ")
    return host, raw


def decode_item(raw: str | bytes) -> Item:
    url, left, depth, tries, via, discovery = loads(raw)
    return Item(url, left, depth, tries, via, discovery)


def process_id() -> str:
    """host:pid:random, unique across machines and pid reuse."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(2).hex()}"


def text(value: object) -> str:
    """A Redis reply as text (the clients here don't decode their replies: bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)
