"""`crawltop attach [NAME]`: the monitor in its own process.

attach opens the usual app on a RemoteCrawler. `d` detaches, `q` asks stop-or-detach,
a crawl that ends shows its summary. If the crawl's process dies, the monitor closes
and says so in one line, exit 1. With `--redis`, the whole crawl shared through Redis,
from any machine (cli/monitor.py).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ...core.errors import RemoteError, UsageError
from ...core.monitor.sanitize import clean
from ...core.sockets.rundir import resolve

LOST = 3  # the app's return code when the crawl process went away
NICE = 5


def add_parser(sub: argparse._SubParsersAction) -> None:
    attach = sub.add_parser("attach", help="open the monitor on a live crawl (d detaches)")
    attach.add_argument("name", nargs="?", metavar="NAME", help="the crawl's name (default: the only live one)")
    attach.add_argument("--redis", metavar="URL", default=None,
                        help="watch crawl NAME shared through this Redis, all processes at once, from any machine")


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    from ..orphan import watch_web_parent

    watch_web_parent()  # a tab of `crawltop web`: end with it, however it ends
    if getattr(args, "redis", None):
        return monitor(args.redis, args.name)
    try:
        path = resolve(args.name)
    except (UsageError, OSError) as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 1
    import asyncio

    return asyncio.run(attach(path))


async def attach(path: Path, *, headless: bool = False, from_list: bool = False) -> int:
    """The monitor of one crawl until it is left (d, or esc when opened `from_list`: the
    dashboard, cli/commands/top.py, which says itself what became of the crawl)."""
    from ...core.sockets.client import RemoteCrawler

    try:
        remote = await RemoteCrawler.connect(path)
    except RemoteError as exc:
        if not from_list:
            print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 1
    from ...tui.app import CrawlApp

    if not from_list:  # (the dashboard is niced already: nice adds up)
        with contextlib.suppress(OSError):
            os.nice(NICE)  # the crawl comes first: on a busy machine its frames wait, not the crawl
    app = CrawlApp(remote, from_list=from_list)
    remote.on_lost = lambda: app.exit(LOST)
    try:
        await app.run_async(headless=headless)
    finally:
        await remote.close()
    if from_list:
        return 1 if remote.lost else app.return_code or 0
    if remote.lost:
        print(f"crawltop: lost the crawl {remote.name!r} (pid {remote.pid}): its process ended "
              "without finishing (killed or crashed)", file=sys.stderr)
        return 1
    if remote.detached and remote.ended is None:
        print(f"crawltop: detached from {remote.name!r}; it goes on (crawltop attach {remote.name})")
    return app.return_code or 0


def monitor(url: str, name: str | None) -> int:
    """`crawltop attach NAME --redis URL`: the whole crawl, from any machine."""
    import redis

    from ...core.cluster.oneshot import check_crawl, status
    from ..monitor import run_monitor

    name = check_crawl(url, name)
    code = run_monitor(url, name)
    try:
        text = status(url, name)
    except redis.RedisError:
        text = "Redis unreachable"
    print(f"crawltop: left the monitor of {name!r} (status: {text})", file=sys.stderr)
    return code
