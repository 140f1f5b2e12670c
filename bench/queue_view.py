"""The queue view with a million queued URLs: what it costs to keep its
counters as URLs are queued and taken, and what one frame with the view open costs.

For each frontier (memory, and SQLite in a temporary --state file) the script queues
N URLs through `Crawler._admit` (the crawl's own path: ignores, frontier.add, the
prefix counters), side by side with plain `frontier.add` of the same URLs into a fresh
frontier, then times:

- `stats.snapshot()` + `queue_view()`: what the app reads per frame with `u` open;
- a whole app frame (`CrawlApp.refresh_now()`, headless Textual at 120x40) with the
  queue view open, on the memory frontier;
- `queue_stats.taken()` per URL.

The URL mix: 200 sections with 50 sub-directories each, one calendar trap
(/calendar/YYYY/MM/DD/), 20% query variants of 500 search paths.

    .venv/bin/python bench/queue_view.py                 # 1,000,000 URLs
    .venv/bin/python bench/queue_view.py --urls 200000
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from pathlib import Path

from crawltop.core import CrawlConfig, Crawler
from crawltop.core.queueing.frontier import Item, MemoryFrontier
from crawltop.core.storage.store import SqliteStore

HOST = "http://bench.example:8080"


def urls(n: int) -> list[str]:
    out = []
    for k in range(n):
        r = k % 10
        if r < 2:
            out.append(f"{HOST}/search/{k % 500}?q={k}&page={k % 7}")
        elif r < 4:
            out.append(f"{HOST}/calendar/{2000 + k % 97}/{k % 12 + 1:02d}/{k % 28 + 1:02d}/e{k}")
        else:
            out.append(f"{HOST}/s{k % 200}/d{k % 50}/page-{k}.html")
    return out


def per_url(seconds: float, n: int) -> str:
    return f"{seconds / n * 1e6:.2f} us"


def time_frames(fn, n: int) -> float:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


async def measure(kind: str, batch: list[str], tmp: Path, frames: int, app_frame: bool) -> None:
    def fresh(name: str):
        return MemoryFrontier() if kind == "memory" else SqliteStore.open(str(tmp / f"{name}.db"))

    plain = fresh("plain")
    gc.collect()
    t = time.perf_counter()
    for u in batch:
        plain.add(Item(u, 10, 1))
    t_plain = time.perf_counter() - t

    frontier = fresh("crawl")
    crawler = Crawler(CrawlConfig(roots=(HOST + "/",)), frontier=frontier)
    gc.collect()
    t = time.perf_counter()
    for u in batch:
        crawler._admit(u, 10, 1)
    t_admit = time.perf_counter() - t
    n = len(batch)
    print(f"[{kind}] queue {n:,} URLs: frontier.add {per_url(t_plain, n)}/URL, "
          f"_admit with the counters {per_url(t_admit, n)}/URL ({t_admit / t_plain:.2f}x)")

    snap = time_frames(crawler.stats.snapshot, frames)
    view = time_frames(crawler.steering.queue_view, frames)
    both = time_frames(lambda: (crawler.stats.snapshot(), crawler.steering.queue_view()), frames)
    v = crawler.steering.queue_view()
    print(f"[{kind}] per frame (median of {frames}): stats.snapshot {snap * 1e3:.3f} ms, "
          f"queue_view {view * 1e3:.3f} ms, both {both * 1e3:.3f} ms; "
          f"{len(v.prefixes)} prefixes, traps: {', '.join(t.line() for t in v.traps) or 'none'}")

    if app_frame:
        from crawltop.tui.app import CrawlApp
        from crawltop.tui.screens.steer import QueueScreen

        app = CrawlApp(crawler, refresh_hz=0.5)
        app._start_crawl = lambda: None  # type: ignore[method-assign]  # frames only, no crawl
        async with app.run_test(size=(120, 40)) as pilot:
            main = time_frames(app.refresh_now, frames)
            await pilot.press("u")
            while not isinstance(app.screen, QueueScreen):
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            open_ = time_frames(app.refresh_now, frames)
        print(f"[{kind}] app frame 120x40 (median of {frames}): main screen {main * 1e3:.2f} ms, "
              f"queue view open {open_ * 1e3:.2f} ms")

    t = time.perf_counter()
    for u in batch[: n // 10]:
        crawler.steering.queue_stats.taken(u)
    t_taken = time.perf_counter() - t
    print(f"[{kind}] queue_stats.taken {per_url(t_taken, n // 10)}/URL")
    for f in (plain, frontier):
        if hasattr(f, "close"):
            f.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    batch = urls(args.urls)
    with tempfile.TemporaryDirectory() as tmp:
        await measure("memory", batch, Path(tmp), args.frames, app_frame=True)
        if not args.skip_sqlite:
            await measure("sqlite", batch, Path(tmp), args.frames, app_frame=False)


if __name__ == "__main__":
    asyncio.run(main())
