"""`crawltop`, counting the Redis script calls it sends, by script: what a crawl's round trips
are made of (bench/redis_cluster.py --tally runs its engines through this).

    .venv/bin/python bench/script_tally.py crawl URL --redis redis://... --headless

Every EVALSHA the process sends (alone, or in a pipeline of one node or of a cluster) is
counted under the name its script has in core/cluster/scripts.py or partscripts.py, and
every pipeline executed; at exit the counts go, as JSON, to $BENCH_TALLY_DIR/PID.json. The
counting wraps redis-py's execute_command, so it costs a dict update a command: the
figures of a tallied crawl are for the make-up of its calls, not for its speed.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path

import redis.asyncio.client as aclient
import redis.asyncio.cluster as acluster

from crawltop.core.cluster import partscripts, scripts

CALLS: Counter[str] = Counter()


def _names() -> dict[str, str]:
    """sha1 -> script name, for each script as a cluster or one server gets it."""
    out: dict[str, str] = {}
    for module in (scripts, partscripts):
        for name, text in vars(module).items():
            if name.isupper() and isinstance(text, str) and "redis.call" in text:
                for cluster in (False, True):
                    body = scripts.for_client(text, cluster)
                    out[hashlib.sha1(body.encode()).hexdigest()] = name
    return out


NAMES = _names()


def _counting(cls: type, label: str) -> None:
    original = cls.execute_command

    def execute_command(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if args and str(args[0]).upper() == "EVALSHA":
            CALLS[NAMES.get(str(args[1]), "other script")] += 1
        elif args:
            CALLS["(" + str(args[0]).upper() + ")"] += 1
        return original(self, *args, **kwargs)

    cls.execute_command = execute_command  # type: ignore[method-assign]
    if label:
        execute = cls.execute

        async def counted_execute(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            CALLS[label] += 1
            return await execute(self, *args, **kwargs)

        cls.execute = counted_execute  # type: ignore[method-assign]


def _dump() -> None:
    where = os.environ.get("BENCH_TALLY_DIR")
    if where and CALLS:
        Path(where, f"{os.getpid()}.json").write_text(json.dumps(dict(CALLS)))
        CALLS.clear()


def main() -> None:
    _counting(aclient.Redis, "")
    _counting(aclient.Pipeline, "[pipeline, one server]")
    _counting(acluster.RedisCluster, "")
    _counting(acluster.ClusterPipeline, "[pipeline, cluster]")
    atexit.register(_dump)
    exit_now = os._exit

    def _exit(code: int) -> None:  # the commands end with os._exit (cli/main.py): atexit never runs
        _dump()
        exit_now(code)

    os._exit = _exit  # type: ignore[assignment]
    from crawltop.cli import console
    sys.argv[0] = "crawltop"
    sys.exit(console())


if __name__ == "__main__":
    main()
