"""The monitor in another process: the crawl here, `crawltop attach` in a terminal of its own.

    .venv/bin/python bench/attached.py [--runs 5] [--concurrency 10] [--presses 20] [--traffic-workers 200]
                                       [--monitor tui|poller]

Used by bench/tui_overhead.py as its third mode ("attached"), and runnable alone:
  - headless vs attached: the same demo --fast crawl, alternating; in attached mode this
    process serves its control socket and a real `crawltop attach` runs in a pty (120x40,
    4 Hz, its output drained by `cat`), so the screen's frames cost another core and the
    engine pays only for the snapshots it serves;
  - key to effect over the socket: a `p` written to the monitor's pty, timed until the
    engine's pause() runs, at full crawl speed;
  - snapshot traffic: reply bytes/s to one attached monitor with --traffic-workers workers.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import InPty  # noqa: E402 (bench/ put on sys.path just above)

# The noqa E402 below: the package is imported after REPO, where the script has always had it.
from crawltop.core import CrawlConfig, Crawler  # noqa: E402
from crawltop.core.sockets.rundir import claim  # noqa: E402
from crawltop.core.sockets.server import ControlServer  # noqa: E402


class Monitor(InPty):
    """`crawltop attach NAME` in a 120x40 pty."""

    def __init__(self, name: str) -> None:
        super().__init__([sys.executable, "-m", "crawltop.cli", "attach", name])

    def cpu(self) -> float:
        """CPU seconds the monitor process has used so far (user + system)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(") ", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


POLL = """import sys, time
from crawltop.core.sockets.protocol import SnapshotDecoder
from crawltop.core.sockets.client import Client
c, d = Client(sys.argv[1]), SnapshotDecoder()
while True:
    d.decode(c.call("snapshot", since=d.since()))
    time.sleep(0.25)
"""


class Poller(Monitor):
    """No screen: a process that only pulls a snapshot over the socket at 4 Hz, to tell the
    cost of the protocol from the cost of a Textual process beside the crawl."""

    def __init__(self, name: str, path: Path) -> None:
        self.master = -1
        self.proc = subprocess.Popen([sys.executable, "-c", POLL, str(path)])

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


MONITOR = "tui"  # or "poller" (--monitor)


async def _with_monitor(crawler: Crawler, body, *, name: str = "bench", kind: str | None = None):
    """Serve the crawler's socket, attach a monitor, wait for its first frames, run body."""
    name, path, sock = claim(None, name)
    server = ControlServer(crawler, name, path, sock)
    await server.start()
    monitor = Poller(name, path) if (kind or MONITOR) == "poller" else Monitor(name)
    try:
        deadline = time.monotonic() + 30
        while server.requests < 8:  # hello, the first snapshot, ~1.5 s of frames: past start-up
            if time.monotonic() > deadline or monitor.proc.poll() is not None:
                raise SystemExit("bench: the attached monitor did not start")
            await asyncio.sleep(0.02)
        return await body(server, monitor)
    finally:
        await server.close()
        monitor.close()


MONITOR_CPU: list[float] = []  # the monitor's share of a core during each attached crawl
SERVING: list[float] = []  # the engine's time answering the monitor, as a share of the crawl


async def attached(crawler: Crawler) -> int:
    """Run `crawler.crawl()` to its end with an attached monitor; returns snapshots served."""
    async def body(server: ControlServer, monitor: Monitor) -> int:
        spent = [0.0]
        inner = server._handle

        def handle(message):  # the engine's whole cost of a request: snapshot + encoding
            t = time.perf_counter()
            try:
                return inner(message)
            finally:
                spent[0] += time.perf_counter() - t

        server._handle = handle  # type: ignore[method-assign]
        before, cpu, t0 = server.requests, monitor.cpu(), time.perf_counter()
        await crawler.crawl()
        seconds = time.perf_counter() - t0
        MONITOR_CPU.append((monitor.cpu() - cpu) / seconds)
        SERVING.append(spent[0] / seconds)
        return server.requests - before

    return await _with_monitor(crawler, body)


async def key_latency(url: str, concurrency: int, presses: int) -> list[float]:
    """Seconds from `p` written to the monitor's terminal to the engine's pause()/resume()."""
    out: list[float] = []
    while len(out) < presses:
        crawler = Crawler(CrawlConfig(roots=(url,), concurrency=concurrency, timeout=10.0, backoff=0.01))
        applied: list[float] = []
        for method in ("pause", "resume"):
            inner = getattr(crawler, method)
            setattr(crawler, method,
                    lambda inner=inner, applied=applied: (applied.append(time.perf_counter()), inner()))

        async def body(server: ControlServer, monitor: Monitor, *, crawler: Crawler = crawler,
                       applied: list[float] = applied) -> None:
            task = asyncio.create_task(crawler.crawl())
            while crawler.stats.pages < 100 and not task.done():
                await asyncio.sleep(0.01)
            while len(out) < presses and not task.done():
                n = len(applied)
                t0 = time.perf_counter()
                monitor.press(b"p")
                while len(applied) == n and time.perf_counter() - t0 < 5:
                    await asyncio.sleep(0.001)
                if len(applied) > n:
                    out.append(applied[-1] - t0)
                await asyncio.sleep(0.3)
            crawler.stop()
            await task

        await _with_monitor(crawler, body, kind="tui")
    return out


async def traffic(url: str, workers: int, seconds: float = 8.0) -> tuple[float, float]:
    """Reply bytes/s and requests/s to one attached monitor with this many workers."""
    crawler = Crawler(CrawlConfig(roots=(url,), concurrency=workers, timeout=10.0, backoff=0.01, delay=0.0))

    async def body(server: ControlServer, monitor: Monitor) -> tuple[float, float]:
        task = asyncio.create_task(crawler.crawl())
        while len(crawler.stats.workers) < workers and not task.done():
            await asyncio.sleep(0.05)
        b0, r0, t0 = server.bytes_out, server.requests, time.perf_counter()
        await asyncio.wait([task], timeout=seconds)
        dt = time.perf_counter() - t0
        b, r = server.bytes_out - b0, server.requests - r0
        crawler.stop()
        await task
        return b / dt, r / dt

    return await _with_monitor(crawler, body, kind="tui")


def _timed(crawler: Crawler) -> dict[str, float]:
    inner = crawler.crawl
    t: dict[str, float] = {}

    async def crawl() -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            await inner()
        finally:
            t["seconds"] = time.perf_counter() - t0
            t["cpu"] = time.process_time() - c0

    crawler.crawl = crawl  # type: ignore[method-assign]
    return t


async def main_async(url: str, runs: int, concurrency: int, presses: int, traffic_workers: int) -> None:
    def make() -> Crawler:
        return Crawler(CrawlConfig(roots=(url,), concurrency=concurrency, timeout=10.0, backoff=0.01))

    async def headless() -> tuple[int, dict[str, float], int]:
        c = make()
        t = _timed(c)
        await c.crawl()
        return c.stats.pages, t, 0

    async def with_monitor() -> tuple[int, dict[str, float], int]:
        c = make()
        t = _timed(c)
        served = await attached(c)
        return c.stats.pages, t, served

    await headless()  # warm-up
    rates: dict[str, list[float]] = {"headless": [], "attached": []}
    cpu: dict[str, list[float]] = {"headless": [], "attached": []}
    for i in range(runs):
        order = [("headless", headless), ("attached", with_monitor)]
        for name, fn in order if i % 2 == 0 else order[::-1]:
            pages, t, served = await fn()
            rates[name].append(pages / t["seconds"])
            cpu[name].append(t["cpu"] / pages)
            extra = f"  {served} snapshots served" if name == "attached" else ""
            print(f"run {i + 1} {name:8}  {pages} pages in {t['seconds']:6.2f} s  {pages / t['seconds']:7.1f} pages/s"
                  f"  {t['cpu'] / pages * 1e6:6.0f} us CPU/page{extra}", flush=True)
    h, a = statistics.median(rates["headless"]), statistics.median(rates["attached"])
    hc, ac = statistics.median(cpu["headless"]), statistics.median(cpu["attached"])
    print(f"\nmedian headless {h:7.1f} pages/s  {hc * 1e6:5.0f} us CPU/page")
    print(f"median attached {a:7.1f} pages/s  {ac * 1e6:5.0f} us CPU/page")
    print(f"ratio attached/headless  {a / h:.3f}  (target >= 0.97; concurrency {concurrency}, {runs} runs each, "
          f"monitor: {MONITOR})")
    paired = [x / y for x, y in zip(rates["attached"], rates["headless"], strict=False)]
    print(f"median of the per-run ratios (each attached run over the headless run beside it)  "
          f"{statistics.median(paired):.3f}")
    print(f"CPU per page, headless/attached  {hc / ac:.3f}")
    print(f"the attached monitor's own process used {statistics.median(MONITOR_CPU) * 100:.0f}% of a core; "
          f"answering it took {statistics.median(SERVING) * 100:.2f}% of the engine's wall time "
          "(medians over the attached runs)")
    lat = sorted(x * 1000 for x in await key_latency(url, concurrency, presses))
    p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
    print(f"key p in the attached monitor -> engine pause()/resume(), {len(lat)} presses mid-crawl: "
          f"median {statistics.median(lat):.1f} ms, p95 {p95:.1f} ms, max {lat[-1]:.1f} ms (target p95 <= 50)")
    bps, rps = await traffic(url, traffic_workers)
    print(f"snapshot traffic, {traffic_workers} workers, one monitor: {bps / 1000:.1f} KB/s at {rps:.1f} "
          f"snapshots/s = {bps / rps / 1000:.1f} KB each, {bps / rps * 4 / 1000:.1f} KB/s at a full 4 Hz "
          "(target < 100 KB/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--concurrency", "-c", type=int, default=10)
    parser.add_argument("--presses", type=int, default=20)
    parser.add_argument("--traffic-workers", type=int, default=200)
    parser.add_argument("--monitor", choices=("tui", "poller"), default="tui",
                        help="tui: a real `crawltop attach` in a pty; poller: only 4 Hz snapshot pulls, no screen")
    args = parser.parse_args()
    global MONITOR
    MONITOR = args.monitor
    os.environ.setdefault("CRAWLTOP_RUN_DIR", f"/tmp/crawltop-bench-{os.getpid()}")
    site = subprocess.Popen([sys.executable, "-m", "crawltop.demo.serve", "--fast"], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        url = site.stdout.readline().strip()  # type: ignore[union-attr]
        if not url.startswith("http"):
            raise SystemExit("the demo site did not start")
        print(f"demo site (fast) at {url}, child process {site.pid}", flush=True)
        asyncio.run(main_async(url, args.runs, args.concurrency, args.presses, args.traffic_workers))
    finally:
        site.terminate()
        site.wait(timeout=10)


if __name__ == "__main__":
    main()
