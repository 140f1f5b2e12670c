"""Peak RSS of crawltop while its frontier grows to 1,000,000 URLs (issue 4).

A synthetic site on 127.0.0.1 is a K-ary tree: /p/N links to /p/N*K+1 ... /p/N*K+K,
all new URLs. With K = 1000, the frontier passes a million queued URLs after about a
thousand pages. The script runs, one after the other:

1. `crawltop crawl ROOT --headless --no-robots -c 20 --state S.db` until the seen set
   reaches the target, then SIGINT (clean stop: everything stays queued on disk);
2. `crawltop resume S.db --headless` for a few seconds (open = rebuild the seen set's
   Bloom filter from a million rows), then SIGINT;
3. the same crawl without --state (the in-memory frontier), for comparison.

Peak RSS is each crawltop process's own ru_maxrss, from os.wait4 on that child.

    .venv/bin/python bench/frontier_memory.py            # 1,000,000 URLs
    .venv/bin/python bench/frontier_memory.py --urls 200000 --skip-memory
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRAWLTOP = [str(Path(sys.executable).parent / "crawltop")]
if not Path(CRAWLTOP[0]).exists():
    CRAWLTOP = [sys.executable, "-m", "crawltop.cli"]


# -- the site --------------------------------------------------------------------------

async def _serve(fanout: int) -> None:
    from aiohttp import web

    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        first = n * fanout + 1
        links = "".join(f'<a href="/p/{m}">{m}</a>\n' for m in range(first, first + fanout))
        return web.Response(text=f"<html><body><h1>{n}</h1>\n{links}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{n:\\d+}", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(f"http://127.0.0.1:{port}/p/0", flush=True)
    await asyncio.Event().wait()


# -- measuring ---------------------------------------------------------------------------

SEEN = re.compile(r"seen (\d+)")


def _wait_rss_mb(proc: subprocess.Popen) -> float:
    """Reap this child alone and return its own peak RSS (wait4 gives per-child rusage)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024


def run_until(cmd: list[str], target_seen: int, max_seconds: float, log: Path) -> dict:
    """Run a crawltop command until its progress line shows target_seen, then SIGINT."""
    t0 = time.monotonic()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
    seen, reached = 0, None
    while True:
        time.sleep(0.5)
        if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            break
        found = SEEN.findall(log.read_text(errors="replace"))
        if found:
            seen = int(found[-1])
        if reached is None and seen >= target_seen:
            reached = time.monotonic() - t0
            proc.send_signal(signal.SIGINT)
        elif time.monotonic() - t0 > max_seconds and reached is None:
            reached = float("nan")
            proc.send_signal(signal.SIGINT)
    rss = _wait_rss_mb(proc)
    return {"seconds_to_target": reached, "seen": seen, "peak_rss_mb": rss,
            "exit": proc.returncode, "total_seconds": time.monotonic() - t0}


def fresh_rss(cmd: list[str], log: Path, seconds: float) -> dict:
    t0 = time.monotonic()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
    time.sleep(seconds)
    proc.send_signal(signal.SIGINT)
    rss = _wait_rss_mb(proc)
    found = SEEN.findall(log.read_text(errors="replace"))
    return {"seen": int(found[-1]) if found else 0, "peak_rss_mb": rss,
            "exit": proc.returncode, "total_seconds": time.monotonic() - t0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--fanout", type=int, default=1000)
    ap.add_argument("-c", "--concurrency", type=int, default=20)
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--skip-memory", action="store_true", help="don't run the in-memory comparison")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.fanout))
        return

    work = Path(tempfile.mkdtemp(prefix="crawltop-frontier-"))
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--fanout", str(args.fanout)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    root = server.stdout.readline().strip()
    results: dict[str, dict] = {}
    try:
        common = ["--headless", "--no-robots", "-c", str(args.concurrency)]
        db = work / "state.db"
        results["state"] = run_until([*CRAWLTOP, "crawl", root, *common, "--state", str(db)],
                                     args.urls, args.max_seconds, work / "state.log")
        results["state"]["db_mb"] = sum(f.stat().st_size for f in work.glob("state.db*")) / 2**20
        conn = sqlite3.connect(db)
        results["state"]["queued_on_disk"] = conn.execute("SELECT count(*) FROM urls WHERE state = 0").fetchone()[0]
        conn.close()
        results["resume"] = fresh_rss([*CRAWLTOP, "resume", str(db), "--headless"], work / "resume.log", 8.0)
        if not args.skip_memory:
            results["memory"] = run_until([*CRAWLTOP, "crawl", root, *common], args.urls, args.max_seconds,
                                          work / "memory.log")
    finally:
        server.terminate()
        server.wait()
    print(f"frontier memory: {args.urls:,} URLs, fanout {args.fanout}, concurrency {args.concurrency}, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cores")
    for name, r in results.items():
        print(f"  {name:7} " + "  ".join(f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v:,}"
                                           for k, v in r.items()))
    print(f"  (work dir {work})")


if __name__ == "__main__":
    main()
