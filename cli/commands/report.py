"""`crawltop report SOURCE`: broken links by page, redirect chains, slowest pages, totals.

The analysis is core/reporting/linkcheck.py and the formats core/reporting/formats.py; this module only
parses the options, writes the output and maps the outcome to an exit code:
0 nothing broken, 1 something broken, 2 bad input (one line on stderr).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ...core.errors import ReportError
from ...core.monitor.sanitize import clean
from ..options import whole

# The report's formats, listed here so `--help` and `--format`'s choices need no import of
# core/reporting (checked against FORMATS by tests/cli/test_report.py).
FORMAT_NAMES = ("text", "json", "csv", "markdown", "junit")
WIDTH = 80  # core/reporting/formats.py WIDTH: a terminal's columns


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="broken links by page, redirect chains, slowest pages, totals; "
                                      "exit 1 if anything is broken")
    p.add_argument("source", metavar="SOURCE",
                   help="a records JSONL file (-o) or a --state file (with --redis: the crawl's NAME)")
    p.add_argument("--redis", metavar="URL", default=None,
                   help="report on crawl NAME shared through this Redis: its records stream (default: none)")
    p.add_argument("--format", choices=FORMAT_NAMES, default="text",
                   help="text (80 columns), json, csv (broken links), markdown or junit (default text)")
    p.add_argument("--broken-only", action="store_true",
                   help="only the broken links: no chains, slowest pages or totals (default: everything)")
    p.add_argument("--include-robots", action="store_true",
                   help="count URLs blocked by robots.txt as broken (default: not broken)")
    p.add_argument("--min-status", type=whole(100), default=400, metavar="N",
                   help="an HTTP status >= N is broken, N from 100; 600: only errors (default 400)")
    p.add_argument("--output", "-o", default="-", metavar="FILE",
                   help="write the report to FILE (default: stdout)")


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    from ...core.reporting.formats import FORMATS
    from ...core.reporting.formats import text as text_format
    from ...core.reporting.linkcheck import Options, analyse, load

    options = Options(min_status=args.min_status, include_robots=args.include_robots, broken_only=args.broken_only)
    try:
        if args.redis:
            from ...core.cluster.oneshot import records as shared_records

            records = shared_records(args.redis, args.source)
        else:
            records = load(args.source)
        report = analyse(records, options, source=args.source)
        to_terminal = args.output == "-" and sys.stdout.isatty()
        if args.format == "text":  # URLs are cut to 80 columns only on a terminal: a file keeps them whole
            text = text_format(report, WIDTH if to_terminal else None)
        else:
            text = FORMATS[args.format](report)
        if args.output == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            with open(args.output, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
    except ReportError as exc:
        print(f"crawltop: error: {clean(exc)}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        print(f"crawltop: error: {clean(args.source)}: not text ({exc.reason})", file=sys.stderr)
        return 2
    return 0 if report.ok else 1
