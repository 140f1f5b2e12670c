"""Regenerate the SVGs in screenshots/ from a real crawl of the demo site.

    .venv/bin/python scripts/screenshots.py [--out screenshots]      (or: make screenshots)

First (or alone, with `--only dashboard`) the dashboard, `crawltop` alone, over five
detached demo crawls: running, paused, stopped, ended by themselves, killed.
The demo site runs in a child process with its realistic latency, the crawl runs with
the real engine, and the app is driven headlessly with the same keys a person presses:
the live screen mid-crawl (120x40 and 80x24), `p` (paused), `e` (the error list), then
`]` to finish sooner, and the summary the app shows when the crawl is done. Then (or alone,
with `--only attached`) a detached demo crawl: `crawltop ls` and an attached monitor;
(`--only hosts`) a polite crawl of ten hosts and its host queues (`H`); and
(`--only cluster`) two processes sharing the demo crawl on Redis, watched from Redis; and
(`--only browser`) `demo --browser`, its Chromium tabs at work in the Workers panel.
"""
from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

from crawltop.core import CrawlConfig, Crawler
from crawltop.tui.app import CrawlApp
from crawltop.tui.panels.summary import SummaryScreen
from crawltop.tui.screens.dialogs import ErrorListScreen

REPO = Path(__file__).resolve().parent.parent


async def _until(pilot, cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: gave up waiting for {what}")
        await pilot.pause(0.1)


async def shoot(url: str, out: Path, warmup: float) -> list[Path]:
    crawler = Crawler(CrawlConfig(roots=(url,), concurrency=10, timeout=5.0,  # the CLI's whole pages
                                  requisites=True, external=True, fragments=True))
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
        # errors are the failed URLs only (core/outcomes.py): the demo's two 500s after their tries
        await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")  # 40 workers
        await _until(pilot, lambda: crawler.stats.errors >= 2, 300, "the demo's failed URLs")
        await pilot.press("e")
        await _until(pilot, lambda: isinstance(app.screen, ErrorListScreen), 10, "the error list")
        await pilot.pause(0.5)
        save("errors.svg")
        await pilot.press("escape")

        await _until(pilot, lambda: isinstance(app.screen, SummaryScreen), 300, "the end of the crawl")
        await pilot.pause(0.5)
        save("summary.svg")
    return saved


async def shoot_queue(url: str, out: Path) -> list[Path]:
    """The demo's calendar trap spotted: the main screen's warning line and the queue
    view (`u`) flagging it, mid-crawl. The crawl is stopped after."""
    from crawltop.tui.screens.steer import QueueScreen

    crawler = Crawler(CrawlConfig(roots=(url,), concurrency=10, timeout=5.0))
    app = CrawlApp(crawler)
    saved: list[Path] = []
    async with app.run_test(size=(100, 30)) as pilot:
        await _until(pilot, lambda: any("calendar" in t.prefix for t in crawler.steering.queue_view().traps), 120,
                     "the calendar trap")
        await _until(pilot, lambda: app.trap_warning.display, 10, "the trap warning")
        await pilot.pause(0.5)
        for name in ("trap-warning.svg", "queue.svg"):
            if name == "queue.svg":
                await pilot.press("u")
                await _until(pilot, lambda: isinstance(app.screen, QueueScreen), 10, "the queue view")
                await pilot.pause(1.0)
            app.save_screenshot(filename=name, path=str(out))
            saved.append(out / name)
            print(f"  {(out / name).relative_to(REPO) if (out / name).is_relative_to(REPO) else out / name}",
                  flush=True)
        crawler.stop()
    return saved


async def shoot_browser(url: str, out: Path, warmup: float) -> list[Path]:
    """`crawltop demo --browser`: the demo site and its section that JavaScript builds (a
    second root), pages loaded in headless Chromium tabs, caught while tabs are open: the
    Workers panel with each tab's phase, its requests and bytes, and Chromium's memory and
    restarts on the panel's title. The crawl is stopped after."""
    from crawltop.core.monitor.stats import BROWSER_PHASES

    crawler = Crawler(CrawlConfig(roots=(url, url + "app/"), concurrency=6, timeout=10.0,  # demo's, as the CLI
                                  requisites=True, external=True, fragments=True, browser=True))
    app = CrawlApp(crawler)

    def tabs_at_work() -> bool:
        """Three tabs open, in two phases at least (most of a tab's time is `net idle`)."""
        snap = app.last_snapshot
        phases = [] if snap is None else [w.phase for w in snap.workers if w.phase in BROWSER_PHASES]
        return len(phases) >= 3 and len(set(phases)) >= 2

    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: crawler.stats.pages > 20, 120, "the first pages")
        await pilot.pause(warmup)
        await _until(pilot, lambda: (crawler.stats.browser is not None and crawler.stats.browser.memory > 0
                                     and tabs_at_work()), 120, "tabs at work and Chromium's memory read")
        app.save_screenshot(filename="browser.svg", path=str(out))
        crawler.stop()
    path = out / "browser.svg"
    print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", flush=True)
    return [path]


async def shoot_hosts(out: Path, warmup: float) -> list[Path]:
    """A polite crawl of many hosts: eight copies of the demo site on 127.0.0.2-9, a host
    that answers 429 (Retry-After: 20) and one that refuses connections (four URLs: it backs
    off, then is retired), at --delay 0.5. The main screen (hosts panel, the header's host
    counts) and the host queues view (`H`), at 120x40 and 80x24. The crawl is stopped after."""
    from aiohttp import web

    from crawltop.demo.site import make_app
    from crawltop.tui.screens.queues import QueuesScreen

    async def busy(request: web.Request) -> web.Response:
        return web.Response(status=429, headers={"Retry-After": "20"}, text="slow down")

    runners: list[web.AppRunner] = []

    async def serve(app: web.Application, address: str) -> str:
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await runner.setup()
        await web.TCPSite(runner, address, 0).start()
        runners.append(runner)
        return f"http://{address}:{runner.addresses[0][1]}/"

    limited = web.Application()
    limited.router.add_get("/{tail:.*}", busy)
    roots = [await serve(make_app(), f"127.0.0.{i}") for i in range(2, 10)]
    roots += [await serve(limited, "127.0.0.10")] + [f"http://127.0.0.11:9/{p}" for p in ("", "a", "b", "c")]
    crawler = Crawler(CrawlConfig(roots=tuple(roots), concurrency=8, timeout=5.0, delay=0.5))
    app = CrawlApp(crawler)
    saved: list[Path] = []

    def save(name: str) -> None:
        app.save_screenshot(filename=name, path=str(out))
        saved.append(out / name)
        print(f"  {(out / name).relative_to(REPO) if (out / name).is_relative_to(REPO) else out / name}", flush=True)

    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: crawler.stats.pages > 40, 60, "the first pages")
            await pilot.pause(warmup)
            save("hosts.svg")
            await pilot.press("H")
            await _until(pilot, lambda: isinstance(app.screen, QueuesScreen), 10, "the host queues")
            await pilot.pause(1.0)
            save("queues.svg")
            await pilot.resize_terminal(80, 24)
            await pilot.pause(1.0)
            save("queues-80x24.svg")
            crawler.stop()
    finally:
        for runner in runners:
            await runner.cleanup()
    return saved


async def shoot_attached(out: Path, warmup: float) -> list[Path]:
    """`crawltop demo --detach`, then `crawltop ls` (saved as text) and an attached monitor:
    its main screen and the quit question (stop or detach). The crawl is stopped after."""
    import os
    import tempfile

    from crawltop.core.sockets.client import RemoteCrawler
    from crawltop.core.sockets.rundir import resolve
    from crawltop.tui.screens.dialogs import ConfirmQuit

    os.environ["CRAWLTOP_RUN_DIR"] = tempfile.mkdtemp(prefix="crawltop-shots-")
    cli = [sys.executable, "-m", "crawltop.cli"]
    name = subprocess.run([*cli, "demo", "--detach", "-c", "10", "--timeout", "5"], check=True,
                          capture_output=True, text=True).stdout.strip()
    saved: list[Path] = []
    try:
        remote = await RemoteCrawler.connect(resolve(name))
        app = CrawlApp(remote)
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: remote.stats.pages > 50, 60, "the first pages")
            await pilot.pause(warmup)
            ls = subprocess.run([*cli, "ls"], check=True, capture_output=True, text=True).stdout
            (out / "ls.txt").write_text("$ crawltop ls\n" + ls)
            saved.append(out / "ls.txt")
            for shot in ("attached.svg", "attached-quit.svg"):
                if shot == "attached-quit.svg":
                    await pilot.press("q")
                    await _until(pilot, lambda: isinstance(app.screen, ConfirmQuit), 10, "the quit question")
                    await pilot.pause(0.3)
                app.save_screenshot(filename=shot, path=str(out))
                saved.append(out / shot)
            await pilot.press("d")
    finally:
        subprocess.run([*cli, "ctl", name, "stop"], capture_output=True)
    for path in saved:
        print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", flush=True)
    return saved


async def shoot_cluster(out: Path, warmup: float) -> list[Path]:
    """A demo crawl shared through a private redis-server by two engine processes
    (`demo --redis`, then `join`), watched with `attach NAME --redis`: the processes panel
    and the merged panels. The crawl is stopped after (`ctl --redis ... stop`)."""
    import os
    import tempfile

    from crawltop.core.cluster import connect as cluster
    from crawltop.core.cluster.server import RedisServer
    from crawltop.core.cluster.view import ClusterView

    tmp = Path(tempfile.mkdtemp(prefix="crawltop-shots-"))
    env = dict(os.environ, CRAWLTOP_RUN_DIR=str(tmp / "run"), XDG_STATE_HOME=str(tmp / "state"))
    server = RedisServer.start(tmp / "redis")
    cli = [sys.executable, "-m", "crawltop.cli"]
    engines = [subprocess.Popen([*cli, "demo", "--redis", server.url, "--name", "demo", "--headless", "-c", "6",
                                 "--timeout", "5"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    saved: list[Path] = []
    try:
        import json

        r = cluster.client(server.url)
        deadline = time.monotonic() + 30
        while not await r.hexists("crawltop:{demo}:meta", "roots") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        view = ClusterView(r, "demo", json.loads(await r.hget("crawltop:{demo}:meta", "roots") or b"[]"))
        app = CrawlApp(view)
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: view.stats.snap.pages > 20, 60, "the first pages")
            engines.append(subprocess.Popen([*cli, "join", "demo", "--redis", server.url, "--headless", "-c", "6"],
                                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            await _until(pilot, lambda: len(view.processes()) == 2, 30, "the second process")
            await pilot.pause(warmup)
            assert app.processes_panel is not None  # a ClusterView: the app shows its processes
            app.processes_panel.table.focus()
            await pilot.pause(0.5)
            app.save_screenshot(filename="cluster.svg", path=str(out))
            saved.append(out / "cluster.svg")
            view.detach()
        await r.aclose()
    finally:
        subprocess.run([*cli, "ctl", "demo", "--redis", server.url, "stop"], capture_output=True, env=env)
        for engine in engines:
            try:
                engine.wait(timeout=30)
            except subprocess.TimeoutExpired:
                engine.kill()
        server.stop()
    for path in saved:
        print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", flush=True)
    return saved


async def shoot_dashboard(out: Path, warmup: float) -> list[Path]:
    """`crawltop` alone: five detached demo crawls in a private run directory, one paused,
    one stopped with `ctl`, one that ended by itself (--max-pages), one killed (lost); the
    dashboard at 120x40 and 80x24. The crawls are stopped after."""
    import os
    import signal
    import tempfile

    from crawltop.core.dashboard.board import Board
    from crawltop.tui.top.app import TopApp

    tmp = Path(tempfile.mkdtemp(prefix="crawltop-shots-"))
    os.environ["CRAWLTOP_RUN_DIR"], os.environ["XDG_STATE_HOME"] = str(tmp / "run"), str(tmp / "state")
    cli = [sys.executable, "-m", "crawltop.cli"]
    crawls = {"docs": ["-c", "8"], "shop": ["-c", "4"], "news": ["-c", "2"], "wiki": ["-c", "4", "--max-pages", "60"],
              "mirror": ["-c", "2"]}
    for name, opts in crawls.items():
        subprocess.run([*cli, "demo", "--detach", "--name", name, "--timeout", "5", *opts], check=True,
                       capture_output=True, text=True)

    def ctl(name: str, *args: str) -> str:
        return subprocess.run([*cli, "ctl", name, *args], capture_output=True, text=True).stdout

    saved: list[Path] = []
    board = Board()
    try:
        import json

        app = TopApp(board, cwd=tmp)
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(pilot, lambda: len(board.rows) == 5, 30, "the five crawls")
            await pilot.pause(4.0)
            ctl("news", "stop")  # stopped from a script; mirror killed while watched: lost, with its numbers
            os.kill(json.loads(ctl("mirror", "status"))["pid"], signal.SIGKILL)
            await pilot.pause(warmup)
            ctl("shop", "pause")
            await _until(pilot, lambda: board.rows["shop"].state == "PAUSED" and board.rows["mirror"].how == "lost",
                         30, "shop paused, mirror lost")
            await pilot.pause(1.5)
            app.clear_notifications()
            await pilot.pause(0.3)
            app.save_screenshot(filename="dashboard.svg", path=str(out))
            await pilot.resize_terminal(80, 24)
            await pilot.pause(1.0)
            app.save_screenshot(filename="dashboard-80x24.svg", path=str(out))
            saved += [out / "dashboard.svg", out / "dashboard-80x24.svg"]
    finally:
        await board.close()
        for name in crawls:
            ctl(name, "stop")
    for path in saved:
        print(f"  {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", flush=True)
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("screenshots"))
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds of crawl before the first shot")
    parser.add_argument("--only", choices=("local", "attached", "queue", "hosts", "cluster", "dashboard", "browser"),
                        default=None,
                        help="only the dashboard of five crawls (`crawltop` alone), "
                             "only the same-loop shots, only the attached monitor and `ls`, only "
                             "the queue view flagging the demo's calendar trap, only a polite crawl of "
                             "ten hosts (the host queues, H), only two processes sharing the demo "
                             "crawl on Redis, or only the demo crawled with --browser, its tabs at work "
                             "(default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "dashboard"):
        asyncio.run(shoot_dashboard(args.out.resolve(), min(args.warmup, 10.0)))
        if args.only == "dashboard":
            return
    if args.only in (None, "cluster"):
        asyncio.run(shoot_cluster(args.out.resolve(), min(args.warmup, 8.0)))
        if args.only == "cluster":
            return
    if args.only in (None, "hosts"):
        asyncio.run(shoot_hosts(args.out.resolve(), min(args.warmup, 12.0)))
        if args.only == "hosts":
            return
    if args.only not in ("local", "queue", "browser"):
        asyncio.run(shoot_attached(args.out.resolve(), min(args.warmup, 5.0)))
        if args.only == "attached":
            return
    site = subprocess.Popen([sys.executable, "-m", "crawltop.demo.serve"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        url = site.stdout.readline().strip()  # type: ignore[union-attr]
        if not url.startswith("http"):
            raise SystemExit("screenshots: the demo site did not start")
        print(f"crawling the demo site at {url}", flush=True)
        if args.only in (None, "browser"):
            asyncio.run(shoot_browser(url, args.out.resolve(), min(args.warmup, 6.0)))
        if args.only in (None, "queue"):
            asyncio.run(shoot_queue(url, args.out.resolve()))
        if args.only in (None, "local"):
            asyncio.run(shoot(url, args.out.resolve(), args.warmup))
    finally:
        site.terminate()
        site.wait(timeout=10)


if __name__ == "__main__":
    main()
