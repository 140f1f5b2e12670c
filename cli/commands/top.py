"""`crawltop` alone, or `crawltop top`: every crawl on one screen (tui/top/).

The dashboard and the monitor it opens take turns on the terminal: `enter` ends the
dashboard's app with the crawl to open, this loop runs that crawl's monitor (the screen
of `attach`) until it is left with esc or d, then opens the dashboard again on the same
board (core/dashboard/board.py), so its links and its list of ended crawls carry over.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ...core.errors import UsageError
from ...core.monitor.sanitize import clean
from ...core.sockets.rundir import run_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    top = sub.add_parser("top", help="every crawl of this user on one screen (also: crawltop with no command)")
    top.add_argument("--redis", metavar="URL", default=None,
                     help="also list every crawl shared through this Redis (rows NAME@redis)")
    top.add_argument("--no-start", action="store_true",
                     help="turn off n (start a crawl); what `web --all` serves unless it has --allow-start")


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    from ..orphan import watch_web_parent

    watch_web_parent()  # served by `crawltop web --all`: end with it
    if not os.environ.get("TEXTUAL_DRIVER") and not (sys.stdin.isatty() and sys.stdout.isatty()):
        # a script's `crawltop` with no command: say so, do not draw a screen into a pipe
        print("crawltop: the dashboard needs a terminal; `crawltop ls` lists the crawls as text "
              "(crawltop --help: every command)", file=sys.stderr)
        return 2
    try:
        run_dir(create=True)
    except (UsageError, OSError) as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 1
    if args.redis:
        from ...core.cluster import connect as cluster

        cluster.client(args.redis)  # a bad URL: one line and exit 2, before the screen
    import asyncio

    # No os.nice here (unlike attach): crawls started with `n` are its children and would inherit it.
    return asyncio.run(dashboard(can_start=not args.no_start, cwd=Path.cwd(), redis=args.redis))


async def dashboard(*, can_start: bool, cwd: Path, headless: bool = False, redis: str | None = None) -> int:
    """The dashboard, and the monitors it opens, until the person quits."""
    from ...core.dashboard.board import Board
    from ...tui.top.app import Open, TopApp
    from .attach import attach

    board = Board(redis)
    selected: str | None = None
    sort = "name"
    try:
        while True:
            app = TopApp(board, cwd=cwd, can_start=can_start, selected=selected, sort=sort)
            result = await app.run_async(headless=headless)
            sort = app.sort
            if not isinstance(result, Open):
                return 0
            selected = result.name
            if result.name.endswith("@redis") and redis:
                from ..monitor import monitor_async

                await monitor_async(redis, result.name.removesuffix("@redis"), from_list=True, headless=headless)
                continue
            await attach(run_dir(create=False) / result.name, headless=headless, from_list=True)
    finally:
        await board.close()
