"""Run a built Crawler to its end: in the TUI on a terminal, else headless."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ..core import runloop
from ..core.surface import Engine
from .listen import listen


def run_crawler(crawler: Engine, args: argparse.Namespace, end: Callable[[], str] | None = None) -> int:
    """Textual is imported here, and only when a terminal will show it. Either way the
    crawl listens on its control socket (attach, ctl, ls) while it runs, and ends with
    the end report (cli/endreport.py): `end` makes it when this run is not the whole
    crawl (a resume, a shared crawl), else it is this engine's own."""
    listening = listen(crawler, args)  # the engine, serving its control socket as it crawls
    # One engine of a shared crawl may fetch nothing while others do: exit 4 ("no root could
    # be fetched") is for a crawl of its own (cli/exitcodes.py).
    shared = bool(getattr(args, "redis", None))
    if args.headless or not sys.stdout.isatty():
        from .headless import run_headless

        return runloop.run(run_headless(listening, quiet=getattr(args, "quiet", False), roots_code=not shared,
                                        end=end))
    from ..tui.app import run_tui
    from .endreport import one_process
    from .hangup import Hangup
    from .headless import exit_code

    listening.control.mode = "tui"
    hangup = Hangup(getattr(args, "on_hangup", "detach"), listening.control)
    code = run_tui(listening, exit_on_finish=args.exit_on_finish, hangup=hangup)
    # the screen is gone: leave the report in the scrollback (or the log)
    sys.stdout.write(end() if end is not None else one_process(listening))
    return code or (0 if shared else exit_code(listening, sys.stderr))
