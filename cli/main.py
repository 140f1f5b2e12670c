"""`crawltop`: the parser, built from one module per subcommand (cli/commands/), and the
dispatch to the command's run, with the one-line error and exit 2 for bad input.

Textual, Redis and the web server are imported only by the commands that use them."""
from __future__ import annotations

import argparse
import atexit
import os
import select
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__ as VERSION
from ..core.errors import UsageError
from ..core.monitor.sanitize import clean
from . import clobber, detach, shared
from .commands import attach, crawl, ctl, demo, export, join, ls, report, resume, top, web
from .exitcodes import EXIT_READER_LEFT
from .options import Parser

# In --help's order. Each has add_parser(sub) and run(args, argv) -> exit code.
COMMANDS = {"crawl": crawl, "demo": demo, "resume": resume, "export": export, "join": join,
            "top": top, "ls": ls, "ctl": ctl, "attach": attach, "web": web, "report": report}

__all__ = ["build_parser", "console", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="crawltop", description="htop for a web crawler; with no command, every crawl "
                    "of this user on one screen (crawltop top)")
    parser.add_argument("--version", action="version", version=f"crawltop {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    argv = [*(given or ["top"]), *detach.hidden_args()]  # alone: the dashboard; secrets of a --detach
    args = build_parser().parse_args(argv)
    try:
        clobber.check(args)  # an output that would overwrite an input: before anything opens
        if getattr(args, "detach", False):
            shared.check_mix(args)  # a refusal here, not in a log nobody reads
            return detach.spawn(argv)
        return COMMANDS[args.command].run(args, argv)
    except BrokenPipeError as exc:
        if not _stdout_gone():
            print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
            return 2
        return _quiet_after_reader_left()
    except (UsageError, OSError) as exc:  # bad input, unwritable output, failing disk
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 2


def _stdout_gone() -> bool:
    """stdout is a pipe whose reader closed it (`crawltop report F | head -1`): poll says
    POLLERR for such a pipe's write end, and nothing for a terminal, a file or a live pipe."""
    try:
        fd = sys.stdout.fileno()
        events = select.poll()
        events.register(fd, 0)  # POLLERR and POLLHUP are reported whatever was asked
        return any(ev & select.POLLERR for _, ev in events.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _quiet_after_reader_left() -> int:
    """Nobody reads stdout any more: not an error of the command, so no message, and the
    code of a writer whose reader left. What the command had to do is done (a crawl's
    sinks were closed by its own `finally`); stdout goes to /dev/null, so the last flush
    can't fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass
    finally:
        os.close(devnull)
    return EXIT_READER_LEFT


def console() -> NoReturn:
    _exit(main())


def _exit(code: int) -> NoReturn:
    """Exit without Python's teardown of every module's objects, one by one: after a crawl
    that took 30 ms, and 80–130 ms in a `--processes` parent (BENCHMARKS.md, issue 29).
    Nothing is lost by it: crawl() closes its sinks in a `finally`, the writer threads are
    daemons (cut off by either exit), and what atexit holds still runs. A live non-daemon
    thread, or a standard stream that can't be flushed (a closed pipe), takes the usual way
    out, and Python's own word for it."""
    atexit._run_exitfuncs()  # first, so what they print is flushed; it empties the list
    if any(not t.daemon and t is not threading.main_thread() for t in threading.enumerate()):
        sys.exit(code)  # a thread to wait for: Python's own exit waits
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    console()
