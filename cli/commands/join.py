"""`crawltop join NAME --redis URL`: this process as one more engine of a crawl shared
through Redis, with the crawl's own settings and its own -c, -o and secrets. Each
child of `crawl --processes` is a join too (`child_main`)."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import Any

from ...core.config import CrawlConfig
from ...core.errors import UsageError
from ...core.monitor.sanitize import clean
from ...core.secrets import require
from ...core.sockets.rundir import check_name
from .. import hangup, shared
from ..options import Parser, add_crawl_options, add_session_options, add_warc, positive, session_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    join = sub.add_parser("join", help="add this process to a crawl shared through Redis")
    join.add_argument("name", metavar="NAME", help="the crawl's name (its --name)")
    join.add_argument("--redis", metavar="URL", required=True, help="the crawl's Redis (as given to crawl --redis)")
    join.add_argument("-c", "--concurrency", type=positive(int), default=None, metavar="N",
                      help="worker tasks in this process (default: the crawl's)")
    join.add_argument("--output", "-o", default=None, metavar="FILE.jsonl",
                      help="also write the records this process fetches to this file (default: none)")
    join.add_argument("--headless", action="store_true", help="no TUI (default when stdout is not a TTY)")
    join.add_argument("--quiet", "-q", action="store_true",
                      help="headless without the progress lines; the report and errors still print (default: off)")
    join.add_argument("--exit-on-finish", action="store_true", help="TUI: close when the crawl ends")
    join.add_argument("--detach", action="store_true", help="run in the background (default: off)")
    hangup.add_argument(join)
    add_warc(join, wacz=False)  # this process's own WARC files of the series (cli/archive.py)
    add_session_options(join, join=True)  # the secrets: never in Redis, given to each process
    join.add_argument("--browser-path", default=None, metavar="PATH",
                      help="a crawl made with --browser: the Chromium this process launches (default: the crawl's "
                           "--browser-path if this machine has it, else /usr/lib/chromium/chromium, else "
                           "Playwright's own)")
    # --processes' children: their parent writes the whole crawl's report, once
    join.add_argument("--no-final-report", action="store_true", help=argparse.SUPPRESS)
    crawl_level(join)


class _CrawlLevel(argparse.Action):
    """A crawl option given to `join`: one line and exit 2, not argparse's "unrecognized"."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        parser.error(f"{option_string}: that is a crawl-level setting taken from Redis; join uses the crawl's own "
                     f"(set it on the first `crawl --redis`)")


def crawl_level(join: argparse.ArgumentParser) -> None:
    """Every crawl option join does not take itself is known to it, to be refused clearly."""
    probe = argparse.ArgumentParser(add_help=False)
    add_crawl_options(probe)
    probe.add_argument("--expect-urls", "--partitions")  # a shared crawl's, fixed when it is made
    taken = set(join._option_string_actions)
    for action in probe._actions:
        strings = [o for o in action.option_strings if o not in taken]
        if strings:
            join.add_argument(*strings, action=_CrawlLevel, nargs=0 if action.nargs == 0 else "?",
                              default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # (no attribute when absent)


def run(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Join crawl NAME: refused in one line if it cannot be; a note if it has finished."""
    import asyncio

    from ...core.cluster.oneshot import join
    from ..engine import engine

    name = check_name(args.name)
    config, status = asyncio.run(join(args.redis, name))
    if status == "finished":
        return shared.finished(args.redis, name)
    overrides = {"output": args.output, **({"concurrency": args.concurrency} if args.concurrency else {})}
    config = dataclasses.replace(config, **overrides, **_own_secrets(args), **_own_browser(args, config))
    require(config, f"joining {name}")
    return engine(args, args.redis, name, config)


def _own_browser(args: argparse.Namespace, config: CrawlConfig) -> dict[str, Any]:
    """A crawl made with --browser runs a Chromium in every engine, this one too (each its
    own, -c tabs, gone with its process), so the tabs of every engine load the site's pages
    alike: checked here as `crawl --browser` checks it, one line and exit 2 when this machine
    lacks Playwright or a Chromium. The crawl's --browser-path is another machine's path:
    used here if it exists, else this machine's default, unless --browser-path names one."""
    if not config.browser:
        if args.browser_path:
            raise UsageError(f"--browser-path: crawl {args.name!r} was not made with --browser")
        return {}
    from ...core.fetching.browser import check

    path = args.browser_path or (config.browser_path if config.browser_path and os.path.exists(config.browser_path)
                                 else None)
    check(path)
    return {"browser_path": os.path.abspath(path) if path else None}


def _own_secrets(args: argparse.Namespace) -> dict[str, Any]:
    """What a joining process brings itself: header values, proxy, cookies.
    Everything else (--header-host, the header names, the proxy's host) is the crawl's."""
    given = session_options(args)
    out: dict[str, Any] = {k: given[k] for k in ("cookies", "save_cookies") if k in given}
    if args.header:
        out["headers"] = given["headers"]
    if args.proxy:
        out["proxy"] = given["proxy"]
    if args.no_proxy:
        out["env_proxy"] = False
    return out


def child_main(argv: Sequence[str]) -> int:
    """`crawltop join ...` in a child forked by `crawl --processes` (cli/processes.py):
    parsed and run as cli/main.py would, errors in one line, exit 2."""
    parser = Parser(prog="crawltop")
    add_parser(parser.add_subparsers(dest="command", required=True, parser_class=Parser))
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (UsageError, OSError) as exc:  # bad input, unwritable output, failing disk
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 2
