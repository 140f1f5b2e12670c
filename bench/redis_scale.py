"""One crawl on Redis: one process (memory frontier) vs --processes 1, 2 and 4 on a private
redis-server, and scrapy-redis with 2 processes as the peer, side by side in one run, on
the ~20,000-page nginx site of bench/compare.py.

    .venv/bin/python bench/redis_scale.py              # 3 interleaved rounds, every mode
    .venv/bin/python bench/redis_scale.py --runs 5 -c 20
    .venv/bin/python bench/redis_scale.py --runs 1 --modes memory,redis-4

Modes (all by default; --modes picks some):
- memory, redis-1, redis-2, redis-4: `crawltop crawl ROOT --headless` without and with
  `--processes N`. Each is a child process (with --processes: its engines and its
  redis-server are its children, so wait4() counts their CPU too). pages/s = records /
  wall seconds. redis-4 on this 2-core machine shows where the CPU or Redis saturates.
- scrapy-redis-2 (the peer): bench/scrapy_redis_spider.py (scrapy_spider.py's rules and
  settings, -c per process) in 2 `scrapy runspider` processes on a private
  redis-server (Unix socket, persistence off) holding the root URL, same nginx site.
  scrapy-redis is installed into bench/_work/scrapy-venv on first use. It never
  finishes by itself: each process closes after an idle wait (--scrapy-idle, 5 s), so
  its pages/s = distinct URLs it fetched / seconds from its start to its LAST RESPONSE
  (timestamps written per response by the spider); the idle wait is not counted. Its
  CPU is both processes' (wait4, idle wait included: little) plus its redis-server's.
  Below the table: its responses, distinct URLs (duplicates fetched) and HTML pages
  against the site's manifest (missing, extra).

--hosts-memory: instead of crawling, what the per-host frontier costs Redis.
On a private redis-server, one crawl (--delay 1) gets --urls URLs (1,000,000) across
--hosts hosts (100,000) through the real RedisFrontier's ADD script, web-like items (a
~75-character URL, its parent, a hop path); `INFO memory` used_memory before and after
gives the cost per million queued URLs, split by MEMORY USAGE into the host queues, the
seen set, `ready` and `hosts`. Then every host is popped once and its URL given back with
a success (POP, DONE with host events): the per-host state hashes that creates, per host.

Columns: CPU ms per record (everything the mode ran: engines, redis-server); cores =
that CPU / crawl seconds (2.0 = this machine is full); redis-server's own CPU, per
record and in cores (crawltop's is sampled from /proc every 0.1 s while it runs: the
last sample may miss its final 0.1 s; scrapy-redis's is read before we stop it); Redis
round trips per record from each crawltop engine's exit line (heartbeats included;
target <= 3). Medians, and ratios to the single process.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402 (bench/ put on sys.path just above)
    BENCH,
    CRAWLTOP,
    SCRAPY_VENV,
    RedisServer,
    canon,
    find_descendant,
    fmt_table,
    median,
    proc_tree_cpu,
    ratio,
    run_child,
    wait_quiet,
)
from compare import ensure_scrapy  # noqa: E402 (bench/ put on sys.path just above)
from nginx_site import DEFAULT_PORT, generate, serve, site_dir  # noqa: E402 (bench/ put on sys.path just above)

MODES = {"memory": [], "redis-1": ["--processes", "1"], "redis-2": ["--processes", "2"],
         "redis-4": ["--processes", "4"], "scrapy-redis-2": []}
SCRAPY_REDIS_PROCS = 2
RT = re.compile(r"redis: (\d+) round trips for (\d+) records")
RECORDS = re.compile(r"records (\d+)|: (\d+) records from")


class RedisCpu(threading.Thread):
    """CPU seconds of the redis-server under a `crawltop --processes` child, polled from
    /proc until that child exits: wait4() folds it into the child's total, this splits
    it out for the cost of a thread waking every 0.1 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.seconds, self.done = pid, 0.0, threading.Event()

    def run(self) -> None:
        rpid = None
        while not self.done.wait(0.1):
            rpid = rpid or find_descendant(self.pid, "redis-server")
            if rpid is not None:
                self.seconds = max(self.seconds, proc_tree_cpu(rpid))


def run_crawltop(mode: str, root: str, conc: int, work: Path) -> dict:
    state = Path(tempfile.mkdtemp(prefix="rs", dir=work))
    env = dict(os.environ, XDG_STATE_HOME=str(state), CRAWLTOP_RUN_DIR=str(state / "run"))
    argv = [str(CRAWLTOP), "crawl", root, "--headless", "-c", str(conc), "--no-robots", "--no-sitemaps",
            "--name", f"b{os.getpid()}", *MODES[mode]]
    out = state / "out.txt"
    samplers: list[RedisCpu] = []

    def sample(pid: int) -> None:
        if mode != "memory":
            samplers.append(RedisCpu(pid))
            samplers[-1].start()

    with open(out, "w") as fh:
        wall, cpu, rss, rc = run_child(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, on_start=sample)
    for s in samplers:
        s.done.set()
        s.join()
    text = out.read_text() + "".join(p.read_text() for p in state.glob("crawltop/log/*.log"))
    records = max((int(a or b) for a, b in RECORDS.findall(text)), default=0)
    trips = [(int(t), int(n)) for t, n in RT.findall(text)]
    rt = ratio(sum(t for t, _ in trips), sum(n for _, n in trips)) if trips else float("nan")
    return {"rc": rc, "wall": wall, "active": wall, "cpu": cpu, "records": records, "rt": rt,
            "redis_cpu": samplers[0].seconds if samplers else float("nan")}


def ensure_scrapy_redis() -> Path:
    """scrapy-redis in the Scrapy venv of bench/compare.py, installed the same way."""
    scrapy = ensure_scrapy()
    py = SCRAPY_VENV / "bin" / "python"
    if subprocess.run([str(py), "-c", "import scrapy_redis"], capture_output=True).returncode != 0:
        print(f"installing scrapy-redis into {SCRAPY_VENV}", file=sys.stderr)
        subprocess.run([str(SCRAPY_VENV / "bin" / "pip"), "install", "-q", "scrapy-redis"], check=True)
    return scrapy


def run_scrapy_redis(root: str, conc: int, work: Path, idle: int, expected: set[str], timeout: float) -> dict:
    """SCRAPY_REDIS_PROCS spiders on one private redis-server; everything killed at the end."""
    state = Path(tempfile.mkdtemp(prefix="sr", dir=work))
    outs = [state / f"p{i}.txt" for i in range(1, SCRAPY_REDIS_PROCS + 1)]
    procs: list[subprocess.Popen] = []
    cpu, rcs = 0.0, []
    scrapy = ensure_scrapy_redis()
    with RedisServer(state) as rs:
        with rs.client() as r:
            r.lpush("bench:start_urls", json.dumps({"url": root}))
        t0 = time.time()
        try:
            for i, out in enumerate(outs, 1):
                argv = [str(scrapy), "runspider", str(BENCH / "scrapy_redis_spider.py"),
                        "-a", f"root={root}", "-a", f"out={out}", "-a", f"idle={idle}", "-s", f"REDIS_URL={rs.url}",
                        "-s", f"CONCURRENT_REQUESTS={conc}", "-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={conc}"]
                with open(state / f"p{i}.log", "w") as log:
                    procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
            left = list(procs)
            while left:  # wait4 each one: its own CPU, never a sibling's
                for p in list(left):
                    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                    if pid:
                        p.returncode = os.waitstatus_to_exitcode(status)
                        cpu += ru.ru_utime + ru.ru_stime
                        rcs.append(p.returncode)
                        left.remove(p)
                if left and time.time() - t0 > timeout:
                    for p in left:
                        p.send_signal(signal.SIGKILL)
                time.sleep(0.05)
            exited = time.time()
        finally:
            for p in procs:
                if p.returncode is None:
                    p.kill()
                    p.wait()
        redis_cpu = rs.cpu()
    responses, urls, html, last = 0, set(), set(), t0
    for out in outs:
        for line in out.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split(" ", 3)
            if len(parts) != 4:
                continue
            responses += 1
            last = max(last, float(parts[0]))
            urls.add(canon(parts[3]))
            if parts[2] == "1":
                html.add(canon(parts[3]))
    active = last - t0
    return {"rc": max(rcs, key=abs, default=-1), "wall": exited - t0, "active": active, "cpu": cpu + redis_cpu,
            "records": len(urls), "rt": float("nan"), "redis_cpu": redis_cpu, "responses": responses,
            "html": len(html), "missing": len(expected - html), "extra": len(html - expected)}


def hosts_memory(urls: int, hosts: int) -> dict:
    """Redis memory of the per-host frontier: `urls` queued across `hosts` (see above)."""
    import asyncio

    from crawltop.core.cluster import connect as cluster
    from crawltop.core.cluster.keys import Keys, decode_item, split_member
    from crawltop.core.config import CrawlConfig
    from crawltop.core.queueing.frontier import Item
    from crawltop.core.queueing.hosts import PAGES
    from crawltop.core.queueing.politeness import Politeness

    def url_of(i: int) -> tuple[str, str]:
        h = i % hosts
        return (f"https://www.site{h:06d}.example.com/articles/2026/{i // hosts:05d}-a-page-title.html",
                f"https://www.site{h:06d}.example.com/articles/2026/{i // hosts // 10:05d}-index.html")

    async def run(rs: RedisServer) -> dict:
        config = CrawlConfig(roots=(url_of(0)[0],), delay=1.0, robots=False)
        r = cluster.client(rs.url)
        await cluster.start(r, rs.url, "hm", config)
        f = cluster.frontier(rs.url, "hm", config)
        f.hosts.configure(Politeness(delay=1.0))
        k = Keys("hm")
        used0 = int((await r.info("memory"))["used_memory"])
        t0 = time.perf_counter()
        for i in range(urls):
            url, via = url_of(i)
            f.add(Item(url, 10, 3, 0, via, "LLL"))
            if len(f._pending) >= 3 * 2000:
                await f._send_adds(f._take_pending())
        await f.flush()
        fill_s = time.perf_counter() - t0
        used1 = int((await r.info("memory"))["used_memory"])
        sample = [url_of(i)[0].split("/")[2] for i in range(0, hosts, max(1, hosts // 1000))]
        per_q = median([await r.memory_usage(k.hq(h), samples=0) or 0 for h in sample])
        parts = {name: int(await r.memory_usage(key, samples=0) or 0)
                 for name, key in (("ready", k.ready), ("hosts", k.hosts))}
        # the seen set is buckets (core/cluster/seen.py): every seen:* key, summed
        parts["seen"] = sum([int(await r.memory_usage(key, samples=0) or 0)
                             async for key in r.scan_iter(match=k.seen + ":*", count=1000)])
        queued = int(await r.hget(k.count, "queued"))
        # every host once: POP (one URL a host: --delay 1), a success, the URL given back
        loop = asyncio.get_running_loop()
        popped, t0 = 0, time.perf_counter()
        while popped < hosts:
            out = await f.link.call(lambda: f._pop(f.std_keys(), f.std_args(64, f.lease_ms, PAGES)))
            if not out[0]:
                break
            for member, delay in zip(out[0], out[1], strict=False):
                key, raw = split_member(member.decode())
                item = decode_item(raw)
                f._raw[item.url] = member.decode()
                f.hosts.succeeded(f.hosts.handed(key, int(delay)), loop.time(), 0.05)
                f.requeue(item)
                f.done(item)
            popped += len(out[0])
            await f.flush()
        cycle_s = time.perf_counter() - t0
        used2 = int((await r.info("memory"))["used_memory"])
        per_h = median([await r.memory_usage(k.h(h), samples=0) or 0 for h in sample])
        await f.close()
        await r.aclose()
        return {"urls": urls, "hosts": hosts, "queued": queued, "fill_s": fill_s, "cycle_s": cycle_s,
                "popped": popped, "round_trips": f.round_trips,
                "used_mb": (used1 - used0) / 2**20, "used_mb_per_1M": (used1 - used0) / 2**20 * 1e6 / urls,
                "host_queue_bytes": per_q, "queue_bytes_per_url": per_q * hosts / urls,
                "seen_bytes_per_url": parts["seen"] / urls, "ready_bytes_per_host": parts["ready"] / hosts,
                "hosts_set_bytes_per_host": parts["hosts"] / hosts,
                "state_bytes_per_host": (used2 - used1) / popped if popped else None, "state_hash_bytes": per_h}

    with RedisServer() as rs:
        res = asyncio.run(run(rs))
    print(f"{res['urls']:,} URLs queued across {res['hosts']:,} hosts: Redis used {res['used_mb']:.0f} MB "
          f"({res['used_mb_per_1M']:.0f} MB per million URLs), filled in {res['fill_s']:.1f} s")
    print(f"  a host's queue {res['host_queue_bytes']:.0f} B ({res['queue_bytes_per_url']:.0f} B per URL), "
          f"seen {res['seen_bytes_per_url']:.0f} B per URL, ready {res['ready_bytes_per_host']:.0f} B and "
          f"hosts {res['hosts_set_bytes_per_host']:.0f} B per host")
    print(f"  every host popped once and given back with a success ({res['popped']:,} URLs, "
          f"{res['cycle_s']:.1f} s): +{res['state_bytes_per_host']:.0f} B per host of state "
          f"(its hash: {res['state_hash_bytes']:.0f} B)")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-c", "--concurrency", type=int, default=20, help="per process")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma separated, of {', '.join(MODES)}")
    ap.add_argument("--scrapy-idle", type=int, default=5, help="scrapy-redis: seconds idle before a process closes")
    ap.add_argument("--timeout", type=float, default=900, help="scrapy-redis: kill its processes after this long")
    ap.add_argument("--hosts-memory", action="store_true",
                    help="measure Redis memory of --urls queued across --hosts hosts instead of crawling")
    ap.add_argument("--urls", type=int, default=1_000_000, help="--hosts-memory: URLs queued")
    ap.add_argument("--hosts", type=int, default=100_000, help="--hosts-memory: hosts they are spread over")
    args = ap.parse_args()
    if args.hosts_memory:
        res = hosts_memory(args.urls, args.hosts)
        (site_dir().parent / "redis_hosts_memory.json").write_text(json.dumps(res, indent=2))
        return
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        ap.error(f"unknown modes {', '.join(sorted(unknown))}")
    if "scrapy-redis-2" in modes:
        ensure_scrapy_redis()
    site = site_dir()
    manifest = generate(site, port=args.port)
    work = site.parent
    results: dict[str, list[dict]] = {m: [] for m in modes}
    with serve(site, args.port):
        root = f"http://127.0.0.1:{args.port}/"
        expected = {root.rstrip("/") + p for p in manifest["html"]}
        for n in range(args.runs):
            for mode in modes:
                wait_quiet()
                if mode == "scrapy-redis-2":
                    r = run_scrapy_redis(root, args.concurrency, work, args.scrapy_idle, expected, args.timeout)
                else:
                    r = run_crawltop(mode, root, args.concurrency, work)
                results[mode].append(r)
                idle = f" (exit after {r['wall']:.2f}s)" if r["wall"] != r["active"] else ""
                print(f"round {n + 1} {mode:14} rc {r['rc']} {r['records']} records in {r['active']:.2f}s{idle}, "
                      f"cpu {r['cpu']:.2f}s, redis-server cpu {r['redis_cpu']:.2f}s, "
                      f"{r['rt']:.2f} round trips/record", file=sys.stderr)
    rows, base = [], None
    for mode, rs in results.items():
        pps = median([ratio(r["records"], r["active"]) for r in rs])
        base = base or pps
        redis = mode != "memory"
        rows.append([mode, f"{median([r['records'] for r in rs]):.0f}", f"{pps:.0f}", f"{ratio(pps, base):.2f}",
                     f"{median([1000 * ratio(r['cpu'], r['records']) for r in rs]):.2f}",
                     f"{median([ratio(r['cpu'], r['active']) for r in rs]):.2f}",
                     f"{median([1000 * ratio(r['redis_cpu'], r['records']) for r in rs]):.2f}" if redis else "-",
                     f"{median([ratio(r['redis_cpu'], r['active']) for r in rs]):.2f}" if redis else "-",
                     f"{median([r['rt'] for r in rs]):.2f}" if mode.startswith("redis-") else "-"])
    print(fmt_table(rows, ["mode", "records", "pages/s", f"vs {modes[0]}", "CPU ms/record", "cores",
                           "redis-server ms/record", "redis cores", "round trips/record"]))
    for r in results.get("scrapy-redis-2", [])[-1:]:
        print(f"scrapy-redis-2, last round: {r['responses']} responses, {r['records']} distinct URLs "
              f"({r['responses'] - r['records']} fetched more than once), {r['html']} HTML pages of "
              f"{len(expected)} expected ({r['missing']} missing, {r['extra']} extra); crawled for "
              f"{r['active']:.1f}s, its processes exited {r['wall'] - r['active']:.1f}s later (idle wait, not counted)")


if __name__ == "__main__":
    main()
