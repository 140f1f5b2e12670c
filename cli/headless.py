"""Running without the TUI: a progress line on stderr, the final report on stdout."""
from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from typing import TextIO

from ..core.monitor import browsertext
from ..core.monitor.sanitize import clean
from ..core.monitor.stats import Snapshot
from ..core.surface import Engine, Monitor
from .endreport import number, one_process
from .exitcodes import EXIT_NO_ROOT, EXIT_OK

PROGRESS_EVERY = 2.0
NOTICE_POLL = 0.25  # how soon a new notice gets its own line


def progress_line(s: Snapshot) -> str:
    n = number
    beside = f" requisites {n(s.requisites)}" if s.requisites else ""
    beside += f" external {n(s.externals)}" if s.externals else ""
    return (
        f"[{s.elapsed:7.1f}s] {s.state.lower():8} pages {n(s.pages)} ({n(s.rate_now)}/s now, "
        f"{n(s.rate_avg)}/s avg){beside} queue {n(s.queued)} seen {n(s.seen)} busy {s.busy}/{s.concurrency} "
        f"errors {n(s.errors)} merges {n(s.merges)}"
        + (f" skipped {n(s.skipped)}" if s.skipped else "") + (f" cancelled {n(s.cancelled)}" if s.cancelled else "")
        + hosts_part(s) + browser_part(s) + (f"  [{s.notice}]" if s.notice else "")
    )


def browser_part(s: Snapshot) -> str:
    """--browser: Chromium's memory and restarts, as the Workers panel's title has them (an
    operator of a headless crawl watches its memory too: past --browser-memory it restarts)."""
    b = s.browser
    return "" if b is None else "  " + browsertext.words(b.memory, b.restarts)


def hosts_part(s: Snapshot) -> str:
    """Hosts by state when there are several, and why the pool is idle if it is."""
    counts = {k: v for k, v in s.host_counts.items() if v}
    total = sum(counts.values())
    if total <= 1 and not s.next_due:
        return ""
    text = f"  hosts {number(total)}: " + " ".join(f"{number(n)} {state}" for state, n in counts.items())
    if s.next_due is not None and s.queued and not s.busy:
        text += f", next due in {s.next_due:.1f}s"
    return text


def report(crawler: Engine, out: TextIO) -> None:
    """The end report of a crawl in this process (cli/endreport.py: every variant's)."""
    out.write(one_process(crawler))


async def _progress(crawler: Monitor, err: TextIO) -> None:
    """A line every PROGRESS_EVERY seconds, and one at once when the notice changes (Redis
    down, partitions waiting for a node): a log shows when an outage began, not the next
    tick's view of it, which may come after it ended."""
    loop = asyncio.get_running_loop()
    next_at, shown = loop.time() + PROGRESS_EVERY, ""
    while True:
        await asyncio.sleep(NOTICE_POLL)
        notice = getattr(crawler.stats, "notice", "")  # (a Stats has one; a monitor's copy may not)
        if loop.time() >= next_at or (notice and notice != shown):
            err.write(progress_line(crawler.stats.snapshot()) + "\n")
            err.flush()
            shown, next_at = notice, loop.time() + PROGRESS_EVERY


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
                       quiet: bool = False, roots_code: bool = True, end: Callable[[], str] | None = None) -> int:
    """Crawl to the end (or to Ctrl-C, which stops cleanly) and print the report (`end`
    makes it when this process's own run is not the whole crawl: cli/endreport.py); the exit
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
    out.write(end() if end is not None else one_process(crawler))
    return exit_code(crawler, err) if roots_code else EXIT_OK
