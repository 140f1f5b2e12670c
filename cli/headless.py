"""Running without the TUI: a progress line on stderr, the final report on stdout."""
from __future__ import annotations

import asyncio
import signal
import sys
from typing import TextIO

from ..core.monitor.sanitize import clean
from ..core.monitor.stats import Snapshot
from ..core.surface import Engine, Monitor

PROGRESS_EVERY = 2.0


def progress_line(s: Snapshot) -> str:
    beside = f" requisites {s.requisites}" if s.requisites else ""
    beside += f" external {s.externals}" if s.externals else ""
    return (
        f"[{s.elapsed:7.1f}s] {s.state.lower():8} pages {s.pages} ({s.rate_now:.0f}/s now, "
        f"{s.rate_avg:.0f}/s avg){beside} queue {s.queued} seen {s.seen} busy {s.busy}/{s.concurrency} "
        f"errors {s.errors} merges {s.merges}" + hosts_part(s) + (f"  [{s.notice}]" if s.notice else "")
    )


def hosts_part(s: Snapshot) -> str:
    """Hosts by state when there are several, and why the pool is idle if it is."""
    counts = {k: v for k, v in s.host_counts.items() if v}
    total = sum(counts.values())
    if total <= 1 and not s.next_due:
        return ""
    text = f"  hosts {total}: " + " ".join(f"{n} {state}" for state, n in counts.items())
    if s.next_due is not None and s.queued and not s.busy:
        text += f", next due in {s.next_due:.1f}s"
    return text


def report(crawler: Engine, out: TextIO) -> None:
    s = crawler.stats.snapshot()
    w = out.write
    w(f"crawltop report: {', '.join(clean(r) for r in crawler.roots)}\n")
    if s.resumed_from:
        w(f"  resumed: {s.resumed_from} records carried over\n")
    w(f"  records {s.records}  pages {s.pages}  requisites {s.requisites}  external {s.externals}  "
      f"bytes {s.bytes}  elapsed {s.elapsed:.1f}s  pages/s {s.rate_avg:.1f}\n")
    w(f"  redirects {s.redirects}  merges {s.merges}  retries {s.retries}  "
      f"robots-blocked {s.robots_blocked}  truncated {s.truncated}\n")
    if s.sitemap_probes:  # guessed /sitemap.xml: no record unless found (core/fetching/sitemaps.py)
        w(f"  sitemap probes {s.sitemap_probes} ({s.sitemap_found} found)\n")
    w("  status codes:\n")
    for code, n in sorted(s.statuses.items()):
        w(f"    {code:>5}  {n}\n")
    if s.host_counts.get("retired") or s.hosts_over_budget:
        w(f"  hosts {sum(s.host_counts.values())}: retired {s.host_counts.get('retired', 0)}  "
          f"URLs over --max-pages-per-host {s.hosts_over_budget}\n")
    w(f"  errors: {s.errors}\n")
    for kind, n in sorted(s.errors_by_kind.items(), key=lambda kv: -kv[1]):
        w(f"    {n:>5}  {clean(kind, 80)}\n")
    top = crawler.stats.top_error_urls(10)
    if top:
        w("  top error URLs (by tries spent):\n")
        for url, n in top:
            w(f"    {n:>5}  {clean(url, 200)}\n")


async def _progress(crawler: Monitor, err: TextIO) -> None:
    while True:
        await asyncio.sleep(PROGRESS_EVERY)
        err.write(progress_line(crawler.stats.snapshot()) + "\n")
        err.flush()


async def run_headless(crawler: Engine, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Crawl to the end (or to Ctrl-C, which stops cleanly) and print the report."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, crawler.stop)
    ticker = asyncio.create_task(_progress(crawler, err))
    try:
        await crawler.crawl()
    finally:
        ticker.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    report(crawler, out)
    return 0
