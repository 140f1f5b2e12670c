"""TUI overhead: the same crawl of the demo site, headless and under the TUI.

    .venv/bin/python bench/tui_overhead.py [--runs 5] [--concurrency 10] [--hz 5]

The demo site (fast mode: no latency) runs in a child process, as `crawltop demo` does,
so it does not share this process's loop or GIL. In this process the runs alternate:

  headless  `await crawler.crawl()`, nothing else on the loop;
  tui       the same crawl inside CrawlApp, driven headlessly by App.run_test at
            120x40: the refresh timer, the snapshot, the diffed tables and Textual's
            compositor all run on the crawl's loop, exactly as on a terminal (only the
            bytes are not written to a tty).

Each run's rate is pages fetched / wall time of crawl() itself (app start-up is not
counted). Prints every run, the medians and the ratio tui / headless (target >= 0.9).
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from core import CrawlConfig, Crawler  # noqa: E402
from tui.app import CrawlApp  # noqa: E402


class Timed:
    """Wraps crawler.crawl to time the crawl itself, whoever starts it."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.inner = crawler.crawl
        self.seconds = 0.0
        crawler.crawl = self  # type: ignore[method-assign]

    async def __call__(self) -> None:
        t0 = time.perf_counter()
        try:
            await self.inner()
        finally:
            self.seconds = time.perf_counter() - t0


def make(url: str, concurrency: int) -> tuple[Crawler, Timed]:
    crawler = Crawler(CrawlConfig(roots=(url,), concurrency=concurrency, timeout=10.0))
    return crawler, Timed(crawler)


async def headless(url: str, concurrency: int, hz: float) -> tuple[int, float, int]:
    crawler, timed = make(url, concurrency)
    await crawler.crawl()
    return crawler.stats.pages, timed.seconds, 0


async def tui(url: str, concurrency: int, hz: float) -> tuple[int, float, int]:
    crawler, timed = make(url, concurrency)
    app = CrawlApp(crawler, refresh_hz=hz, exit_on_finish=True)
    async with app.run_test(size=(120, 40)) as pilot:
        while app.crawl_task is None or not app.crawl_task.done():
            await pilot.pause(0.05)
    return crawler.stats.pages, timed.seconds, app.frames


async def main_async(url: str, runs: int, concurrency: int, hz: float) -> None:
    await headless(url, concurrency, hz)  # warm-up: imports, caches, the site's first hits
    rates: dict[str, list[float]] = {"headless": [], "tui": []}
    for i in range(runs):
        order = (("headless", headless), ("tui", tui)) if i % 2 == 0 else (("tui", tui), ("headless", headless))
        for name, fn in order:
            pages, seconds, frames = await fn(url, concurrency, hz)
            rate = pages / seconds
            rates[name].append(rate)
            extra = f"  {frames} frames ({frames / seconds:.1f}/s)" if name == "tui" else ""
            print(f"run {i + 1} {name:8}  {pages} pages in {seconds:6.2f} s  {rate:7.1f} pages/s{extra}", flush=True)
    h, t = statistics.median(rates["headless"]), statistics.median(rates["tui"])
    print()
    print(f"median headless  {h:7.1f} pages/s")
    print(f"median tui       {t:7.1f} pages/s")
    print(f"ratio tui/headless  {t / h:.3f}  (target >= 0.9; concurrency {concurrency}, refresh {hz:g} Hz, {runs} runs each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--concurrency", "-c", type=int, default=10)
    parser.add_argument("--hz", type=float, default=5.0, help="TUI refresh rate (default 5, as the app)")
    args = parser.parse_args()
    site = subprocess.Popen(
        [sys.executable, "-m", "demo.serve", "--fast"], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        url = site.stdout.readline().strip()  # type: ignore[union-attr]
        if not url.startswith("http"):
            raise SystemExit("the demo site did not start")
        print(f"demo site (fast) at {url}, child process {site.pid}", flush=True)
        asyncio.run(main_async(url, args.runs, args.concurrency, args.hz))
    finally:
        site.terminate()
        site.wait(timeout=10)


if __name__ == "__main__":
    main()
