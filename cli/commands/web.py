"""`crawltop web [NAME]`: serve the monitor of a live crawl to a browser, on 127.0.0.1
only and behind a token (cli/tokenserver.py), one `crawltop attach NAME` per tab.
`crawltop web --all`: the dashboard instead (`crawltop top`), with `n` (start a crawl)
off unless `--allow-start` says otherwise: a browser tab is a door others may reach."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ...core.errors import UsageError
from ...core.monitor.sanitize import clean
from ...core.sockets.rundir import resolve
from ..options import whole


def add_parser(sub: argparse._SubParsersAction) -> None:
    web = sub.add_parser("web", help="serve the monitor of a live crawl to a browser, on 127.0.0.1 only")
    web.add_argument("name", nargs="?", metavar="NAME", help="the crawl's name (default: the only live one)")
    web.add_argument("--port", type=whole(1, 65535), default=8000, metavar="P", help="port on 127.0.0.1 (default 8000)")
    web.add_argument("--redis", metavar="URL", default=None,
                     help="serve the monitor of crawl NAME shared through this Redis")
    web.add_argument("--all", action="store_true",
                     help="serve the dashboard of every crawl (crawltop top) instead of one crawl's monitor")
    web.add_argument("--allow-start", action="store_true",
                     help="with --all: let the browser start crawls (n); off by default")


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    if args.allow_start and not args.all:
        raise UsageError("--allow-start goes with --all (the dashboard)")
    if args.all:
        if args.name or args.redis:
            raise UsageError("--all serves every crawl: give no NAME and no --redis")
        from ..tokenserver import serve_web

        return serve_web("", args.port, dashboard=True, allow_start=args.allow_start)
    if getattr(args, "redis", None):
        from ...core.cluster.oneshot import check_crawl
        from ..tokenserver import serve_web

        return serve_web(check_crawl(args.redis, args.name), args.port, redis=args.redis)
    try:
        path = resolve(args.name)
    except (UsageError, OSError) as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 1
    from ..tokenserver import serve_web  # aiohttp + textual-serve, only for this command

    return serve_web(path.name, args.port)
