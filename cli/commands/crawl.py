"""`crawltop crawl ROOT...`: a crawl in this process, kept in a --state file or in
memory, or shared through Redis (`--redis`, `--processes`)."""
from __future__ import annotations

import argparse
from collections.abc import Sequence

from ...core.config import CrawlConfig
from .. import listen, shared
from ..options import add_crawl_options, add_warc, check_roots, config_from


def add_parser(sub: argparse._SubParsersAction) -> None:
    crawl = sub.add_parser("crawl", help="crawl one or more roots")
    crawl.add_argument("roots", nargs="+", metavar="ROOT", help="http(s) URL to start from (one or more)")
    add_crawl_options(crawl)
    add_warc(crawl)
    crawl.add_argument("--state", metavar="PATH", default=None,
                       help="keep the crawl state in this SQLite file; resume it if it exists "
                            "(default: memory only)")
    shared.add_options(crawl)
    listen.add_arguments(crawl)  # --name, --detach, --on-hangup


def run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    check_roots(args.roots)  # before the engine is imported: a usage error answers at once
    shared.check_mix(args)
    if args.state:
        from ..state_file import run as run_state

        return run_state(args, argv)
    return crawl(args, args.roots)


def crawl(args: argparse.Namespace, roots: Sequence[str]) -> int:
    """`crawl` and `demo` from ROOTs: here, or as one engine of a crawl shared through Redis."""
    if shared.wants_cluster(args):
        return run_shared(args, config_from(args, roots))
    from ...core.crawler import Crawler
    from ..archive import options_of, wacz
    from ..run import run_crawler
    from ..state_file import extra_sinks

    config = config_from(args, roots)
    crawler = Crawler(config, sinks=extra_sinks(args, config))
    code = run_crawler(crawler, args)
    return wacz(options_of(args)) or code


def run_shared(args: argparse.Namespace, config: CrawlConfig) -> int:
    """`crawl`/`demo` with --redis (this process one engine) or --processes (N children)."""
    name = shared.name_of(args, config.roots)
    from ..archive import options_of, wacz

    if args.processes:
        from ..processes import supervise
        from .join import child_main

        code = supervise(args, name, config, child_main)
        return wacz(options_of(args)) or code
    import asyncio

    from ...core.cluster.oneshot import start
    from ..engine import engine

    if asyncio.run(start(args.redis, name, config, expect_urls=args.expect_urls,
                         partitions=args.partitions)) == "finished":
        return shared.finished(args.redis, name)
    code = engine(args, args.redis, name, config)
    return wacz(options_of(args)) or code
