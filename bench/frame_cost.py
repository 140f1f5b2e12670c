"""CPU per frame of the main screen at 120x40, with a snapshot that changes every frame.

    .venv/bin/python bench/frame_cost.py [HZ]

No crawl runs: the app shows a stand-in whose numbers and worker URLs change at every
snapshot, so each frame repaints the status lines, the sparklines, the workers table
and the key bar. The loop is otherwise idle, so this process's CPU time divided by the
frames drawn is the frame's own cost, and other load on the machine barely moves it
(unlike wall-clock crawl rates). Prints ms of CPU per frame and the share of one core.
"""
from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from pathlib import Path

from crawltop.core.monitor.stats import Snapshot
from crawltop.tui.app import CrawlApp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the test stand-ins live there
from support.frozen import FrozenCrawler  # noqa: E402 - importable once tests/ is on the path


class Moving(FrozenCrawler):
    """The frozen sample, with counts, rates and worker URLs that move at each snapshot."""

    n = 0

    def make_snapshot(self, state: str) -> Snapshot:
        s = super().make_snapshot(state)
        self.n += 1
        k = self.n
        workers = tuple(dataclasses.replace(w, url=f"{w.url}?v={k}" if w.url else w.url,
                                            in_phase=w.in_phase + k * 0.01) for w in s.workers)
        return dataclasses.replace(s, pages=s.pages + k * 37, queued=s.queued + k, seen=s.seen + k * 40,
                                   bytes=s.bytes + k * 9999, rate_now=s.rate_now + k % 7,
                                   workers=workers, elapsed=s.elapsed + k * 0.25)


async def main(hz: float, seconds: float = 6.0) -> None:
    crawler = Moving()
    crawler.stats.snapshot = lambda: crawler.make_snapshot("RUNNING")  # type: ignore[method-assign]
    app = CrawlApp(crawler, refresh_hz=hz, adaptive=False)
    async with app.run_test(size=(120, 40)):
        await asyncio.sleep(1.0)  # start-up styling and the first layout are not frames
        f0, c0, w0 = app.frames, time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        f1, c1, w1 = app.frames, time.process_time(), time.perf_counter()
    frames, cpu, wall = f1 - f0, c1 - c0, w1 - w0
    print(f"{frames} frames in {wall:.1f} s at {hz:g} Hz: {1000 * cpu / frames:.1f} ms CPU per frame, "
          f"{cpu / wall:.3f} of a core")


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0))
