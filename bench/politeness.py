"""A polite crawl of many hosts: crawltop and Scrapy side by side in one run.

    .venv/bin/python bench/politeness.py                        # every scenario, 3 rounds (~20-30 min)
    .venv/bin/python bench/politeness.py --quick                # smoke run: 10 s a case, 100 hosts, 1 round
    .venv/bin/python bench/politeness.py --scenario hosts20 --runs 1 --seconds 30
    .venv/bin/python bench/politeness.py --scenario hosts1000 --tools crawltop
    BENCH_CRAWLTOP=/other/venv/bin/crawltop .venv/bin/python bench/politeness.py   # another build

Why. On one site crawltop is 12-17x faster than Scrapy; on a polite crawl of many sites
(a per-host delay) it was 6-13x slower, because its one queue lets every worker sleep on
one host's gate while other hosts are due. This script measures that case so a
host-aware scheduler can be judged by numbers taken at the server, not by the crawler's
own account.

The hosts. All of 127.0.0.0/8 reaches `lo` on Linux, so one nginx (Debian's, our child)
listens on PORT of many loopback addresses, one `listen ADDR:PORT` each, and serves each
address its own generated static site (`root .../$server_addr`). Every request is logged
as `$msec $request_time $server_addr $status $connection_requests $request_uri`
(bench/_work/politeness/access-SCENARIO.log); a request's start is $msec - $request_time
(millisecond resolution), the time its first bytes reached nginx; $connection_requests
is 1 on a new connection.

Scenarios (`--scenario`, comma separated; default all):
  hosts20    20 hosts (127.0.0.2 ... 127.0.0.21), 300 pages each (a table of contents
             at / and pages linking each other), no cross-host links, all 20 roots given.
             crawltop `--delay 0.25 -c 20`; Scrapy DOWNLOAD_DELAY=0.25,
             CONCURRENT_REQUESTS=20, CONCURRENT_REQUESTS_PER_DOMAIN=1.
             Ideal: 20 hosts x 4/s = 80 requests/s. 30 s.
  hosts1000  1,000 hosts (127.1.0.1 ...; --quick: 100), 50 pages each, 5 absolute links a
             page to other hosts' pages, one root. crawltop `--delay 1 -c 50 --scope any`;
             Scrapy at CONCURRENT_REQUESTS 50 and 500, one request per slot,
             DOWNLOAD_DELAY=1, no domain filter. 60 s.
  (each scenario also runs `crawltop-p2`: `--processes 2` on a private Redis, half the
   concurrency each, so the same total; the gaps must hold across both engines)
  retry429   5 hosts as in hosts20 and one root, 127.0.0.2, whose table of contents also
             links the 4 other hosts' roots (so every crawler starts on the throttled host
             and learns the others at once, whichever answers first). 127.0.0.2's 5th
             request, whatever the path, is answered 429 with `Retry-After: 3`; every
             other request, that URL's retry included, gets the page. (127.0.0.2 is a
             tiny stdlib server in this process behind nginx, so the one access log still
             counts everything.) Counted: requests to 127.0.0.2 in the 3 s after the
             first 429 (target 0) and requests to the other hosts in those 3 s (they
             should go on). Delay and concurrency as hosts20; 12 s.
Every crawler runs with robots.txt off and (crawltop) no sitemaps, so only the scheduler
is measured; `--robots` obeys robots.txt in both tools (each host's /robots.txt is a 404
then, and counts as one of its requests).

How a run is measured. Each crawler is a child process (wall, CPU and peak RSS from
wait4(), bench/common.py run_child). The window opens at the first request the server
sees from it (start-up excluded, for both tools alike) and lasts `--seconds`; then the
crawler gets SIGINT (crawltop stops cleanly; Scrapy gets a second SIGINT after 5 s, then
SIGKILL). Only requests that started inside the window count:
  - rate: requests / window seconds (requests / span if the crawl ended on its own);
    every request counts, since each takes one of its host's politeness slots;
  - hosts reached, and the time from the first request to the first one of the last host;
  - min gap: the smallest gap between two request starts on one host, over all hosts,
    and how many gaps were shorter than the delay minus GAP_SLACK (timestamps are in ms
    and a request's bytes can reach nginx a little late after the previous one);
    "over 2 gaps": the smallest mean of two consecutive gaps on one host, which one
    late request does not lower (below) but a burst does;
  - busiest host: the share of requests that went to one host (1/20 when fair);
  - cores: the crawler's CPU over its life; other load: the cores everything else on
    this shared machine used meanwhile (/proc/stat minus the crawler and nginx).
Rounds interleave the tools (the order rotates), figures are medians over rounds (min
gap: the minimum; 429 leaks: the maximum). Results go to bench/_work/politeness.json
(--quick: politeness-quick.json).

Reading the figures.
  - A short gap on this shared 2-core machine is nearly always one request that reached
    nginx late (a stalled event loop, on the crawler's side or nginx's) followed by the
    next one on schedule: both crawlers space requests by when they let them go, not by
    when they arrive. The access log shows it: the gap before the late request is as long
    as the short one is short, on the same connection. Scrapy shows more of them (its
    parsing shares the reactor with its sending, at 0.3-0.9 cores here).
  - Scrapy's download slot is the URL's hostname; here every host is an IP address, so a
    slot is a host and CONCURRENT_REQUESTS_PER_DOMAIN=1 is one request in flight per
    host (CONCURRENT_REQUESTS_PER_IP, deprecated in the Scrapy 2.19 used here, stays 0).
    Scrapy's default scheduler queue, DownloaderAwarePriorityQueue, already takes
    requests from slots that are not busy.
"""
from __future__ import annotations

import argparse
import atexit
import errno
import fcntl
import http.server
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402 (bench/ put on sys.path just above)
    BENCH,
    CRAWLTOP,
    Nginx,
    crawltop_works,
    ensure_scrapy,
    ensure_work,
    fmt_table,
    free_port,
    last_machine_busy,
    median,
    ratio,
    run_child,
    wait_quiet,
)

STATE = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")  # --processes logs there
DEFAULT_PORT = 8770
GEN_VERSION = 2
SEED = 20261124
SAME_HOST_LINKS = 3      # random links a page to pages of its own host (besides root, prev, next)
HOT_NTH = 5              # retry429: the throttled host's 5th request gets the 429
RETRY_AFTER = 3
GAP_SLACK = 0.010        # s: a gap shorter than delay - this counts as too close (jitter, ms stamps)
LOG_FORMAT = "$msec $request_time $server_addr $status $connection_requests $request_uri"
FILLER = ("<p>" + "polite crawl of many hosts, one nginx on loopback, per-host delay. " * 12 + "</p>")


@dataclass(frozen=True)
class Tool:
    label: str
    kind: str            # crawltop | scrapy
    conc: int            # per process
    processes: int = 1   # crawltop --processes N: N engines on a private Redis


@dataclass(frozen=True)
class Scenario:
    name: str
    hosts: tuple[str, ...]
    pages: int           # per host
    cross: int           # absolute links a page to other hosts' pages
    roots: tuple[str, ...]
    delay: float
    seconds: float
    tools: tuple[Tool, ...]
    hot: str | None = None   # the address whose HOT_NTH-th request is answered 429

    @property
    def scope_any(self) -> bool:
        """Links lead to other hosts: crawltop --scope any, Scrapy without a domain filter."""
        return bool(self.cross or self.hot)

    @property
    def ideal(self) -> float:
        return len(self.hosts) / self.delay


def loopback(i: int) -> str:
    """The i-th many-host address: 127.1.0.1 ... 127.1.0.250, 127.1.1.1 ..."""
    return f"127.1.{i // 250}.{i % 250 + 1}"


def scenarios(quick: bool, seconds: float | None, many: int | None) -> dict[str, Scenario]:
    few = tuple(f"127.0.0.{i}" for i in range(2, 22))
    lots = tuple(loopback(i) for i in range(many or (100 if quick else 1000)))
    def s(full: float) -> float:
        return seconds or (10.0 if quick else full)

    return {
        "hosts20": Scenario("hosts20", few, 300, 0, few, 0.25, s(30.0),
                            (Tool("crawltop", "crawltop", 20), Tool("crawltop-p2", "crawltop", 10, 2),
                             Tool("scrapy", "scrapy", 20))),
        "hosts1000": Scenario("hosts1000", lots, 50, 5, lots[:1], 1.0, s(60.0),
                              (Tool("crawltop", "crawltop", 50), Tool("crawltop-p2", "crawltop", 25, 2),
                               Tool("scrapy-c50", "scrapy", 50), Tool("scrapy-c500", "scrapy", 500))),
        "retry429": Scenario("retry429", few[:5], 300, 0, few[:1], 0.25, max(8.0, s(12.0)),
                             (Tool("crawltop", "crawltop", 20), Tool("crawltop-p2", "crawltop", 10, 2),
                              Tool("scrapy", "scrapy", 20)), hot=few[0]),
    }


# --------------------------------------------------------------------------- the sites

def page_path(k: int) -> str:
    return "/" if k == 0 else f"/p{k}.html"


def generate(sc: Scenario, port: int) -> Path:
    """One deterministic static site per address, shaped like a documentation site: the
    root is a table of contents linking every page of the host; each page links to the
    root, its previous and next page and SAME_HOST_LINKS random pages of its host
    (relative links), plus sc.cross absolute links to random pages of other hosts.
    A crawl of such a site queues a run of one host's URLs at once, the case a single
    queue handles worst. Regenerated only when the layout, the hosts or the port change."""
    site = ensure_work() / "politeness" / f"site-{sc.name}"
    key = {"gen": GEN_VERSION, "seed": SEED, "hosts": [sc.hosts[0], sc.hosts[-1], len(sc.hosts)], "hot": sc.hot,
           "pages": sc.pages, "cross": sc.cross, "port": port}
    stamp = site / "key.json"
    if stamp.exists() and json.loads(stamp.read_text()) == key:
        return site
    rng = random.Random(SEED)
    last = sc.pages - 1
    for n, addr in enumerate(sc.hosts):
        d = site / addr
        d.mkdir(parents=True, exist_ok=True)
        for k in range(sc.pages):
            if k == 0:
                links = [f"p{j}.html" for j in range(1, sc.pages)]
                if addr == sc.hot:  # the other hosts' roots, queued just before this host's pages
                    links = [f"http://{h}:{port}/" for h in sc.hosts if h != addr] + links
            else:
                near = [k % last + 1, (k - 2) % last + 1] + [rng.randint(1, last) for _ in range(SAME_HOST_LINKS)]
                links = ["/"] + [f"p{j}.html" for j in near]
            for _ in range(sc.cross):
                other = sc.hosts[(n + rng.randrange(1, len(sc.hosts))) % len(sc.hosts)]
                links.append(f"http://{other}:{port}{page_path(rng.randrange(sc.pages))}")
            items = "".join(f'<li><a href="{h}">{h}</a></li>' for h in links)
            html = (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{addr} page {k}</title>'
                    f"</head><body><h1>{addr} page {k}</h1><ul>{items}</ul>{FILLER}</body></html>\n")
            (d / ("index.html" if k == 0 else f"p{k}.html")).write_text(html)
    stamp.write_text(json.dumps(key))
    return site


class Throttled(http.server.BaseHTTPRequestHandler):
    """retry429's throttled host (nginx proxies all of it here): its HOT_NTH-th request,
    whatever the path, is answered 429 with Retry-After; every other one gets the page
    from disk (that URL's retry too). Counting requests, not paths, puts the 429 early
    in every run whatever order a crawler takes the host's URLs in."""
    root = Path()
    count = 0
    lock = threading.Lock()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        with self.lock:
            Throttled.count += 1
            throttle = Throttled.count == HOT_NTH
        path = self.path.split("?")[0]
        file = self.root / (path.lstrip("/") + ("index.html" if path.endswith("/") else ""))
        if throttle:
            body, status, ctype = b"slow down\n", 429, "text/plain"
        elif file.is_file() and ".." not in path:
            body, status, ctype = file.read_bytes(), 200, "text/html; charset=utf-8"
        else:
            body, status, ctype = b"not found\n", 404, "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if throttle:
            self.send_header("Retry-After", str(RETRY_AFTER))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def ports_free(addrs: list[str], port: int) -> None:
    """Exit if any ADDR:port is taken: our nginx would fail to bind, and the readiness
    check would then pass against whoever holds the port (another run of this script,
    from another worktree), and the two runs' crawls would mix in the counts."""
    for addr in addrs:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((addr, port))
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
                sys.exit(f"{addr}:{port} is in use (another bench/politeness.py?): try --port")


def serve(sc: Scenario, site: Path, port: int, log: Path) -> Nginx:
    """nginx on ADDR:port for every host of sc (plus 127.0.0.1:port, unused, for the
    readiness check), logging every request to `log`."""
    ports_free(["127.0.0.1", *sc.hosts], port)
    log.write_text("")
    logline = f"access_log {log} polite buffer=64k flush=100ms;"
    plain = [a for a in sc.hosts if a != sc.hot]
    servers = f"""
    log_format polite '{LOG_FORMAT}';
    server {{
        {" ".join(f"listen {a}:{port};" for a in plain)}
        {logline}
        root {site}/$server_addr;
        index index.html;
    }}"""
    if sc.hot:
        Throttled.root = site / sc.hot
        hot = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Throttled)
        threading.Thread(target=hot.serve_forever, daemon=True).start()
        servers += f"""
    server {{
        listen {sc.hot}:{port};
        {logline}
        root {site}/$server_addr;
        index index.html;
        location / {{ proxy_pass http://127.0.0.1:{hot.server_address[1]}; }}
    }}"""
    # A higher priority for the worker: on this shared machine a worker that waits for a
    # core stamps the requests it then reads late, which shortens the measured gaps.
    return Nginx(f"politeness-{sc.name}", "return 404;", port=port, http_extra=servers,
                 main_extra="worker_priority -10;" if os.geteuid() == 0 else "")


# --------------------------------------------------------------------------- the log

@dataclass(frozen=True)
class Hit:
    start: float
    addr: str
    status: int
    nth: int             # the request's number on its connection: 1 = a new connection
    uri: str


def read_hits(log: Path, offset: int) -> list[Hit]:
    with log.open("rb") as fh:
        fh.seek(offset)
        lines = fh.read().decode("utf-8", "replace").splitlines()
    hits = []
    for line in lines:
        parts = line.split(" ", 5)
        if len(parts) == 6:
            hits.append(Hit(float(parts[0]) - float(parts[1]), parts[2], int(parts[3]), int(parts[4]), parts[5]))
    return sorted(hits, key=lambda h: h.start)


# --------------------------------------------------------------------------- children

_LIVE: set[int] = set()   # pidfds of crawlers still running: killed if the harness exits


@atexit.register
def _kill_live() -> None:
    for fd in list(_LIVE):
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Stopper:
    """Ends a crawler `seconds` after the server saw its first request: SIGINT, a second
    SIGINT after 5 s (Scrapy's forced stop), SIGKILL after 5 more. Holds a pidfd, so a
    signal never reaches a recycled pid."""

    def __init__(self, log: Path, offset: int, seconds: float) -> None:
        self.log, self.offset, self.seconds = log, offset, seconds
        self.done = threading.Event()
        self.signalled = False

    def start(self, pid: int) -> None:
        fd = os.pidfd_open(pid)
        _LIVE.add(fd)
        threading.Thread(target=self._run, args=(fd,), daemon=True).start()

    def _run(self, fd: int) -> None:
        try:
            give_up = time.time() + 60
            first = None
            while first is None and time.time() < give_up and not self.done.is_set():
                hits = read_hits(self.log, self.offset)
                first = hits[0].start if hits else None
                self.done.wait(0.1)
            if self.done.wait(max(0.0, (first or time.time()) + self.seconds + 0.3 - time.time())):
                return
            self.signalled = True
            for sig, grace in ((signal.SIGINT, 5), (signal.SIGINT, 5), (signal.SIGKILL, 0)):
                signal.pidfd_send_signal(fd, sig)
                if self.done.wait(grace):
                    return
        except ProcessLookupError:
            pass
        finally:
            _LIVE.discard(fd)
            os.close(fd)


def crawler_argv(sc: Scenario, tool: Tool, port: int, robots: bool, tag: str) -> list[str]:
    roots = [f"http://{a}:{port}/" for a in sc.roots]
    if tool.kind == "crawltop":
        argv = [str(CRAWLTOP), "crawl", *roots, "--headless", "-c", str(tool.conc), "--delay", str(sc.delay),
                "--no-sitemaps", "--name", tag, *(["--processes", str(tool.processes)] if tool.processes > 1 else [])]
        return argv + (["--scope", "any"] if sc.scope_any else []) + ([] if robots else ["--no-robots"])
    return [str(ensure_scrapy()), "runspider", str(BENCH / "scrapy_hosts_spider.py"),
            "-a", "roots=" + ",".join(roots), "-a", "scope=" + ("any" if sc.scope_any else "roots"),
            "-s", f"CONCURRENT_REQUESTS={tool.conc}", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1",
            "-s", f"DOWNLOAD_DELAY={sc.delay}", "-s", "DOWNLOAD_DELAY_JITTER=0",  # Scrapy >= 2.14
            "-s", "RANDOMIZE_DOWNLOAD_DELAY=False",  # older Scrapy (2.14+ warns that it is deprecated)
            "-s", f"ROBOTSTXT_OBEY={robots}"]


def measure(sc: Scenario, hits: list[Hit], ended_itself: bool) -> dict:
    """The figures of one run from the server's log (see the module docstring)."""
    if not hits:
        return {"requests": 0, "rate": 0.0, "of_ideal": 0.0, "hosts": 0, "all_hosts_s": None, "min_gap_ms": None,
                "min_gap2_ms": None,
                "gaps_under_delay": 0, "busiest_share": 0.0, "statuses": {}, "ended_itself": ended_itself}
    t0 = hits[0].start
    win = [h for h in hits if h.start <= t0 + sc.seconds]
    span = (win[-1].start - t0) if ended_itself else sc.seconds
    starts: dict[str, list[float]] = {}
    for h in win:
        starts.setdefault(h.addr, []).append(h.start)
    gaps = [round(b - a, 3) for s in starts.values() for a, b in zip(s, s[1:], strict=False)]  # nginx stamps are ms
    pairs = [round((c - a) / 2, 3) for s in starts.values() for a, c in zip(s, s[2:], strict=False)]
    rate = ratio(len(win), span)
    out: dict = {
        "requests": len(win), "rate": rate, "of_ideal": rate / sc.ideal, "hosts": len(starts),
        "all_hosts_s": (max(s[0] for s in starts.values()) - t0) if len(starts) == len(sc.hosts) else None,
        "min_gap_ms": 1000 * min(gaps) if gaps else None,
        "min_gap2_ms": 1000 * min(pairs) if pairs else None,
        "gaps_under_delay": sum(g < round(sc.delay - GAP_SLACK, 3) for g in gaps),
        "busiest_share": max(map(len, starts.values())) / len(win),
        "statuses": dict(Counter(str(h.status) for h in win)),
        "ended_itself": ended_itself,
    }
    if sc.hot:
        first429 = next((h.start for h in win if h.addr == sc.hot and h.status == 429), None)
        if first429 is not None:
            during = [h for h in win if first429 < h.start < first429 + RETRY_AFTER]
            out["first_429_s"] = first429 - t0
            out["hot_in_retry_after"] = sum(h.addr == sc.hot for h in during)
            out["others_in_retry_after"] = sum(h.addr != sc.hot for h in during)
            out["hot_after"] = sum(h.addr == sc.hot and h.start >= first429 + RETRY_AFTER for h in win)
    return out


def run_tool(sc: Scenario, tool: Tool, ng: Nginx, log: Path, robots: bool, tag: str) -> dict:
    logs = ensure_work() / "politeness" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    Throttled.count = 0  # retry429: every crawler meets the 429 alike
    offset = log.stat().st_size
    stopper = Stopper(log, offset, sc.seconds)
    ng_cpu = ng.cpu()
    with open(logs / f"{tag}.log", "w") as out:
        wall, cpu, rss, rc = run_child(crawler_argv(sc, tool, ng.port, robots, tag), stdout=out,
                                       stderr=subprocess.STDOUT, on_start=stopper.start,
                                       timeout=sc.seconds + 120)
    stopper.done.set()
    time.sleep(0.3)  # nginx flushes its log buffer every 100 ms
    res = measure(sc, read_hits(log, offset), ended_itself=not stopper.signalled)
    nginx_cores = (ng.cpu() - ng_cpu) / wall
    res.update(wall_s=wall, cpu_s=cpu, cores=cpu / wall, rss_mb=rss, rc=rc, nginx_cores=nginx_cores,
               other_cores=max(0.0, last_machine_busy() - cpu / wall - nginx_cores))
    if tool.processes > 1:  # each engine's log ends with its Redis round trips (cli/engine.py)
        trips = records = 0
        for i in range(1, tool.processes + 1):
            engine_log = STATE / "crawltop" / "log" / f"{tag}.p{i}.log"
            for line in engine_log.read_text(errors="replace").splitlines() if engine_log.exists() else ():
                if line.strip().startswith("redis: ") and "round trips for" in line:
                    words = line.split()
                    trips, records = trips + int(words[1]), records + int(words[5])
        res["round_trips_per_page"] = ratio(trips, records) if records else None
    return res


# --------------------------------------------------------------------------- report

def fmt(x: float | int | None, spec: str = ".0f") -> str:
    return "—" if x is None else format(x, spec)


def summarise(sc: Scenario, runs: dict[str, list[dict]]) -> dict[str, dict]:
    summary: dict[str, dict] = {}
    for label, rs in runs.items():
        gaps = [r["min_gap_ms"] for r in rs if r.get("min_gap_ms") is not None]
        gaps2 = [r["min_gap2_ms"] for r in rs if r.get("min_gap2_ms") is not None]
        reached_all = [r["all_hosts_s"] for r in rs]
        s = {
            "rate": median([r["rate"] for r in rs]),
            "of_ideal": median([r.get("of_ideal", 0.0) for r in rs]),
            "hosts": median([r["hosts"] for r in rs]),
            "all_hosts_s": None if None in reached_all else median(reached_all),
            "min_gap_ms": min(gaps) if gaps else None,
            "min_gap2_ms": min(gaps2) if gaps2 else None,
            "gaps_under_delay": max(r.get("gaps_under_delay", 0) for r in rs),
            "busiest_share": median([r.get("busiest_share", 0.0) for r in rs]),
            "cores": median([r["cores"] for r in rs]),
            "other_cores": median([r["other_cores"] for r in rs]),
            "rss_mb": median([r["rss_mb"] for r in rs]),
            "rates": [round(r["rate"], 1) for r in rs],
        }
        trips = [r["round_trips_per_page"] for r in rs if r.get("round_trips_per_page") is not None]
        if trips:
            s["round_trips_per_page"] = median(trips)
        if sc.hot:
            leaks = [r.get("hot_in_retry_after") for r in rs]
            s["hot_in_retry_after"] = None if None in leaks else max(leaks)
            s["others_in_retry_after"] = median([r.get("others_in_retry_after", 0) for r in rs])
            s["hot_after"] = median([r.get("hot_after", 0) for r in rs])
        summary[label] = s
    return summary


def report(sc: Scenario, summary: dict[str, dict], nruns: int) -> dict[str, float]:
    header = ["tool", "req/s", "of ideal", "hosts", "all hosts at s", "min gap ms", "over 2 gaps", "gaps < delay",
              "busiest host", "cores", "other load", "RSS MB",
              "req/s per round"]
    rows = [[label, fmt(s["rate"], ".1f"), fmt(s["of_ideal"], ".2f"), f"{s['hosts']:.0f}/{len(sc.hosts)}",
             fmt(s["all_hosts_s"], ".1f"), fmt(s["min_gap_ms"]), fmt(s["min_gap2_ms"]), str(s["gaps_under_delay"]),
             f"{100 * s['busiest_share']:.0f}%", fmt(s["cores"], ".2f"), fmt(s["other_cores"], ".2f"), fmt(s["rss_mb"]),
             " ".join(f"{x:.1f}" for x in s["rates"])] for label, s in summary.items()]
    if sc.hot:
        header += [f"hot host in {RETRY_AFTER} s", "others then", "hot after"]
        for row, s in zip(rows, summary.values(), strict=True):
            row += [fmt(s["hot_in_retry_after"]), fmt(s["others_in_retry_after"]), fmt(s["hot_after"])]
    print(f"\n{sc.name}: {len(sc.hosts)} hosts x {sc.pages} pages, delay {sc.delay} s, {sc.seconds:.0f} s "
          f"window; ideal {sc.ideal:.0f} req/s; medians over {nruns} round(s) (min gap: minimum)")
    print(fmt_table(rows, header))

    ratios: dict[str, float] = {}
    ct = summary.get("crawltop")
    scrapies = {k: v for k, v in summary.items() if k.startswith("scrapy")}
    if ct and scrapies:
        best = max(scrapies, key=lambda k: scrapies[k]["rate"])
        ratios[f"crawltop/{best}"] = ratio(ct["rate"], scrapies[best]["rate"])
    p2 = summary.get("crawltop-p2")
    p2_ratio = ratio(p2["rate"], ct["rate"]) if ct and p2 else None
    if p2_ratio is not None:
        print(f"  crawltop-p2/crawltop: {p2_ratio:.2f}x")
    if p2 and p2.get("round_trips_per_page") is not None:
        print(f"  crawltop-p2: {p2['round_trips_per_page']:.2f} Redis round trips per page (heartbeats included)")
    if not ct:
        return ratios
    checks: list[tuple[str, bool]] = [
        (f"min gap {fmt(ct['min_gap_ms'])} ms >= delay {1000 * sc.delay:.0f} ms (slack {1000 * GAP_SLACK:.0f} ms; "
         f"over two gaps {fmt(ct['min_gap2_ms'])} ms)",
         ct["gaps_under_delay"] == 0)]
    for key, r in ratios.items():
        print(f"  {key}: {r:.2f}x")
    if sc.name == "hosts20":
        checks.append((f"{ct['of_ideal']:.2f} of the ideal {sc.ideal:.0f}/s >= 0.9", ct["of_ideal"] >= 0.9))
        checks += [(f"{k} {r:.2f}x >= 1x", r >= 1.0) for k, r in ratios.items()]
    elif sc.name == "hosts1000":
        checks.append((f"all {len(sc.hosts)} hosts within {sc.seconds:.0f} s (reached {ct['hosts']:.0f}, "
                        f"the last at {fmt(ct['all_hosts_s'], '.1f')} s)",
                       ct["all_hosts_s"] is not None))
        checks += [(f"{k} {r:.2f}x >= 4x", r >= 4.0) for k, r in ratios.items()]
    elif sc.hot:
        checks.append((f"{fmt(ct['hot_in_retry_after'])} requests to the 429 host within {RETRY_AFTER} s == 0",
                       ct["hot_in_retry_after"] == 0))
        checks.append((f"{fmt(ct['others_in_retry_after'])} requests to other hosts then > 0",
                       (ct["others_in_retry_after"] or 0) > 0))
    if p2:  # --processes 2: the same targets across two processes, and the gap across both
        checks.append((f"--processes 2: min gap {fmt(p2['min_gap_ms'])} ms, {p2['gaps_under_delay']} gaps under the "
                       f"delay", p2["gaps_under_delay"] == 0))
        if sc.name == "hosts20":
            checks.append((f"--processes 2: {p2['of_ideal']:.2f} of the ideal >= 0.9", p2["of_ideal"] >= 0.9))
        elif sc.name == "hosts1000":
            checks.append((f"--processes 2: all hosts within {sc.seconds:.0f} s (the last at "
                           f"{fmt(p2['all_hosts_s'], '.1f')} s)", p2["all_hosts_s"] is not None))
            checks.append((f"--processes 2 {fmt(p2_ratio, '.2f')}x one process >= 1.3x",
                           p2_ratio is not None and p2_ratio >= 1.3))
        elif sc.hot:
            checks.append((f"--processes 2: {fmt(p2.get('hot_in_retry_after'))} requests to the 429 host within "
                           f"{RETRY_AFTER} s == 0", p2.get("hot_in_retry_after") == 0))
    for text, ok in checks:
        print(f"  crawltop target: {text}: {'met' if ok else 'MISSED'}")
    if p2_ratio is not None:
        ratios["crawltop-p2/crawltop"] = p2_ratio
    return ratios


def version_of(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="all", help="hosts20,hosts1000,retry429 or all (default)")
    ap.add_argument("--tools", default="crawltop,scrapy", help="crawltop,scrapy (default both)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 10 s a case, 100 hosts, 1 round")
    ap.add_argument("--runs", type=int, default=None, help="interleaved rounds (default 3; --quick 1)")
    ap.add_argument("--seconds", type=float, default=None, help="window per crawl (default 30/60/12; --quick 10)")
    ap.add_argument("--hosts", type=int, default=None, help="hosts in hosts1000 (default 1000; --quick 100)")
    ap.add_argument("--robots", action="store_true", help="obey robots.txt in both tools (default off)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--quiet-wait", type=float, default=None,
                    help="before each run, wait up to this long for other load to settle (default 60; --quick 5)")
    ap.add_argument("--json", default=None, help="default bench/_work/politeness.json (--quick: politeness-quick.json)")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so atexit and `with` stop the children
    runs = a.runs or (1 if a.quick else 3)
    quiet = a.quiet_wait if a.quiet_wait is not None else (5.0 if a.quick else 60.0)
    every = scenarios(a.quick, a.seconds, a.hosts)
    names = list(every) if a.scenario == "all" else a.scenario.split(",")
    if set(names) - set(every):
        ap.error(f"unknown scenario {', '.join(sorted(set(names) - set(every)))}: {', '.join(every)}")
    kinds = set(a.tools.split(","))
    if "crawltop" in kinds and not crawltop_works():
        sys.exit(f"{CRAWLTOP} does not work (`crawltop crawl --help` fails)")
    if "scrapy" in kinds:
        ensure_scrapy()
    # one run at a time per worktree: a second would rewrite the sites and truncate the log
    lock = open(ensure_work() / "politeness.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit("another bench/politeness.py runs in this worktree (bench/_work/politeness.lock)")
    out = Path(a.json) if a.json else ensure_work() / ("politeness-quick.json" if a.quick else "politeness.json")
    results: dict = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"), "quick": a.quick, "runs": runs, "robots": a.robots,
        "crawltop": str(CRAWLTOP),
        "commit": version_of(["git", "-C", str(CRAWLTOP.parents[2]), "describe", "--always", "--dirty"]),
        "scrapy": version_of([str(ensure_scrapy()), "version"]) if "scrapy" in kinds else None,
        "gap_slack_s": GAP_SLACK, "scenarios": {},
    }
    for name in names:
        sc = every[name]
        tools = [t for t in sc.tools if t.kind in kinds]
        site = generate(sc, a.port)
        log = ensure_work() / "politeness" / f"access-{sc.name}.log"
        per_tool: dict[str, list[dict]] = {t.label: [] for t in tools}
        print(f"{sc.name}: {len(sc.hosts)} hosts on port {a.port}, {sc.seconds:.0f} s a crawl, {runs} round(s)",
              flush=True)
        with serve(sc, site, a.port, log) as ng:
            if ng.proc is None or ng.proc.poll() is not None:
                sys.exit(f"nginx did not start: see {ng.dir}/error.log")
            for r in range(runs):
                for tool in tools[r % len(tools):] + tools[:r % len(tools)]:
                    wait_quiet(max_wait=quiet)
                    t0 = time.strftime("%H:%M:%S")
                    res = run_tool(sc, tool, ng, log, a.robots, f"polite-{sc.name}-{tool.label}-{r}-{os.getpid()}")
                    per_tool[tool.label].append(res)
                    print(f"  [{t0}] round {r + 1} {tool.label:12s} {res['rate']:7.1f} req/s  "
                          f"hosts {res['hosts']}/{len(sc.hosts)}  min gap {fmt(res.get('min_gap_ms'))} ms  "
                          f"busiest {100 * res['busiest_share']:.0f}%  cores {res['cores']:.2f}  "
                          f"other load {res['other_cores']:.2f}  rc {res['rc']}"
                          + (f"  429 host in {RETRY_AFTER} s: {fmt(res.get('hot_in_retry_after'))}" if sc.hot else ""),
                          flush=True)
        summary = summarise(sc, per_tool)
        ratios = report(sc, summary, runs)
        results["scenarios"][name] = {
            "hosts": len(sc.hosts), "pages_per_host": sc.pages, "cross_links": sc.cross, "delay": sc.delay,
            "seconds": sc.seconds, "ideal": sc.ideal, "tools": {t.label: t.conc for t in tools},
            "summary": summary, "ratios": ratios, "runs": per_tool,
        }
        out.write_text(json.dumps(results, indent=2))
    print(f"\nfigures written to {out}")


if __name__ == "__main__":
    main()
