"""`crawltop resume PATH`: continue a crawl from its --state file (cli/state_file.py)."""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from .. import listen
from ..options import add_crawl_options, add_warc


def add_parser(sub: argparse._SubParsersAction) -> None:
    resume = sub.add_parser("resume", help="continue a crawl from its --state file (options given here win)")
    resume.add_argument("state", metavar="PATH", help="the --state file of the crawl to continue")
    add_crawl_options(resume)
    add_warc(resume)
    listen.add_arguments(resume)  # --name, --detach, --on-hangup


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from ..state_file import run as run_state

    return run_state(args, argv)
