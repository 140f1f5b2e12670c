"""`crawltop attach [NAME]` and `crawltop web [NAME]`: the monitor in its own process.

attach opens the usual app on a RemoteCrawler. `d` detaches, `q` asks stop-or-detach,
a crawl that ends shows its summary. If the crawl's process dies, the monitor closes
and says so in one line, exit 1. web (cli/web.py) serves `crawltop attach NAME` through
textual-serve, on 127.0.0.1 only and behind a token.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys

from ..core.errors import RemoteError, UsageError
from ..core.remote import RemoteCrawler
from ..core.runtime import resolve
from ..core.sanitize import clean

LOST = 3  # the app's return code when the crawl process went away
NICE = 5


def add_arguments(sub: argparse._SubParsersAction) -> None:
    attach = sub.add_parser("attach", help="open the monitor on a live crawl (d detaches)")
    attach.add_argument("name", nargs="?", metavar="NAME", help="the crawl's name (default: the only live one)")
    attach.add_argument("--redis", metavar="URL", default=None,
                        help="watch crawl NAME shared through this Redis, all processes at once, from any machine")
    web = sub.add_parser("web", help="serve the monitor of a live crawl to a browser, on 127.0.0.1 only")
    web.add_argument("name", nargs="?", metavar="NAME", help="the crawl's name (default: the only live one)")
    web.add_argument("--port", type=int, default=8000, metavar="P", help="port on 127.0.0.1 (default 8000)")
    web.add_argument("--redis", metavar="URL", default=None, help="serve the monitor of crawl NAME shared through this Redis")


def run(args: argparse.Namespace) -> int:
    if args.command == "attach":
        from .orphan import watch_web_parent

        watch_web_parent()  # a tab of `crawltop web`: end with it, however it ends
    if getattr(args, "redis", None):
        from .cluster import check_crawl, monitor

        if args.command == "web":
            from .web import serve_web

            return serve_web(check_crawl(args.redis, args.name), args.port, redis=args.redis)
        return monitor(args.redis, args.name)
    try:
        path = resolve(args.name)
    except (UsageError, OSError) as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 1
    if args.command == "web":
        from .web import serve_web  # aiohttp + textual-serve, only for this command

        return serve_web(path.name, args.port)
    return asyncio.run(attach(path))


async def attach(path, *, headless: bool = False) -> int:
    try:
        remote = await RemoteCrawler.connect(path)
    except RemoteError as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 1
    from ..tui.app import CrawlApp

    with contextlib.suppress(OSError):
        os.nice(NICE)  # the crawl comes first: on a busy machine its frames wait, not the crawl
    app = CrawlApp(remote)
    remote.on_lost = lambda: app.exit(LOST)
    try:
        await app.run_async(headless=headless)
    finally:
        await remote.close()
    if remote.lost:
        print(f"crawltop: lost the crawl {remote.name!r} (pid {remote.pid}): its process ended "
              "without finishing (killed or crashed)", file=sys.stderr)
        return 1
    if remote.detached and remote.ended is None:
        print(f"crawltop: detached from {remote.name!r}; it goes on (crawltop attach {remote.name})")
    return app.return_code or 0
