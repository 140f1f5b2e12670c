"""`crawltop demo`: the bundled demo site, served by a process of its own, crawled as
`crawl` would crawl it."""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Sequence

from ...core.cluster.server import die_with_parent
from ...core.errors import UsageError
from .. import listen, shared
from ..options import add_crawl_options, add_warc
from .crawl import crawl


def add_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="crawl the bundled demo site on 127.0.0.1")
    demo.add_argument("--fast", action="store_true",
                      help="serve the demo without its simulated latency (default: off)")
    # The demo's stalling page should fail within the crawl's minute or two, not after 4 x 30 s.
    add_crawl_options(demo, timeout=10.0)
    add_warc(demo)
    shared.add_options(demo)
    listen.add_arguments(demo)  # --name, --detach, --on-hangup


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    shared.check_mix(args)
    server, url = _start_demo(args.fast)
    # With --browser the demo's section that JavaScript builds is a second root: no page of the
    # main site links it, so a plain demo crawl stays as it was.
    roots = [url, url + "app/"] if getattr(args, "browser", False) else [url]
    try:
        return crawl(args, roots)
    finally:
        server.terminate()
        server.wait()


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
