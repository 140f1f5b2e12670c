"""A crawl shared through Redis, as the commands see it: `--redis` and `--processes`,
which options mix with them, the crawl's name, the "already finished" message."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from urllib.parse import urlsplit

from ..core.cluster.defaults import DEFAULT_CLUSTER_PARTITIONS
from ..core.errors import UsageError
from ..core.sockets.rundir import check_name, default_base
from .options import whole

MAX_PARTITIONS = 1024  # each costs every process a call a heartbeat, and a POP a sweep
MAX_PROCESSES = 128  # engines forked here: more than a machine's cores only adds contention; a typo is not a fork bomb


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--redis", metavar="URL", default=None,
                   help="share the crawl through Redis (redis://HOST:PORT/DB or unix:///PATH): "
                        "other processes `join` it (default: this process only)")
    p.add_argument("--processes", type=whole(1, MAX_PROCESSES), default=None, metavar="N",
                   help=f"N (at most {MAX_PROCESSES}) engine processes on this machine and one monitor; without "
                        "--redis a private redis-server is started (default: this process is the engine)")
    p.add_argument("--expect-urls", type=whole(1), default=None, metavar="N",
                   help="with --redis/--processes: the URLs a new crawl expects, which sizes its seen set's "
                        "buckets in Redis (it grows past N on its own, a little slower; default: 1,000,000)")
    p.add_argument("--partitions", type=whole(1, MAX_PARTITIONS), default=None, metavar="P",
                   help="with --redis/--processes: split a new crawl's queues, seen set and records into P "
                        "partitions by site, each on the Redis Cluster master serving its slot, so one crawl "
                        "outgrows one node (fixed at creation; default: 1 on one server, "
                        f"{DEFAULT_CLUSTER_PARTITIONS} on a cluster)")


def wants_cluster(args: argparse.Namespace) -> bool:
    return args.command == "join" or bool(getattr(args, "redis", None)) or bool(getattr(args, "processes", None))


def check_mix(args: argparse.Namespace) -> None:
    """Options that cannot go with a shared crawl: a one-line refusal, not a silent ignore."""
    if getattr(args, "expect_urls", None) and not wants_cluster(args):
        raise UsageError("--expect-urls sizes a crawl's seen set in Redis: it goes with --redis or --processes")
    if getattr(args, "partitions", None) and not wants_cluster(args):
        raise UsageError("--partitions splits a crawl in Redis: it goes with --redis or --processes")
    if not wants_cluster(args) or args.command in ("join", "export"):
        return
    if getattr(args, "state", None):
        raise UsageError("--state and --redis/--processes don't mix: a shared crawl keeps its state in Redis")
    if args.processes and getattr(args, "detach", False):
        raise UsageError("--detach and --processes don't mix: start with crawl --redis URL --detach, "
                         "then add engines with join NAME --redis URL --detach")


def name_of(args: argparse.Namespace, roots: Sequence[str]) -> str:
    if getattr(args, "name", None):
        return check_name(args.name)
    return "demo" if args.command == "demo" else default_base(urlsplit(roots[0]).hostname)


def finished(url: str, name: str) -> int:
    print(f"crawl {name!r} has already finished: export it with "
          f"crawltop export --redis {url} {name} --jsonl FILE", file=sys.stderr)
    return 0
