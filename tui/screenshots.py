"""Regenerate the SVGs in screenshots/ from a real crawl of the demo site.

    .venv/bin/python -m crawltop.tui.screenshots [--out screenshots]      (or: make screenshots)

The demo site runs in a child process with its realistic latency, the crawl runs with
the real engine, and the app is driven headlessly with the same keys a person presses:
the live screen mid-crawl (120x40 and 80x24), `p` (paused), `e` (the error list), then
`]` to finish sooner, and the summary the app shows when the crawl is done.
"""
from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

from ..core import CrawlConfig, Crawler
from .app import CrawlApp
from .screens import ErrorListScreen
from .summary import SummaryScreen

REPO = Path(__file__).resolve().parent.parent


async def _until(pilot, cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: gave up waiting for {what}")
        await pilot.pause(0.1)


async def shoot(url: str, out: Path, warmup: float) -> list[Path]:
    crawler = Crawler(CrawlConfig(roots=(url,), concurrency=10, timeout=5.0))
    app = CrawlApp(crawler)
    saved: list[Path] = []

    def save(name: str) -> None:
        path = out / name
        app.save_screenshot(filename=name, path=str(out))
        saved.append(path)
        print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", flush=True)

    async with app.run_test(size=(120, 40)) as pilot:
        # Mid-crawl: let the sparklines gather some history and a few errors arrive.
        await _until(pilot, lambda: crawler.stats.pages > 50, 60, "the first pages")
        await pilot.pause(warmup)
        save("main.svg")
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.5)
        save("main-80x24.svg")

        await pilot.press("p")
        await pilot.pause(1.0)  # fetches in flight finish; no new ones start
        save("paused.svg")
        await pilot.press("p")

        await pilot.resize_terminal(100, 30)
        await _until(pilot, lambda: crawler.stats.errors >= 5, 60, "a few errors")
        await pilot.press("e")
        await _until(pilot, lambda: isinstance(app.screen, ErrorListScreen), 10, "the error list")
        await pilot.pause(0.5)
        save("errors.svg")
        await pilot.press("escape")

        await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")  # 40 workers
        await _until(pilot, lambda: isinstance(app.screen, SummaryScreen), 300, "the end of the crawl")
        await pilot.pause(0.5)
        save("summary.svg")
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("screenshots"))
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds of crawl before the first shot")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    site = subprocess.Popen([sys.executable, "-m", "crawltop.demo.serve"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        url = site.stdout.readline().strip()  # type: ignore[union-attr]
        if not url.startswith("http"):
            raise SystemExit("screenshots: the demo site did not start")
        print(f"crawling the demo site at {url}", flush=True)
        asyncio.run(shoot(url, args.out.resolve(), args.warmup))
    finally:
        site.terminate()
        site.wait(timeout=10)


if __name__ == "__main__":
    main()
