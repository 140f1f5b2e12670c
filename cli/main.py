"""`crawltop crawl|demo|resume|export`: the parser, then the Crawler, run with or without the TUI.

Textual is imported only on the path that opens the TUI."""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..core.cluster.server import die_with_parent
from ..core.crawler import VERSION, Crawler
from ..core.errors import UsageError
from ..core.sanitize import clean
from . import attach, cluster, ctl, detach, listen, report, state
from .options import Parser, add_crawl_options, config_from
from .run import run_crawler


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="crawltop", description="htop for a web crawler")
    parser.add_argument("--version", action="version", version=f"crawltop {VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    crawl = sub.add_parser("crawl", help="crawl one or more roots")
    crawl.add_argument("roots", nargs="+", metavar="ROOT", help="http(s) URL to start from (one or more)")
    add_crawl_options(crawl)
    demo = sub.add_parser("demo", help="crawl the bundled demo site on 127.0.0.1")
    demo.add_argument("--fast", action="store_true", help="serve the demo without its simulated latency (default: off)")
    # The demo's stalling page should fail within the crawl's minute or two, not after 4 x 30 s.
    add_crawl_options(demo, timeout=10.0)
    state.add_arguments(sub, crawl, demo)  # --state, --warc, resume, export
    cluster.add_arguments(sub, crawl, demo)  # --redis, --processes, join
    for name in ("crawl", "demo", "resume"):
        listen.add_arguments(sub.choices[name])  # --name, --detach
    ctl.add_arguments(sub)  # ls, ctl
    attach.add_arguments(sub)  # attach, web
    report.add_arguments(sub)
    return parser


def _start_demo(fast: bool) -> tuple[subprocess.Popen[str], str]:
    """The demo site runs in its own process, so it doesn't share the crawler's CPU. It
    lives exactly as long as the crawl: a hang-up that detaches the crawl doesn't kill it
    (SIGHUP ignored), and the crawl's death, even by SIGKILL, does (PR_SET_PDEATHSIG)."""
    cmd = [sys.executable, "-m", "crawltop.demo.serve"] + (["--fast"] if fast else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, preexec_fn=_demo_child)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise UsageError("the demo site did not start")
    return proc, url


def _demo_child() -> None:
    """Between fork and exec (no threads run yet): see _start_demo."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    die_with_parent()


def main(argv: Sequence[str] | None = None) -> int:
    argv = [*(sys.argv[1:] if argv is None else argv), *detach.hidden_args()]  # secrets of a --detach
    args = build_parser().parse_args(argv)
    server: subprocess.Popen[str] | None = None
    try:
        if args.command in ("ls", "ctl"):
            return ctl.run(args)
        if args.command in ("attach", "web"):
            return attach.run(args)
        if getattr(args, "detach", False):
            cluster.check_mix(args)  # a refusal here, not in a log nobody reads
            return detach.spawn(argv)
        if args.command == "report":
            return report.run(args)
        if args.command == "export" and args.redis:
            return cluster.export(args)
        if args.command == "join":
            return cluster.run(args, None)
        cluster.check_mix(args)
        if state.wants_state(args):
            return state.run(args, argv)
        if args.command == "demo":
            server, url = _start_demo(args.fast)
            roots: Sequence[str] = [url]
        else:
            roots = args.roots
        if cluster.wants_cluster(args):
            return cluster.run(args, config_from(args, roots))
        crawler = Crawler(config_from(args, roots), sinks=state.extra_sinks(args))
        return run_crawler(crawler, args)
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
