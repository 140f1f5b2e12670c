"""Peak RSS of crawltop while its frontier grows to 1,000,000 URLs.

A synthetic site on 127.0.0.1 is a K-ary tree: /p/N links to /p/N*K+1 ... /p/N*K+K,
all new URLs. With K = 1000, the frontier passes a million queued URLs after about a
thousand pages. The script runs, one after the other:

1. `crawltop crawl ROOT --headless --no-robots -c 20 --state S.db` until the seen set
   reaches the target, then SIGINT (clean stop: everything stays queued on disk);
2. `crawltop resume S.db --headless` for a few seconds (open = rebuild the seen set's
   Bloom filter from a million rows), then SIGINT;
3. the same crawl without --state (the in-memory frontier), for comparison;
4. redis: the same crawl with `--redis URL --name N` (one engine, the Redis frontier) on
   a private redis-server (Unix socket, persistence off), until the same seen count;
5. redis-frontier: the Redis frontier alone, in a child that does what the engine does
   per page without HTTP (so the deltas are the frontier's, not aiohttp's or the
   parser's): -c workers pop() a URL of the same K-ary tree, add() its K links (same
   URLs, Items with via and hop path), write its Record to the frontier's sink and call
   done(), which sends the links and the record in the batched DONE call; adds stop at
   exactly --urls, then flush(). It reports its RSS before opening the frontier and
   after the flush (VmRSS, after gc) and its peak.
6. hosts: 1,000,000 hosts with 3 queued URLs each, in the memory store and with --state
   (bench/host_memory.py: bytes per host beyond what a host-blind queue holds).

Peak RSS is each crawltop process's own ru_maxrss, from os.wait4 on that child. For the
Redis modes, Redis's cost is `INFO memory` used_memory after the crawler exited minus
before it started (empty server), with the seen set's and the queue's `MEMORY USAGE`,
all scaled to 1,000,000 URLs seen (SCARD of the seen set).

    .venv/bin/python bench/frontier_memory.py            # 1,000,000 URLs, every mode
    .venv/bin/python bench/frontier_memory.py --urls 200000 --skip-memory
    .venv/bin/python bench/frontier_memory.py --modes redis,redis-frontier
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RedisServer  # noqa: E402 (bench/ put on sys.path just above)

MODES = ("state", "resume", "memory", "redis", "redis-frontier", "hosts")
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


# -- the Redis frontier ------------------------------------------------------------------

def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _drive(url: str, target: int, fanout: int, workers: int) -> dict:
    """In the child: the engine's calls on a RedisFrontier, opened as the CLI opens one,
    for `target` URLs of the tree (see the module docstring)."""
    from crawltop.core.cluster import connect as cluster
    from crawltop.core.config import CrawlConfig
    from crawltop.core.output.provenance import hop
    from crawltop.core.output.records import Record
    from crawltop.core.queueing.frontier import Item

    base = "http://127.0.0.1:8765/p/"
    config = CrawlConfig(roots=(base + "0",), concurrency=workers, robots=False)
    r = cluster.client(url)
    await cluster.start(r, url, "fm", config)
    await r.aclose()
    gc.collect()
    rss0 = _rss_mb()
    t0 = time.monotonic()
    frontier = cluster.frontier(url, "fm", config)
    frontier.add(Item(base + "0", 10, 0))
    left = target - 1

    async def work() -> None:
        nonlocal left
        while left > 0:
            item = await frontier.pop()
            n, k = int(item.url.rsplit("/", 1)[1]), min(fanout, left)
            left -= k
            path = hop(item.discovery, "L")
            for m in range(n * fanout + 1, n * fanout + 1 + k):
                frontier.add(Item(f"{base}{m}", item.redirects_left, item.depth + 1, 0, item.url, path))
            frontier.sink.write(Record(
                url=item.url, status=200, content_type="text/html", encoding="utf-8", size=40 * fanout,
                num_urls=fanout, num_new_urls=k, depth=item.depth, via=item.via, discovery=item.discovery,
                elapsed_ms=1.0, fetched_at=time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                digest="sha1:" + "A" * 32))
            frontier.done(item)

    tasks = [asyncio.ensure_future(work()) for _ in range(workers)]
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)  # one made the last add
    for t in done:
        t.result()  # a worker's error, if any, ends the measurement here
    for t in tasks:
        t.cancel()  # the others wait in pop(): a URL handed to one goes back, as at a stop
    await asyncio.gather(*tasks, return_exceptions=True)
    await frontier.flush()
    seconds = time.monotonic() - t0
    gc.collect()
    out = {"rss_before_mb": rss0, "rss_after_mb": _rss_mb(),
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "seen": frontier.seen_count, "round_trips": frontier.round_trips, "seconds": seconds}
    await frontier.close()
    return out


def redis_cost(rs: RedisServer, used0: int, name: str = "fm") -> dict:
    """What crawl NAME costs Redis, once its crawler has exited (no client buffers left)."""
    p = f"crawltop:{{{name}}}:"  # core/cluster/keys.py; the harness does not import crawltop
    with rs.client() as r:
        # the seen set is buckets of integers (core/cluster/seen.py), counted in `count`
        seen = int(r.hget(p + "count", "seen") or 0)
        size = {"rec": int(r.memory_usage(p + "rec", samples=0) or 0)}
        size["seen"] = sum(int(r.memory_usage(key, samples=0) or 0) for key in r.scan_iter(match=p.replace(
            "{", "\\{").replace("}", "\\}") + "seen:*", count=1000))
        # one queue per host: the site here is one host, so one or a few lists
        size["q"] = sum(int(r.memory_usage(key, samples=0) or 0) for key in r.scan_iter(match=p.replace(
            "{", "\\{").replace("}", "\\}") + "hq:*", count=1000))
        queued = int(r.hget(p + "count", "queued") or 0)
    used = rs.used_memory() - used0
    return {"seen_in_redis": seen, "queued_in_redis": queued, "redis_used_mb": used / 2**20,
            "redis_used_mb_per_1M": used / 2**20 * 1e6 / max(1, seen),
            "seen_set_bytes_per_url": size["seen"] / max(1, seen),
            "queue_bytes_per_queued_url": size["q"] / max(1, queued), "stream_mb": size["rec"] / 2**20}


def redis_frontier(args: argparse.Namespace, work: Path) -> dict:
    with RedisServer(work) as rs:
        used0 = rs.used_memory()
        child = subprocess.run([sys.executable, __file__, "--frontier-child", rs.url, "--urls", str(args.urls),
                                "--fanout", str(args.fanout), "-c", str(args.concurrency)],
                               cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True)
        res = json.loads(child.stdout.splitlines()[-1])
        res.update(redis_cost(rs, used0))
    res["rss_delta_mb_per_1M"] = (res["rss_after_mb"] - res["rss_before_mb"]) * 1e6 / max(1, res["seen"])
    res["peak_delta_mb_per_1M"] = (res["peak_rss_mb"] - res["rss_before_mb"]) * 1e6 / max(1, res["seen"])
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--urls", type=int, default=1_000_000)
    ap.add_argument("--fanout", type=int, default=1000)
    ap.add_argument("-c", "--concurrency", type=int, default=20)
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma separated, of {', '.join(MODES)}")
    ap.add_argument("--skip-memory", action="store_true", help="don't run the in-memory comparison")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--frontier-child", metavar="REDIS_URL", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.fanout))
        return
    if args.frontier_child:
        print(json.dumps(asyncio.run(_drive(args.frontier_child, args.urls, args.fanout, args.concurrency))))
        return
    modes = [m for m in args.modes.split(",") if m and not (m == "memory" and args.skip_memory)]
    if set(modes) - set(MODES) or ("resume" in modes and "state" not in modes):
        ap.error(f"--modes: some of {', '.join(MODES)} (resume needs state)")

    work = Path(tempfile.mkdtemp(prefix="crawltop-frontier-"))
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--fanout", str(args.fanout)],
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    root = server.stdout.readline().strip()
    results: dict[str, dict] = {}
    try:
        common = ["--headless", "--no-robots", "-c", str(args.concurrency)]
        db = work / "state.db"
        if "state" in modes:
            results["state"] = run_until([*CRAWLTOP, "crawl", root, *common, "--state", str(db)],
                                         args.urls, args.max_seconds, work / "state.log")
            results["state"]["db_mb"] = sum(f.stat().st_size for f in work.glob("state.db*")) / 2**20
            conn = sqlite3.connect(db)
            results["state"]["queued_on_disk"] = conn.execute("SELECT count(*) FROM urls WHERE state = 0").fetchone()[0]
            conn.close()
        if "resume" in modes:
            results["resume"] = fresh_rss([*CRAWLTOP, "resume", str(db), "--headless"], work / "resume.log", 8.0)
        if "memory" in modes:
            results["memory"] = run_until([*CRAWLTOP, "crawl", root, *common], args.urls, args.max_seconds,
                                          work / "memory.log")
        if "redis" in modes:
            with RedisServer(work) as rs:
                used0 = rs.used_memory()
                results["redis"] = run_until([*CRAWLTOP, "crawl", root, *common, "--redis", rs.url, "--name", "fm"],
                                             args.urls, args.max_seconds, work / "redis.log")
                results["redis"].update(redis_cost(rs, used0))
        if "redis-frontier" in modes:
            results["redis-frontier"] = redis_frontier(args, work)
        if "hosts" in modes:
            import host_memory
            for kind, figures in host_memory.run(1_000_000, 3).items():
                results[f"hosts-{kind}"] = figures
    finally:
        server.terminate()
        server.wait()
    print(f"frontier memory: {args.urls:,} URLs, fanout {args.fanout}, concurrency {args.concurrency}, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cores")
    for name, r in results.items():
        print(f"  {name:14} " + "  ".join(f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v:,}"
                                           for k, v in r.items()))
    print(f"  (work dir {work})")


if __name__ == "__main__":
    main()
