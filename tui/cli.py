"""`crawltop crawl|demo`: parse options, build the Crawler, run it with or without the TUI."""
from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
from typing import NoReturn, Sequence

from core.config import CrawlConfig
from core.crawler import VERSION, Crawler
from core.errors import UsageError
from core.sanitize import clean
from tui import state_cli


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        self.exit(2, f"crawltop: error: {message}\n")


def _positive(kind: type) -> object:
    def parse(text: str) -> object:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def _add_crawl_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--concurrency", type=_positive(int), default=10)
    p.add_argument("--max-redirect", type=int, default=10)
    p.add_argument("--max-tries", type=_positive(int), default=4)
    p.add_argument("--scope", choices=("host", "domain", "any"), default="host")
    p.add_argument("--include", action="append", default=[], metavar="REGEX")
    p.add_argument("--exclude", action="append", default=[], metavar="REGEX")
    p.add_argument("--max-depth", type=int, default=None)
    p.add_argument("--max-pages", type=_positive(int), default=None)
    p.add_argument("--timeout", type=_positive(float), default=30.0)
    p.add_argument("--max-bytes", type=_positive(int), default=10 * 1024 * 1024)
    p.add_argument("--per-host", type=_positive(int), default=None)
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--no-robots", action="store_true")
    p.add_argument("--user-agent", default=None)
    p.add_argument("--output", "-o", default=None, metavar="FILE.jsonl")
    p.add_argument("--headless", action="store_true", help="no TUI (also when stdout is not a TTY)")
    p.add_argument("--exit-on-finish", action="store_true", help="TUI: close when the crawl ends")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="crawltop", description="htop for a web crawler")
    parser.add_argument("--version", action="version", version=f"crawltop {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    crawl = sub.add_parser("crawl", help="crawl one or more roots")
    crawl.add_argument("roots", nargs="+", metavar="ROOT")
    _add_crawl_options(crawl)
    demo = sub.add_parser("demo", help="crawl the bundled demo site on 127.0.0.1")
    demo.add_argument("--fast", action="store_true", help="no simulated latency (benchmarks)")
    _add_crawl_options(demo)
    # The demo's stalling page should fail within the crawl's minute or two, not after 4 x 30 s.
    demo.set_defaults(timeout=10.0)
    state_cli.add_arguments(sub, crawl, demo)  # --state, --warc, resume, export
    return parser


def config_from(args: argparse.Namespace, roots: Sequence[str]) -> CrawlConfig:
    for pattern in (*args.include, *args.exclude):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"bad regex {pattern!r}: {exc}") from None
    return CrawlConfig(
        roots=tuple(roots), concurrency=args.concurrency, max_redirect=args.max_redirect,
        max_tries=args.max_tries, scope=args.scope, include=tuple(args.include),
        exclude=tuple(args.exclude), max_depth=args.max_depth, max_pages=args.max_pages,
        timeout=args.timeout, max_bytes=args.max_bytes, per_host=args.per_host,
        delay=args.delay, robots=not args.no_robots, user_agent=args.user_agent, output=args.output,
    )


def _run(crawler: Crawler, args: argparse.Namespace) -> int:
    if args.headless or not sys.stdout.isatty():
        from tui.headless import run_headless

        return asyncio.run(run_headless(crawler))
    from tui.app import run_tui
    from tui.headless import report

    code = run_tui(crawler, exit_on_finish=args.exit_on_finish)
    report(crawler, sys.stdout)  # the screen is gone: leave the totals in the scrollback
    return code


def _start_demo(fast: bool) -> tuple[subprocess.Popen[str], str]:
    """The demo site runs in its own process, so it doesn't share the crawler's CPU."""
    cmd = [sys.executable, "-m", "demo.serve"] + (["--fast"] if fast else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise UsageError("the demo site did not start")
    return proc, url


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    server: subprocess.Popen[str] | None = None
    try:
        if state_cli.wants_state(args):
            return state_cli.run(args, argv)
        if args.command == "demo":
            server, url = _start_demo(args.fast)
            roots: Sequence[str] = [url]
        else:
            roots = args.roots
        crawler = Crawler(config_from(args, roots), sinks=state_cli.extra_sinks(args))
        return _run(crawler, args)
    except (UsageError, OSError) as exc:  # bad input, unwritable output, failing disk
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.terminate()
            server.wait()


def console() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    console()
