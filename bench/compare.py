"""Throughput on a ~20,000-page static site served by nginx: crawltop vs Scrapy vs wget
vs a bare aiohttp + selectolax loop, side by side in one run.

    .venv/bin/python bench/compare.py                 # 3 rounds, all four tools
    .venv/bin/python bench/compare.py --runs 5 --tools crawltop,bare

Every tool crawls http://127.0.0.1:PORT/ at concurrency 20 with robots.txt off (wget
has one connection: that is how people run it). Rounds are interleaved (each round
runs every tool once, in turn) so that machine noise spreads over all of them.
Each tool is a child process; wall time is spawn to exit, CPU and peak RSS come from
wait4() on that child. pages/s = distinct HTML pages found (status 200, text/html) /
wall seconds. Each tool's URL set is checked against the generator's manifest.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402 (bench/ put on sys.path just above)
    BENCH,
    CRAWLTOP,
    VENV_PY,
    RunResult,
    crawltop_works,
    ensure_scrapy,
    ensure_work,
    fmt_table,
    last_machine_busy,
    median,
    parse_wget_log,
    ratio,
    read_crawltop_jsonl,
    read_url_list,
    run_child,
    wait_quiet,
)
from nginx_site import DEFAULT_PORT, generate, serve, site_dir  # noqa: E402 (bench/ put on sys.path just above)

TOOLS = ("crawltop", "scrapy", "wget", "bare")
# BENCH_CRAWLTOP_BEFORE=/path/to/an/older/crawltop adds it as the tool "before", side by side;
# --before-args gives it its own flags (an older build may not know the newer ones)
BEFORE = os.environ.get("BENCH_CRAWLTOP_BEFORE")
TARGETS = {  # the least crawltop's pages/s must be, as a ratio to each
    "crawltop/scrapy": 8.0,
    "crawltop/wget": 1.5,
    "crawltop/bare": 0.9,
}
RSS_TARGET_MB = 150.0
BEFORE_ARGS: list[str] = []


STACK_PROBE = """
import aiohttp.http_parser as p
from crawltop.core import jsonfast, runloop
c = p.HttpResponseParser.__module__ == "aiohttp._http_parser"
print(f"aiohttp {__import__('aiohttp').__version__} C parser {'on' if c else 'OFF'}, loop {runloop.loop_name()}, "
      f"json {'orjson' if jsonfast.orjson is not None else 'stdlib'}")
"""


def stack() -> str:
    """What the engine runs on: aiohttp's C extensions, the loop, the JSON library."""
    # -P: the repository's own crawltop/ folder (the package's top, mapped at install) must
    # not stand in for the installed package when this runs from the repository
    done = subprocess.run([str(VENV_PY), "-P", "-c", STACK_PROBE], capture_output=True, text=True, check=False)
    return done.stdout.strip() or f"unknown ({done.stderr.strip()[-200:]})"


def warm_cache(site: Path) -> None:
    """Read every file once so the first tool does not pay for a cold page cache."""
    for dirpath, _dirs, files in os.walk(site):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                while fh.read(1 << 20):
                    pass


def run_tool(tool: str, root: str, conc: int, out: Path, tag: str, extra_args: list[str]) -> RunResult:
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / f"{tag}.log", "w")
    try:
        if tool in ("crawltop", "before"):
            jsonl = out / f"{tag}.jsonl"
            binary = BEFORE if tool == "before" else str(CRAWLTOP)
            argv = [binary, "crawl", root, "--headless", "-c", str(conc), "--no-robots",
                    "--output", str(jsonl), *(BEFORE_ARGS if tool == "before" else extra_args)]
            wall, cpu, rss, rc = run_child(argv, stdout=log, stderr=subprocess.STDOUT)
            html, n, info = read_crawltop_jsonl(jsonl)
            return RunResult(tool, wall, cpu, rss, rc, html, n, info)
        if tool == "scrapy":
            urls = out / f"{tag}.txt"
            argv = [str(ensure_scrapy()), "runspider", str(BENCH / "scrapy_spider.py"),
                    "-a", f"root={root}", "-a", f"out={urls}",
                    "-s", f"CONCURRENT_REQUESTS={conc}", "-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={conc}"]
            wall, cpu, rss, rc = run_child(argv, stdout=log, stderr=subprocess.STDOUT)
            html = read_url_list(urls)
            return RunResult(tool, wall, cpu, rss, rc, html, 0, {})
        if tool == "wget":
            wlog = out / f"{tag}.wget.log"
            tmp = out / f"{tag}.wget-tmp"
            tmp.mkdir(exist_ok=True)
            argv = ["wget", "-r", "--spider", "-l", "inf", "-nd", "-e", "robots=off",
                    "-P", str(tmp), "-o", str(wlog), root]
            wall, cpu, rss, rc = run_child(argv, stdout=log, stderr=subprocess.STDOUT)
            html, n, info = parse_wget_log(wlog)
            # rc 8 = "server issued an error response": the site's deliberate 404s
            return RunResult(tool, wall, cpu, rss, 0 if rc == 8 else rc, html, n, info)
        if tool == "bare":
            urls = out / f"{tag}.txt"
            argv = [str(VENV_PY), str(BENCH / "bare.py"), root, "-c", str(conc), "--out", str(urls)]
            p_out = out / f"{tag}.json"
            with open(p_out, "w") as fh:
                wall, cpu, rss, rc = run_child(argv, stdout=fh, stderr=log)
            info = json.loads(p_out.read_text() or "{}")
            return RunResult(tool, wall, cpu, rss, rc, read_url_list(urls), info.get("requests", 0), info)
        raise ValueError(tool)
    finally:
        log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("-c", "--concurrency", type=int, default=20)
    ap.add_argument("--crawltop-args", default="", help="extra crawltop flags, space separated")
    ap.add_argument("--before-args", default="", help="the flags of the 'before' build (default: none)")
    ap.add_argument("--quiet-wait", type=float, default=60.0,
                    help="before each run, wait up to this long for other load on the machine to settle")
    ap.add_argument("--json", default=None, help="write all figures here (default bench/_work/compare/results.json)")
    a = ap.parse_args()
    BEFORE_ARGS[:] = a.before_args.split()

    tools = [t for t in a.tools.split(",") if t]
    if "crawltop" in tools and not crawltop_works():
        print("crawltop CLI not usable yet (`crawltop crawl --help` fails): skipping it", file=sys.stderr)
        tools.remove("crawltop")
    if "scrapy" in tools:
        ensure_scrapy()
    work = ensure_work() / "compare"
    work.mkdir(parents=True, exist_ok=True)

    manifest = generate(site_dir(), port=a.port)
    warm_cache(site_dir())
    base = f"http://127.0.0.1:{a.port}"
    expected = {base + p for p in manifest["html"]}
    print(f"site: {len(expected)} HTML pages, {len(manifest['redirects'])} URLs that 301, "
          f"{len(manifest['dead'])} that 404, {manifest['bytes'] / 1e6:.0f} MB; "
          f"concurrency {a.concurrency}, robots off, {a.runs} rounds; cores: {os.cpu_count()}")
    print(f"crawltop's stack: {stack()}")

    results: dict[str, list[RunResult]] = {t: [] for t in tools}
    with serve(site_dir(), a.port) as ng:
        root = ng.base + "/"
        for r in range(a.runs):
            order = tools[r % len(tools):] + tools[:r % len(tools)]  # rotate who goes first
            for tool in order:
                wait_quiet(max_wait=a.quiet_wait)
                t0 = time.strftime("%H:%M:%S")
                ng_cpu0 = ng.cpu()
                res = run_tool(tool, root, a.concurrency, work, f"{tool}-{r}", a.crawltop_args.split())
                res.extra["nginx_cores"] = (ng.cpu() - ng_cpu0) / res.wall
                res.extra["other_cores"] = max(0.0, last_machine_busy() - res.cpu / res.wall - res.extra["nginx_cores"])
                results[tool].append(res)
                miss, extra = len(expected - res.html_urls), len(res.html_urls - expected)
                print(f"  [{t0}] round {r + 1} {tool:8s} {res.wall:7.1f} s  {res.pages_per_s:7.0f} pages/s  "
                      f"{res.pages:6d} pages (missing {miss}, extra {extra})  cpu {res.cpu:6.1f} s  "
                      f"rss {res.maxrss_mb:6.1f} MB  rc {res.rc}  cores: nginx {res.extra['nginx_cores']:.2f} "
                      f"others {res.extra['other_cores']:.2f}", flush=True)

    rows = []
    summary: dict[str, dict] = {}
    for tool in tools:
        rs = results[tool]
        last = rs[-1]
        s = {
            "pages_per_s": median([x.pages_per_s for x in rs]),
            "wall_s": median([x.wall for x in rs]),
            "cpu_s": median([x.cpu for x in rs]),
            "rss_mb": median([x.maxrss_mb for x in rs]),
            "rss_mb_max": max(x.maxrss_mb for x in rs),
            "pages": last.pages,
            "missing": len(expected - last.html_urls),
            "extra": len(rs[-1].html_urls - expected),
            "runs": [round(x.pages_per_s, 1) for x in rs],
            "requests": last.requests,
            "rc": [x.rc for x in rs],
            "other_cores": median([x.extra["other_cores"] for x in rs]),
            "nginx_cores": median([x.extra["nginx_cores"] for x in rs]),
            "info": last.extra,
        }
        summary[tool] = s
        rows.append([tool, f"{s['pages_per_s']:.0f}", f"{s['wall_s']:.1f}", f"{s['cpu_s']:.1f}",
                     f"{1e3 * s['cpu_s'] / max(1, s['pages']):.2f}",
                     f"{s['rss_mb']:.0f}", str(s["pages"]), str(s["missing"]), str(s["extra"]),
                     f"{s['nginx_cores']:.2f}", f"{s['other_cores']:.2f}",
                     " ".join(f"{x:.0f}" for x in s["runs"])])
    print()
    print(f"medians over {a.runs} rounds (concurrency {a.concurrency}; wget: one connection)")
    print(fmt_table(rows, ["tool", "pages/s", "wall s", "cpu s", "cpu ms/page", "peak RSS MB",
                           "HTML pages", "missing", "extra", "nginx cores", "other load", "pages/s per run"]))

    # Same set of HTML pages? Compare every tool with every other (last round).
    print()
    print("URL-set differences (last round; symmetric difference, count):")
    for i, t1 in enumerate(tools):
        for t2 in tools[i + 1:]:
            d = results[t1][-1].html_urls ^ results[t2][-1].html_urls
            print(f"  {t1} vs {t2}: {len(d)}" + (f"  e.g. {sorted(d)[:3]}" if d else ""))

    ratios: dict[str, float] = {}
    if "crawltop" in summary:
        print()
        print("ratios (pages/s, medians):")
        for other in ("scrapy", "wget", "bare"):
            if other in summary:
                key = f"crawltop/{other}"
                ratios[key] = ratio(summary["crawltop"]["pages_per_s"], summary[other]["pages_per_s"])
                tgt = TARGETS[key]
                print(f"  {key:16s} {ratios[key]:6.2f}x   "
                      f"target >= {tgt}x: {'met' if ratios[key] >= tgt else 'MISSED'}")
        rss = summary["crawltop"]["rss_mb_max"]
        print(f"  crawltop peak RSS {rss:.0f} MB   target <= {RSS_TARGET_MB:.0f} MB: "
              f"{'met' if rss <= RSS_TARGET_MB else 'MISSED'}")
    if "bare" in summary:
        for other in ("scrapy", "wget"):
            if other in summary:
                key = f"bare/{other}"
                ratios[key] = ratio(summary["bare"]["pages_per_s"], summary[other]["pages_per_s"])
                print(f"  {key:16s} {ratios[key]:6.2f}x   (for reference)")

    out = Path(a.json) if a.json else work / "results.json"
    out.write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": a.runs,
                               "concurrency": a.concurrency, "expected_pages": len(expected),
                               "summary": summary, "ratios": ratios}, indent=2))
    print(f"\nfigures written to {out}")


if __name__ == "__main__":
    main()
