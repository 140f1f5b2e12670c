"""`crawltop export PATH|NAME --jsonl F|--csv F`: the records of a --state file, or of a
crawl shared through Redis (`--redis`, `--trim`); `--wacz F`: the crawl's archive as one
WACZ (cli/archive.py)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ...core.monitor.sanitize import clean
from ...core.outcomes import Tally, outcome_line


def add_parser(sub: argparse._SubParsersAction) -> None:
    export = sub.add_parser("export", help="export the records of a --state file, or of a crawl in --redis")
    export.add_argument("state", metavar="PATH|NAME",
                        help="the --state file whose records to write (with --redis: the crawl's name; "
                             "with --wacz: the state file or the --warc FILE.warc.gz name)")
    export.add_argument("--redis", metavar="URL", default=None,
                        help="export crawl NAME shared through this Redis (default: none)")
    export.add_argument("--trim", action="store_true",
                        help="with --redis: then delete the exported records from Redis, bounding its memory "
                             "(default: keep)")
    export.add_argument("--jsonl", metavar="FILE",
                        help="write one JSON object per record; '-' for stdout (default: none)")
    export.add_argument("--csv", metavar="FILE",
                        help="write one CSV row per record, with a header; '-' for stdout (default: none)")
    export.add_argument("--wacz", metavar="FILE.wacz",
                        help="pack the crawl's WARC files, CDXJ index and page list into one WACZ (default: none)")


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if args.wacz:
        code = _wacz(args)
        if code or not (args.jsonl or args.csv):
            return code
    if args.redis:
        return _shared(args)
    from ...core.errors import StateError

    try:
        return _state_file(args)
    except StateError as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 2


def _wacz(args: argparse.Namespace) -> int:
    """The WARCs named by a state file's --warc, or by the --warc name given."""
    import json
    import sqlite3

    from ..archive import SQLITE_MAGIC, pack

    warc = args.state
    if args.redis:
        print("crawltop: error: export --wacz takes the --warc name (FILE.warc.gz) or a --state file, "
              "not --redis", file=sys.stderr)
        return 2
    try:
        with open(args.state, "rb") as fh:
            is_state = fh.read(16) == SQLITE_MAGIC
    except OSError:
        is_state = False
    if is_state:
        try:
            conn = sqlite3.connect(f"file:{args.state}?mode=ro", uri=True)
            try:
                row = conn.execute("SELECT value FROM settings WHERE key = 'warc'").fetchone()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            print(f"crawltop: error: {clean(args.state)}: {clean(exc)}", file=sys.stderr)
            return 2
        if not row:
            print(f"crawltop: error: {clean(args.state)}: this crawl wrote no WARC (no --warc)", file=sys.stderr)
            return 2
        warc = json.loads(row[0])
    return pack(warc, args.wacz)


def _state_file(args: argparse.Namespace) -> int:
    from ...core.storage.export import export_csv, export_jsonl
    if not args.jsonl and not args.csv:
        print("crawltop: error: export needs --jsonl FILE and/or --csv FILE", file=sys.stderr)
        return 2
    for out, fn, kind in ((args.jsonl, export_jsonl, "JSONL"), (args.csv, export_csv, "CSV")):
        if out:
            tally = Tally()
            n = fn(args.state, out, tally)
            print(f"exported {n} records to {out} ({kind}): {outcome_line(tally.counts, tally.classes)}",
                  file=sys.stderr)
    return 0


def _shared(args: argparse.Namespace) -> int:
    """`crawltop export --redis URL NAME --jsonl F|--csv F [--trim]`."""
    import asyncio

    import redis

    from ...core.cluster.connect import sync_client
    from ...core.cluster.oneshot import join
    from ...core.cluster.records import StreamRecords
    from ...core.errors import UsageError
    from ...core.sockets.rundir import check_name
    from ...core.storage.export import export_csv, export_jsonl

    name = check_name(args.state)
    r = sync_client(args.redis, socket_timeout=30)
    try:
        # reachable, ours, exists (an older format's records export too): or a one-line error
        asyncio.run(join(args.redis, name, resume=False, old_ok=True))
        streams = []
        for out, fn, kind in ((args.jsonl, export_jsonl, "JSONL"), (args.csv, export_csv, "CSV")):
            if out:
                streams.append(StreamRecords(r, name))
                tally = Tally()
                n = fn(streams[-1], out, tally)
                print(f"exported {n} records of {name!r} to {out} ({kind}): "
                      f"{outcome_line(tally.counts, tally.classes)}", file=sys.stderr)
        if args.trim and streams:  # up to what every file has (the first read the fewest)
            print(f"trimmed {streams[0].trim()} exported records from Redis", file=sys.stderr)
        return 0
    except redis.RedisError as exc:
        raise UsageError(f"Redis at {args.redis}: {exc}") from None
    finally:
        r.close()
