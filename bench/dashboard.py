"""What the dashboard (`crawltop` alone) costs: the machine's CPU with 10 and 50
crawls watched at 2 Hz, and the rate a running crawl loses to being watched.

    .venv/bin/python bench/dashboard.py [--crawls 10 50] [--seconds 20] [--rounds 3] [--runs 7] [--window 10]

1. N detached crawls of the demo site (`crawltop crawl URL --detach`, in a run directory
   of their own), paused so that their own work does not drown the figure. Then, rounds
   of side by side windows of --seconds each: without a dashboard, and with `crawltop`
   (the dashboard, a real process in a 120x40 pty, its output drained by `cat`). The
   dashboard's cost is its own process's CPU plus what the N crawls spent more than in
   the window without it (answering its summaries). Target: under 5% of a core at N=50.
2. One long crawl (-c 10) in this process of an endless site (a small aiohttp server in a
   child process), watched by one dashboard process stopped (SIGSTOP) and continued in
   turn: windows of --window seconds unwatched and watched, alternating, --runs pairs.
   Target: the watched rate within 1% of the unwatched one (medians; the machine is noisy,
   read the ratio).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from common import InPty, machine_cpu, proc_tree_cpu  # noqa: E402

from crawltop.core import CrawlConfig, Crawler  # noqa: E402
from crawltop.core.sockets.rundir import claim  # noqa: E402
from crawltop.core.sockets.server import ControlServer  # noqa: E402

CLI = [sys.executable, "-m", "crawltop.cli"]


class Dashboard(InPty):
    """`crawltop` (no command) in a 120x40 pty."""

    def __init__(self) -> None:
        super().__init__(CLI)

    def cpu(self) -> float:
        return proc_tree_cpu(self.proc.pid)


def ctl(*args: str) -> dict:
    out = subprocess.run([*CLI, "ctl", *args], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise SystemExit(f"bench: ctl {' '.join(args)}: {out.stderr.strip()}")
    return json.loads(out.stdout) if out.stdout.strip().startswith("{") else {}


def start_crawls(url: str, n: int) -> list[int]:
    """N detached crawls, paused once they fetched something; their pids."""
    pids = []
    for i in range(n):
        out = subprocess.run([*CLI, "crawl", url, "--detach", "--name", f"c{i:02d}", "-c", "1", "--delay", "0.5",
                              "--no-robots", "-o", os.devnull], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise SystemExit(f"bench: crawl {i} did not start: {out.stderr.strip()}")
    for i in range(n):
        name = f"c{i:02d}"
        ctl(name, "pause")
        pids.append(int(ctl(name, "status")["pid"]))
    return pids


def cpu_of(pids: list[int]) -> float:
    return sum(proc_tree_cpu(p) for p in pids)


def watch_cost(pids: list[int], seconds: float, rounds: int) -> tuple[float, float, float]:
    """(dashboard's own share of a core, the crawls' extra share, the crawls' share unwatched), medians."""
    own, extra, base = [], [], []
    for r in range(rounds):
        order = ("without", "with") if r % 2 == 0 else ("with", "without")
        shares: dict[str, float] = {}
        for mode in order:
            dash = Dashboard() if mode == "with" else None
            try:
                time.sleep(3.0 if dash else 0.5)  # past the dashboard's start-up
                c0, d0, t0 = cpu_of(pids), dash.cpu() if dash else 0.0, time.perf_counter()
                time.sleep(seconds)
                dt = time.perf_counter() - t0
                shares[mode] = (cpu_of(pids) - c0) / dt
                if dash is not None:
                    alive = dash.proc.poll() is None
                    own.append((dash.cpu() - d0) / dt)
                    if not alive:
                        raise SystemExit("bench: the dashboard exited")
            finally:
                if dash is not None:
                    dash.close()
        extra.append(shares["with"] - shares["without"])
        base.append(shares["without"])
        print(f"  round {r + 1}: dashboard {own[-1] * 100:5.2f}% of a core, crawls {shares['without'] * 100:5.2f}% "
              f"unwatched, {shares['with'] * 100:5.2f}% watched", flush=True)
    return statistics.median(own), statistics.median(extra), statistics.median(base)


SITE = """import sys
from aiohttp import web
async def page(request):
    n = int(request.match_info.get("n", "0"))
    links = "".join(f'<a href="/p/{3 * n + i}">p{3 * n + i}</a> ' for i in (1, 2, 3))
    return web.Response(text=f"<html><body><h1>page {n}</h1>{links}</body></html>", content_type="text/html")
app = web.Application()
app.router.add_get("/", page)
app.router.add_get("/p/{n}", page)
runner = web.AppRunner(app, access_log=None)
async def main():
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/", flush=True)
    import asyncio
    await asyncio.Event().wait()
import asyncio
asyncio.run(main())
"""


async def rate_loss(url: str, pairs: int, window: float) -> tuple[float, float, list[float]]:
    """One long crawl (-c 10) of an endless site, watched by one dashboard process that is
    stopped (SIGSTOP: it asks nothing, costs nothing) and continued (SIGCONT) in turn, so
    no window pays for its start-up. Median pages/s of each kind of window, and the
    per-pair ratios."""
    crawler = Crawler(CrawlConfig(roots=(url,), concurrency=10, timeout=10.0, backoff=0.01, robots=False))
    name, path, sock = claim(None, "watched")
    server = ControlServer(crawler, name, path, sock)
    await server.start()
    task = asyncio.create_task(crawler.crawl())
    rates: dict[str, list[float]] = {"headless": [], "watched": []}
    shares: list[float] = []  # the dashboard's own share of a core in each watched window
    per_page: dict[str, list[float]] = {"headless": [], "watched": []}  # the crawl's CPU a page
    served: list[float] = []  # requests a second the crawl answered in each watched window
    dash = Dashboard()
    try:
        deadline = time.monotonic() + 60
        while server.requests < 4:  # its hello and first summaries: it is up
            if time.monotonic() > deadline:
                raise SystemExit("bench: the dashboard never asked")
            await asyncio.sleep(0.05)
        await asyncio.sleep(3.0)
        for i in range(pairs):
            for watched in ((False, True) if i % 2 == 0 else (True, False)):
                os.kill(dash.proc.pid, signal.SIGCONT if watched else signal.SIGSTOP)
                await asyncio.sleep(0.6)  # a tick either way: the first requests (or the last) are in
                p0, t0, d0, r0 = crawler.stats.pages, time.perf_counter(), dash.cpu(), server.requests
                c0, (busy0, total0) = time.process_time(), machine_cpu()
                await asyncio.sleep(window)
                dt = time.perf_counter() - t0
                pages = crawler.stats.pages - p0
                rate = pages / dt
                cpu_page = (time.process_time() - c0) / max(1, pages)
                busy1, total1 = machine_cpu()
                machine = (busy1 - busy0) / max(1e-9, total1 - total0) * (os.cpu_count() or 1)
                if watched:
                    shares.append((dash.cpu() - d0) / dt)
                    served.append((server.requests - r0) / dt)
                rates["watched" if watched else "headless"].append(rate)
                per_page["watched" if watched else "headless"].append(cpu_page)
                print(f"  pair {i + 1} {'watched ' if watched else 'unwatched'} {rate:7.1f} pages/s  "
                      f"{cpu_page * 1e6:5.0f} us of the crawl's CPU a page  machine busy {machine:.2f} cores",
                      flush=True)
    finally:
        os.kill(dash.proc.pid, signal.SIGCONT)
        dash.close()
        crawler.stop()
        await task
        await server.close()
    ratios = [w / h for w, h in zip(rates["watched"], rates["headless"], strict=True)]
    print(f"  watched windows: the crawl answered {statistics.median(served):.1f} requests/s; the dashboard's own "
          f"process used {statistics.median(shares) * 100:.2f}% of a core (medians)")
    u, w = statistics.median(per_page["headless"]), statistics.median(per_page["watched"])
    print(f"  the crawl's CPU a page: unwatched {u * 1e6:.0f} us, watched {w * 1e6:.0f} us: ratio {w / u:.3f} "
          "(what watching adds to the crawl's own work)")
    return statistics.median(rates["headless"]), statistics.median(rates["watched"]), ratios


def demo_site(fast: bool) -> tuple[subprocess.Popen[str], str]:
    site = subprocess.Popen([sys.executable, "-m", "crawltop.demo.serve", *(["--fast"] if fast else [])], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    url = site.stdout.readline().strip()  # type: ignore[union-attr]
    if not url.startswith("http"):
        raise SystemExit("the demo site did not start")
    return site, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--crawls", type=int, nargs="*", default=[10, 50], help="numbers of crawls (none: skip)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=7, help="unwatched/watched pairs of the rate test (0: skip)")
    parser.add_argument("--window", type=float, default=10.0, help="seconds of each window of the rate test")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ctb"))
    os.environ["CRAWLTOP_RUN_DIR"] = str(base / "run")
    os.environ["XDG_STATE_HOME"] = str(base / "state")
    site, url = demo_site(fast=False)
    results = []
    try:
        for n in args.crawls:
            print(f"{n} paused crawls of the demo site ({url}), watched at 2 Hz or not, "
                  f"{args.rounds} rounds of {args.seconds:.0f} s", flush=True)
            pids = start_crawls(url, n)
            try:
                own, extra, unwatched = watch_cost(pids, args.seconds, args.rounds)
                results.append((n, own, extra, unwatched))
            finally:
                for i in range(n):
                    subprocess.run([*CLI, "ctl", f"c{i:02d}", "stop"], capture_output=True, timeout=30)
                time.sleep(2.0)
                shutil.rmtree(base / "run" / ".ended", ignore_errors=True)
    finally:
        site.terminate()
        site.wait(timeout=10)
    for n, own, extra, unwatched in results:
        print(f"{n:3d} crawls: the dashboard process {own * 100:.2f}% of a core, the crawls answering it "
              f"{extra * 100:+.2f}% (they use {unwatched * 100:.2f}% unwatched): total {(own + extra) * 100:.2f}% "
              "(target < 5% at 50)")
    if args.runs:
        site = subprocess.Popen([sys.executable, "-c", SITE], stdout=subprocess.PIPE, text=True)
        try:
            url = site.stdout.readline().strip()  # type: ignore[union-attr]
            print(f"one crawl of an endless site at -c 10: {args.window:.0f} s windows, unwatched (the dashboard "
                  f"stopped) and watched, {args.runs} pairs", flush=True)
            h, w, pairs = asyncio.run(rate_loss(url, args.runs, args.window))
        finally:
            site.terminate()
            site.wait(timeout=10)
        print(f"median unwatched {h:.1f} pages/s, watched {w:.1f}: ratio {w / h:.3f}; median of the per-pair "
              f"ratios {statistics.median(pairs):.3f} (target >= 0.99)")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
