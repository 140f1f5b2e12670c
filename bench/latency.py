"""Latency scaling: every page answers after a fixed 100 ms; how close does crawltop
get to the ideal rate, concurrency / latency?

    .venv/bin/python bench/latency.py                          # nginx + njs server
    .venv/bin/python bench/latency.py --server aiohttp         # Python server instead
    .venv/bin/python bench/latency.py --conc 10,50,100,200,500 --runs 3 --seconds 12

The site is synthetic and unbounded: /p/N holds ~2 KB of HTML with 20 links, 3 to new
pages (/p/3N+1 .. /p/3N+3) and 17 back to pages already known, so the frontier never
runs dry and de-duplication has work to do. Each crawl is bounded with --max-pages =
(concurrency / 0.1 s) * --seconds.

Default server: Debian's nginx with its njs module (libnginx-mod-http-js, installed if
missing), one worker process, the delay done with njs setTimeout: a C event loop, so
the server is not what limits 5,000 req/s. `--server aiohttp` runs an equivalent aiohttp
server in its own process; its own ceiling is measured with wrk first. It needs several
times the CPU of nginx + njs per request (a whole core near 5,000 req/s, which the
crawler needs), which is why nginx is the default.

Each run is reported three ways, as a fraction of concurrency / 0.1 s:
  process  pages / wall time of the crawltop process (start-up and shutdown included)
  crawl    requests / (last - first request) from the server's access log
  steady   the middle 80% of those requests (ramp-up and tail removed)
The bare aiohttp + selectolax loop (bench/bare.py) runs beside it as the stack's ceiling,
and `wget -r --spider` (one connection, HEAD then GET for each page) once per round,
cut off after --seconds, for what a serial crawler does against real latency.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402 (bench/ put on sys.path just above)
    BENCH,
    CRAWLTOP,
    VENV_PY,
    Nginx,
    crawltop_works,
    ensure_apt,
    ensure_work,
    fmt_table,
    free_port,
    machine_cpu,
    median,
    parse_wget_log,
    proc_tree_cpu,
    read_crawltop_jsonl,
    run_child,
    wait_port,
    wait_quiet,
)

LATENCY = 0.1
CHILDREN = 3
LINKS = 20
JS_MODULE = "/usr/lib/nginx/modules/ngx_http_js_module.so"

NJS = r"""
function page(r) {
    var m = r.uri.match(/^\/p\/(\d+)$/);
    var n = m ? parseInt(m[1]) : 0;
    var parts = ['<!DOCTYPE html><html><head><meta charset="utf-8"><title>page ', n,
                 '</title></head><body><h1>page ', n, '</h1><ul>'];
    for (var k = 1; k <= @CHILDREN@; k++) {
        parts.push('<li><a href="/p/' + (n * @CHILDREN@ + k) + '">child ' + k + '</a></li>');
    }
    for (var k = 0; k < @LINKS@ - @CHILDREN@; k++) {
        var t = (n * 7919 + k * 104729) % (n + 1);
        parts.push('<li><a href="/p/' + t + '">back ' + t + '</a></li>');
    }
    parts.push('</ul>', FILLER, '</body></html>');
    var body = parts.join('');
    setTimeout(function () {
        r.headersOut['Content-Type'] = 'text/html; charset=utf-8';
        r.return(200, body);
    }, @DELAY_MS@);
}
var FILLER = '<p>' + 'asyncio crawler latency scaling benchmark filler text. '.repeat(24) + '</p>';
export default {page};
"""


def page_html(n: int) -> str:
    """The aiohttp server's page: same shape as the njs one."""
    parts = [f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>page {n}</title></head>'
             f"<body><h1>page {n}</h1><ul>"]
    for k in range(1, CHILDREN + 1):
        parts.append(f'<li><a href="/p/{n * CHILDREN + k}">child {k}</a></li>')
    for k in range(LINKS - CHILDREN):
        t = (n * 7919 + k * 104729) % (n + 1)
        parts.append(f'<li><a href="/p/{t}">back {t}</a></li>')
    parts.append("</ul><p>" + "asyncio crawler latency scaling benchmark filler text. " * 24 + "</p></body></html>")
    return "".join(parts)


# ------------------------------------------------------------------ servers

class NjsServer:
    def __init__(self) -> None:
        ensure_apt("libnginx-mod-http-js", Path(JS_MODULE))
        d = ensure_work() / "nginx-latency"
        d.mkdir(parents=True, exist_ok=True)
        js = d / "latency.js"
        js.write_text(NJS.replace("@CHILDREN@", str(CHILDREN)).replace("@LINKS@", str(LINKS))
                      .replace("@DELAY_MS@", str(int(LATENCY * 1000))))
        self.log = d / "access.log"
        self.log.write_text("")
        self.nginx = Nginx("latency", f"""
            access_log {self.log} lat buffer=256k flush=200ms;
            location /p/ {{ js_content main.page; }}
            location / {{ return 404; }}
        """, modules=(JS_MODULE,), http_extra=f"js_import main from {js};\n    log_format lat '$msec $status';")
        self.port = self.nginx.port

    def __enter__(self) -> NjsServer:
        self.nginx.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.nginx.__exit__()

    def cpu(self) -> float:
        return proc_tree_cpu(self.nginx.proc.pid) if self.nginx.proc else 0.0

    def mark(self) -> int:
        return self.log.stat().st_size

    def times_since(self, offset: int, start: float, end: float) -> list[float]:
        time.sleep(0.5)  # let the buffered access log flush
        with self.log.open("rb") as fh:
            fh.seek(offset)
            stamps = (float(line.split()[0]) for line in fh.read().decode().splitlines() if line.strip())
            return sorted(t for t in stamps if start <= t <= end)


class AiohttpServer:
    """bench/latency.py --serve PORT --log FILE in a child process (its own core)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.log = ensure_work() / "latency-aiohttp.log"
        self.log.write_text("")
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> AiohttpServer:
        self.proc = subprocess.Popen([str(VENV_PY), __file__, "--serve", str(self.port), "--log", str(self.log)])
        wait_port(self.port)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def cpu(self) -> float:
        return proc_tree_cpu(self.proc.pid) if self.proc else 0.0

    def mark(self) -> int:
        return self.log.stat().st_size

    def times_since(self, offset: int, start: float, end: float) -> list[float]:
        time.sleep(1.2)  # the server flushes its log once a second
        with self.log.open("rb") as fh:
            fh.seek(offset)
            return sorted(t for t in map(float, fh.read().decode().split()) if start <= t <= end)


def serve_aiohttp(port: int, log: str) -> None:
    from aiohttp import web

    stamps: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        try:
            n = int(request.match_info["n"])
        except ValueError:
            raise web.HTTPNotFound() from None
        await asyncio.sleep(LATENCY)
        stamps.append(f"{time.time():.3f}\n")
        return web.Response(text=page_html(n), content_type="text/html")

    async def flusher(app: web.Application):
        async def loop() -> None:
            with open(log, "a") as fh:
                while True:
                    await asyncio.sleep(1.0)
                    if stamps:
                        fh.write("".join(stamps))
                        stamps.clear()
                        fh.flush()
        t = asyncio.create_task(loop())
        yield
        t.cancel()

    app = web.Application()
    app.router.add_get("/p/{n}", handler)
    app.cleanup_ctx.append(flusher)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096)


def wrk_capacity(port: int, conns: int, seconds: int = 5) -> float | None:
    """The server's own ceiling at this many connections (wrk, from Debian's packages)."""
    ensure_apt("wrk", Path("/usr/bin/wrk"))
    if not shutil.which("wrk"):
        return None
    r = subprocess.run(["wrk", "-t", "1", "-c", str(conns), "-d", f"{seconds}s",
                        f"http://127.0.0.1:{port}/p/1"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    return None


# ------------------------------------------------------------------ crawls

def window_rates(stamps: list[float]) -> tuple[float, float]:
    """(requests/s first..last, requests/s over the middle 80%) from server timestamps."""
    n = len(stamps)
    if n < 10:
        return float("nan"), float("nan")
    crawl = (n - 1) / max(1e-9, stamps[-1] - stamps[0])
    lo, hi = int(n * 0.1), int(n * 0.9)
    steady = (hi - lo) / max(1e-9, stamps[hi] - stamps[lo])
    return crawl, steady


def run_one(tool: str, server, conc: int, max_pages: int, out: Path, quiet_wait: float,
            seconds: float = 12.0) -> dict:
    root = f"http://127.0.0.1:{server.port}/p/0"
    log = open(out / f"{tool}-c{conc}.log", "w")
    # also lets earlier requests (wrk, the last crawl) reach the log before the mark
    wait_quiet(max_wait=quiet_wait)
    mark = server.mark()
    start = time.time()
    srv0, (busy0, tot0) = server.cpu(), machine_cpu()
    if tool == "crawltop":
        jsonl = out / f"crawltop-c{conc}.jsonl"
        argv = [str(CRAWLTOP), "crawl", root, "--headless", "-c", str(conc), "--no-robots",
                "--max-pages", str(max_pages), "--output", str(jsonl)]
        wall, cpu, rss, rc = run_child(argv, stdout=log, stderr=subprocess.STDOUT)
        html, n, info = read_crawltop_jsonl(jsonl)
        pages = len(html)
    elif tool == "wget":
        # one connection whatever the concurrency; the site is endless, so it is cut off
        # after `seconds` and what it fetched by then is counted
        wlog = out / "wget.log"
        tmp = out / "wget-tmp"
        tmp.mkdir(exist_ok=True)
        argv = ["wget", "-r", "--spider", "-l", "inf", "-nd", "-e", "robots=off", "-P", str(tmp),
                "-o", str(wlog), root]
        wall, cpu, rss, rc = run_child(argv, stdout=log, stderr=subprocess.STDOUT, timeout=seconds)
        pages = len(parse_wget_log(wlog)[0])
    else:
        argv = [str(VENV_PY), str(BENCH / "bare.py"), root, "-c", str(conc), "--max-pages", str(max_pages)]
        res = out / f"bare-c{conc}.json"
        with open(res, "w") as fh:
            wall, cpu, rss, rc = run_child(argv, stdout=fh, stderr=log)
        pages = json.loads(res.read_text() or "{}").get("html_pages", 0)
    srv_cpu, (busy1, tot1) = server.cpu() - srv0, machine_cpu()
    log.close()
    # busy cores over the run: the crawler, the server, and anything else on the machine
    cores = os.cpu_count() or 1
    machine_busy = (busy1 - busy0) / max(1e-9, tot1 - tot0) * cores  # in cores
    others = max(0.0, machine_busy - (cpu + srv_cpu) / wall)
    # only what this crawl asked for: stamps inside its own lifetime
    stamps = server.times_since(mark, start, time.time())
    crawl, steady = window_rates(stamps)
    ideal = conc / LATENCY
    return {"tool": tool, "conc": conc, "pages": pages, "wall": wall, "cpu": cpu, "rss": rss, "rc": rc,
            "served": len(stamps),
            "process": pages / wall / ideal, "crawl": crawl / ideal, "steady": steady / ideal,
            "pages_per_s": pages / wall, "crawl_rate": crawl,
            "crawler_cores": cpu / wall, "server_cores": srv_cpu / wall, "other_cores": others}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=("nginx", "aiohttp"), default="nginx")
    ap.add_argument("--conc", default="10,50,100,200,500")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=12.0, help="ideal crawl length; sets --max-pages")
    ap.add_argument("--tools", default="crawltop,bare,wget",
                    help="wget runs once per round (one connection), cut off after --seconds")
    ap.add_argument("--quiet-wait", type=float, default=60.0,
                    help="before each run, wait up to this long for other load on the machine to settle")
    ap.add_argument("--no-wrk", action="store_true", help="skip measuring the server's ceiling")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--log", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve_aiohttp(a.serve, a.log)
        return

    concs = [int(x) for x in a.conc.split(",")]
    tools = [t for t in a.tools.split(",") if t]
    if "crawltop" in tools and not crawltop_works():
        print("crawltop CLI not usable yet: skipping it", file=sys.stderr)
        tools.remove("crawltop")
    out = ensure_work() / "latency"
    out.mkdir(parents=True, exist_ok=True)
    server = NjsServer() if a.server == "nginx" else AiohttpServer()
    results: list[dict] = []
    capacity: dict[int, float | None] = {}
    print(f"server: {a.server}; latency {LATENCY * 1000:.0f} ms; {a.runs} runs; cores: {os.cpu_count()}")
    with server:
        if not a.no_wrk:
            for c in concs:
                capacity[c] = wrk_capacity(server.port, c)
                cap = capacity[c]
                print(f"  server ceiling (wrk -c {c}): {cap if cap is None else round(cap)} req/s; "
                      f"ideal {c / LATENCY:.0f}" + (f"  -> {cap / (c / LATENCY):.2f} of ideal" if cap else ""),
                      flush=True)
        for r in range(a.runs):
            for c in concs:
                max_pages = int(c / LATENCY * a.seconds)
                for tool in (tools if r % 2 == 0 else tools[::-1]):
                    if tool == "wget" and c != concs[0]:
                        continue  # one connection: the same at every concurrency
                    res = run_one(tool, server, 1 if tool == "wget" else c, max_pages, out, a.quiet_wait,
                                  a.seconds)
                    results.append(res)
                    print(f"  run {r + 1} {tool:8s} c={c:3d}  {res['pages']:6d} pages in {res['wall']:5.1f} s  "
                          f"{res['pages_per_s']:6.0f}/s  fraction of ideal: process {res['process']:.2f} "
                          f"crawl {res['crawl']:.2f} steady {res['steady']:.2f}  rss {res['rss']:.0f} MB  "
                          f"cores used: crawler {res['crawler_cores']:.2f} server {res['server_cores']:.2f} "
                          f"others {res['other_cores']:.2f}", flush=True)

    rows = []
    summary = []
    for tool in tools:
        for c in ([1] if tool == "wget" else concs):
            rs = [x for x in results if x["tool"] == tool and x["conc"] == c]
            if not rs:
                continue
            s = {k: median([x[k] for x in rs])
                 for k in ("pages_per_s", "crawl_rate", "process", "crawl", "steady", "cpu",
                           "rss", "crawler_cores", "server_cores", "other_cores")}
            s.update(tool=tool, conc=c, ideal=c / LATENCY, server_ceiling=capacity.get(c))
            summary.append(s)
            target = 0.9 if c <= 200 else 0.75
            verdict = "" if tool != "crawltop" else ("met" if s["crawl"] >= target else "MISSED")
            rows.append([tool, str(c), f"{c / LATENCY:.0f}", f"{s['pages_per_s']:.0f}", f"{s['crawl_rate']:.0f}",
                         f"{s['process']:.2f}", f"{s['crawl']:.2f}", f"{s['steady']:.2f}",
                         f"{s['crawler_cores']:.2f}", f"{s['server_cores']:.2f}", f"{s['other_cores']:.2f}",
                         f"{s['rss']:.0f}",
                         (f"{capacity[c]:.0f}" if capacity.get(c) else "-"),
                         f">= {target}" if tool == "crawltop" else "", verdict])
    print()
    print(f"medians over {a.runs} runs; fractions of the ideal rate concurrency / {LATENCY:g} s")
    print(fmt_table(rows, ["tool", "conc", "ideal/s", "pages/s (process)", "req/s (crawl)", "process",
                           "crawl", "steady", "crawler cores", "server cores", "other cores", "RSS MB",
                           "server ceiling", "target", "(crawl)"]))
    path = out / f"results-{a.server}.json"
    path.write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M:%S"), "server": a.server,
                                "runs": a.runs, "summary": summary, "all": results}, indent=2))
    print(f"\nfigures written to {path}")


if __name__ == "__main__":
    main()
