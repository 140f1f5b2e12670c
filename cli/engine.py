"""This process as one engine of a crawl shared through Redis (`crawl --redis`, `join`),
and the whole crawl's report that the last process out writes."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ..core.cluster import connect as cluster
from ..core.cluster.member import Member
from ..core.cluster.view import ClusterView
from ..core.config import CrawlConfig
from ..core.crawler import Crawler
from ..core.monitor.sanitize import clean
from . import hangup
from .listen import listen
from .run import run_crawler
from .state_file import extra_sinks


def engine(args: argparse.Namespace, url: str, name: str, config: CrawlConfig) -> int:
    """This process as one engine of crawl NAME, with its TUI (the whole crawl's numbers,
    its processes panel) or headless."""
    frontier = cluster.frontier(url, name, config)
    crawler = Crawler(config, frontier=frontier, sinks=[frontier.sink, *extra_sinks(args, config, (url, name))])
    reports = not getattr(args, "no_final_report", False)
    member = Member(crawler, frontier, reports=reports)
    args.socket_base, args.name = name, None  # sockets NAME, NAME-2, ...: one per process here
    if args.headless or not sys.stdout.isatty():
        code = run_crawler(member, args)
    else:  # the TUI shows the whole crawl; the socket (ctl, attach) stays this process's own
        from ..tui.app import run_tui
        from .headless import report

        local = listen(member, args)
        local.control.mode = "tui"
        view = ClusterView(frontier.redis, name, list(crawler.roots), local=local, lease=frontier.lease)
        code = run_tui(view,
                       exit_on_finish=args.exit_on_finish,
                       hangup=hangup.Hangup(getattr(args, "on_hangup", "detach"), local.control))
        report(member, sys.stdout)
    records = crawler.stats.records
    print(f"  redis: {frontier.round_trips} round trips for {records} records "
          f"({frontier.round_trips / max(1, records):.2f} per record, heartbeats included)", file=sys.stdout)
    if not member.left:
        print(f"crawltop: Redis unreachable at exit: the URLs this process held go back on the "
              f"queue when their leases run out ({frontier.lease:g} s)", file=sys.stderr)
    if member.reporter and reports:
        print(f"crawl {name!r} finished; this was its last process: the whole crawl's report follows. "
              f"Records: crawltop export --redis {url} {name} --jsonl FILE", file=sys.stderr)
        final_report(url, name)
    return code


def final_report(url: str, name: str) -> None:
    """The last process out writes the report of the whole crawl (`crawltop report`'s)."""
    from ..core.cluster.oneshot import records
    from ..core.reporting.formats import FORMATS
    from ..core.reporting.linkcheck import analyse

    write_report(lambda: FORMATS["text"](analyse(records(url, name), source=f"crawl {name} on Redis")))


def write_report(make: Callable[[], str]) -> None:
    """The whole crawl's report on stdout; if it can't be made or written, one line on stderr."""
    try:
        sys.stdout.write(make())
        sys.stdout.flush()
    except Exception as exc:  # the crawl is done and its records are safe in Redis: say why, no traceback
        print(f"crawltop: the final report could not be written: {clean(exc)}", file=sys.stderr)
