"""Running without the TUI: a progress line on stderr, the final report on stdout."""
from __future__ import annotations

import asyncio
import signal
import sys
from typing import TextIO

from ..core.monitor.sanitize import clean
from ..core.monitor.stats import Snapshot
from ..core.outcomes import KIND_WORDS, outcome_line
from ..core.surface import Engine, Monitor
from .exitcodes import EXIT_NO_ROOT, EXIT_OK

PROGRESS_EVERY = 2.0


def progress_line(s: Snapshot) -> str:
    beside = f" requisites {s.requisites}" if s.requisites else ""
    beside += f" external {s.externals}" if s.externals else ""
    return (
        f"[{s.elapsed:7.1f}s] {s.state.lower():8} pages {s.pages} ({s.rate_now:.0f}/s now, "
        f"{s.rate_avg:.0f}/s avg){beside} queue {s.queued} seen {s.seen} busy {s.busy}/{s.concurrency} "
        f"errors {s.errors} merges {s.merges}"
        + (f" skipped {s.skipped}" if s.skipped else "") + (f" cancelled {s.cancelled}" if s.cancelled else "")
        + hosts_part(s) + (f"  [{s.notice}]" if s.notice else "")
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
    w(f"  outcomes: {outcome_line(s.outcomes, s.fetched_classes)}\n")
    w(f"  redirects {s.redirects}  merges {s.merges}  retries {s.retries}  "
      f"robots-blocked {s.robots_blocked}  ignored {s.ignored}  truncated {s.truncated}\n")
    if s.sitemap_probes:  # guessed /sitemap.xml: no record unless found (core/fetching/sitemaps.py)
        w(f"  sitemap probes {s.sitemap_probes} ({s.sitemap_found} found)\n")
    w("  status codes:" + ("\n" if s.statuses else " none (no server answered)\n"))
    for code, n in sorted(s.statuses.items()):
        w(f"    {code:>5}  {n}\n")
    if s.host_counts.get("retired") or s.hosts_over_budget:
        w(f"  hosts {sum(s.host_counts.values())}: retired {s.host_counts.get('retired', 0)}  "
          f"URLs over --max-pages-per-host {s.hosts_over_budget}\n")
    w(f"  errors: {s.errors}\n")  # the failed URLs (core/outcomes.py); skipped and cancelled are apart
    words = _latest_reasons(s)
    for kind, n in sorted(s.errors_by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
        w(f"    {n:>5}  {clean(kind, 40)}: {clean(words.get(kind, KIND_WORDS.get(kind, kind)), 80)}\n")
    top = crawler.stats.top_error_urls(10)
    if top:
        w("  top error URLs (by tries spent):\n")
        for url, n in top:
            w(f"    {n:>5}  {clean(url, 2000)}\n")


def _latest_reasons(s: Snapshot) -> dict[str, str]:
    """Each error_kind's latest reason in words (the ring keeps the latest errors)."""
    return {e.error_kind: e.kind for e in s.recent_errors if e.error_kind}


async def _progress(crawler: Monitor, err: TextIO) -> None:
    while True:
        await asyncio.sleep(PROGRESS_EVERY)
        err.write(progress_line(crawler.stats.snapshot()) + "\n")
        err.flush()


def no_root_fetched(crawler: Engine) -> str | None:
    """Why no root could be fetched at all (`http://127.0.0.1:9/: connection refused`), or
    None when any server answered: exit code 4 then, else 0."""
    s = crawler.stats.snapshot()
    if s.pages:
        return None
    roots = set(crawler.roots)
    failed = [f"{clean(e.url, 300)}: {clean(e.kind, 120)}" for e in s.recent_errors if e.url in roots]
    return "; ".join(dict.fromkeys(failed)) or None


def exit_code(crawler: Engine, err: TextIO) -> int:
    """0 when the crawl ran; 4, with the reason on stderr, when no root could be fetched."""
    why = no_root_fetched(crawler)
    if why is None:
        return EXIT_OK
    err.write(f"crawltop: no root could be fetched: {why}\n")
    err.flush()
    return EXIT_NO_ROOT


async def run_headless(crawler: Engine, *, out: TextIO | None = None, err: TextIO | None = None,
                       quiet: bool = False, roots_code: bool = True) -> int:
    """Crawl to the end (or to Ctrl-C, which stops cleanly) and print the report; the exit
    code says whether any root could be fetched (EXIT_CODES). `out` and `err` default to
    the streams at the call (cli/stdout.py may have wrapped stdout since this was imported)."""
    out, err = out or sys.stdout, err or sys.stderr
    from ..core.sockets.server import Listening

    def on_signal(name: str) -> None:
        if isinstance(crawler, Listening):
            crawler.stop_by(name)  # the ended summary says who stopped it (core/sockets/ended.py)
        else:
            crawler.stop()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig.name)
    ticker = None if quiet else asyncio.create_task(_progress(crawler, err))
    try:
        await crawler.crawl()
    finally:
        if ticker is not None:
            ticker.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    report(crawler, out)
    return exit_code(crawler, err) if roots_code else EXIT_OK
