"""`crawltop`: the parser, built from one module per subcommand (cli/commands/), and the
dispatch to the command's run, with the one-line error and exit 2 for bad input.

Textual, Redis and the web server are imported only by the commands that use them."""
from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__ as VERSION
from ..core.errors import UsageError
from ..core.monitor.sanitize import clean
from . import clobber, detach, shared, stdout
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
        _check_warc_settings(args)
        if getattr(args, "detach", False):
            shared.check_mix(args)  # a refusal here, not in a log nobody reads
            return detach.spawn(argv)
        return COMMANDS[args.command].run(args, argv)
    except BrokenPipeError as exc:  # (a write to stdout itself goes on: cli/stdout.py)
        if not stdout.gone():  # a pipe of the command's own (`-o >(gzip ...)`) broke
            print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
            return 2
        stdout.silence()  # `export --jsonl -`: a copy of stdout's fd, whose reader left
        return EXIT_READER_LEFT
    except (UsageError, OSError) as exc:  # bad input, unwritable output, failing disk
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 2


def _check_warc_settings(args: argparse.Namespace) -> None:
    """--wacz, --dedup-from ... without --warc: refused before a demo site, a Redis or a
    state file is touched (a saved crawl's own series is checked with its settings)."""
    if args.command not in ("crawl", "demo", "join") or getattr(args, "warc", None):
        return
    state = getattr(args, "state", None)
    if state and os.path.exists(state):
        return
    from .archive import needs_warc

    needs_warc(args)


def console() -> NoReturn:
    stdout.guard()  # a reader that leaves mid-command: the command still ends as it should
    _exit(main())


def _exit(code: int) -> NoReturn:
    """Exit without Python's teardown of every module's objects, one by one: after a crawl
    that took 30 ms, and 80–130 ms in a `--processes` parent (docs/benchmarks/redis.md, "Syscalls off the hot path").
    Nothing is lost by it: crawl() closes its sinks in a `finally`, the writer threads are
    daemons (cut off by either exit), and what atexit holds still runs. A live non-daemon
    thread, or a standard stream that can't be flushed (a closed pipe), takes the usual way
    out, and Python's own word for it."""
    atexit._run_exitfuncs()  # first, so what they print is flushed; it empties the list
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        flushed = True
    except (OSError, ValueError):
        flushed = False
    if code == 0 and stdout.reader_left():
        code = EXIT_READER_LEFT
    if not flushed or any(not t.daemon and t is not threading.main_thread() for t in threading.enumerate()):
        sys.exit(code)  # a thread to wait for, or a stream to give up on: Python's own exit
    os._exit(code)


if __name__ == "__main__":
    console()
