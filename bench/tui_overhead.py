"""TUI overhead: the same crawl of the demo site, headless and under the TUI.

    .venv/bin/python bench/tui_overhead.py [--runs 5] [--concurrency 10] [--hz 5]

The demo site (fast mode: no latency) runs in a child process, as `crawltop demo` does,
so it does not share this process's loop or GIL. In this process the runs alternate:

  headless  `await crawler.crawl()`, nothing else on the loop;
  tui-4hz   the same, with the refresh held at --hz (tui slows to 2 Hz while the core is busy);
  tui       the same crawl inside CrawlApp, driven headlessly by App.run_test at
            120x40: the refresh timer, the snapshot, the diffed tables and Textual's
            compositor all run on the crawl's loop, exactly as on a terminal (only the
            bytes are not written to a tty);
  attached  the crawl here serves its control socket, and a real `crawltop attach` runs
            in a 120x40 pty in another process (bench/attached.py): this process pays
            only for the snapshots it serves (target >= 0.97 of headless).

Each run's rate is pages fetched / wall time of crawl() itself (app start-up is not
counted). Prints every run, the medians and the ratio tui / headless (target >= 0.9),
and the same comparison in this process's CPU time per page: on a shared 2-core machine
wall-clock rates swing by +-20% run to run with other load, CPU per page much less.

Then one more TUI crawl measures key latency at full speed: a `p` key event is posted
to the app as the terminal driver would, and the time until the engine is paused (or
resumed) is taken, ten times.
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

# The noqa E402 below: the package is imported after REPO, where the script has always had it.
from crawltop.core import CrawlConfig, Crawler  # noqa: E402
from crawltop.tui.app import CrawlApp  # noqa: E402


class Timed:
    """Wraps crawler.crawl to time the crawl itself, whoever starts it."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.inner = crawler.crawl
        self.seconds = 0.0
        self.cpu = 0.0
        crawler.crawl = self  # type: ignore[method-assign]

    async def __call__(self) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            await self.inner()
        finally:
            self.seconds = time.perf_counter() - t0
            self.cpu = time.process_time() - c0


def make(url: str, concurrency: int) -> tuple[Crawler, Timed]:
    # A tiny backoff: the retries of the demo's two 500 pages must not add a random tail that
    # both modes share and that would hide the cost of the screen.
    crawler = Crawler(CrawlConfig(roots=(url,), concurrency=concurrency, timeout=10.0, backoff=0.01))
    return crawler, Timed(crawler)


async def headless(url: str, concurrency: int, hz: float) -> tuple[int, float, float, int]:
    crawler, timed = make(url, concurrency)
    await crawler.crawl()
    return crawler.stats.pages, timed.seconds, timed.cpu, 0


async def tui(url: str, concurrency: int, hz: float, adaptive: bool = True) -> tuple[int, float, float, int]:
    crawler, timed = make(url, concurrency)
    app = CrawlApp(crawler, refresh_hz=hz, exit_on_finish=True, adaptive=adaptive)
    async with app.run_test(size=(120, 40)):
        # Plain sleeps, not pilot.pause(): that one posts a callback to every widget and
        # waits for the screen, which would bill the test harness to the app.
        while app.crawl_task is None:
            await asyncio.sleep(0.01)
        await asyncio.shield(app.crawl_task)
    return crawler.stats.pages, timed.seconds, timed.cpu, app.frames


async def tui_fixed(url: str, concurrency: int, hz: float) -> tuple[int, float, float, int]:
    """The same-loop TUI held at the configured rate (no slowing down when the core is busy)."""
    return await tui(url, concurrency, hz, adaptive=False)


async def attached(url: str, concurrency: int, hz: float) -> tuple[int, float, float, int]:
    from attached import attached as with_monitor  # bench/attached.py

    crawler, timed = make(url, concurrency)
    served = await with_monitor(crawler)
    return crawler.stats.pages, timed.seconds, timed.cpu, served


async def key_latency(url: str, concurrency: int, hz: float, presses: int = 40) -> list[float]:
    """Seconds from a posted `p` key event to the engine being paused, at full crawl speed.

    Each press pauses a running crawl; the engine is resumed at once (not timed) and
    runs 0.2 s before the next press. Crawls are started again until `presses` are done.
    """
    from textual import events

    out: list[float] = []
    while len(out) < presses:
        crawler, _ = make(url, concurrency)
        app = CrawlApp(crawler, refresh_hz=hz)
        async with app.run_test(size=(120, 40)):
            while crawler.stats.pages < 100 and crawler.stats.state != "DONE":
                await asyncio.sleep(0.02)
            while len(out) < presses and crawler.stats.state == "RUNNING":
                t0 = time.perf_counter()
                app.post_message(events.Key("p", "p"))
                while not crawler.paused and crawler.stats.state == "RUNNING":
                    await asyncio.sleep(0)
                if crawler.paused:
                    out.append(time.perf_counter() - t0)
                    crawler.resume()
                await asyncio.sleep(0.2)
            crawler.stop()
    return out


async def main_async(url: str, runs: int, concurrency: int, hz: float) -> None:
    await headless(url, concurrency, hz)  # warm-up: imports, caches, the site's first hits
    modes = (("headless", headless), ("tui", tui), ("tui-4hz", tui_fixed), ("attached", attached))
    rates: dict[str, list[float]] = {name: [] for name, _ in modes}
    per_cpu: dict[str, list[float]] = {name: [] for name, _ in modes}
    for i in range(runs):
        k = i % len(modes)
        for name, fn in modes[k:] + modes[:k]:
            pages, seconds, cpu, frames = await fn(url, concurrency, hz)
            rate = pages / seconds
            rates[name].append(rate)
            per_cpu[name].append(pages / cpu)
            extra = f"  {frames} frames ({frames / seconds:.1f}/s)" if name.startswith("tui") else ""
            extra = f"  {frames} snapshots served" if name == "attached" else extra
            print(f"run {i + 1} {name:8}  {pages} pages in {seconds:6.2f} s  {rate:7.1f} pages/s"
                  f"  {cpu * 1e6 / pages:6.0f} us CPU/page{extra}", flush=True)
    h, t = statistics.median(rates["headless"]), statistics.median(rates["tui"])
    hc, tc = statistics.median(per_cpu["headless"]), statistics.median(per_cpu["tui"])
    print()
    print(f"median headless  {h:7.1f} pages/s  {1e6 / hc:6.0f} us CPU/page")
    print(f"median tui       {t:7.1f} pages/s  {1e6 / tc:6.0f} us CPU/page")
    print(f"ratio tui/headless  {t / h:.3f}  (target >= 0.93; concurrency {concurrency}, refresh {hz:g} Hz"
          f" slowing to 2 Hz while the core is busy, {runs} runs each)")
    f, fc = statistics.median(rates["tui-4hz"]), statistics.median(per_cpu["tui-4hz"])
    print(f"median tui-4hz   {f:7.1f} pages/s  {1e6 / fc:6.0f} us CPU/page")
    print(f"ratio tui-4hz/headless  {f / h:.3f}  (the same TUI held at {hz:g} Hz)   "
          f"CPU per page, headless/tui-4hz  {fc / hc:.3f}")
    print(f"CPU per page, headless/tui  {tc / hc:.3f}  (the same ratio measured in this process's CPU time,"
          " which other load on the machine disturbs less)")
    a, ac = statistics.median(rates["attached"]), statistics.median(per_cpu["attached"])
    print(f"median attached  {a:7.1f} pages/s  {1e6 / ac:6.0f} us CPU/page")
    print(f"ratio attached/headless  {a / h:.3f}  (target >= 0.97)   CPU per page, headless/attached  {ac / hc:.3f}")
    lat = await key_latency(url, concurrency, hz)
    pauses = [x * 1000 for x in lat]  # each pressed while crawling at full speed
    p95 = statistics.quantiles(pauses, n=20)[-1] if len(pauses) > 1 else pauses[0]
    print(f"key p -> engine paused, mid-crawl: median {statistics.median(pauses):.0f} ms, "
          f"p95 {p95:.0f} ms, max {max(pauses):.0f} ms (target p95 <= 50 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--concurrency", "-c", type=int, default=10)
    parser.add_argument("--hz", type=float, default=4.0, help="TUI refresh rate (default 4, as the app)")
    args = parser.parse_args()
    site = subprocess.Popen(
        [sys.executable, "-m", "crawltop.demo.serve", "--fast"], cwd=REPO, stdout=subprocess.PIPE, text=True
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
