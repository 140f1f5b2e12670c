"""Peak memory on a site of large pages: crawltop vs `wget -r`, side by side in one run.

    .venv/bin/python bench/large_pages.py                  # Debian's rust-doc, 3 rounds
    .venv/bin/python bench/large_pages.py --site synthetic # generated large pages instead
    BENCH_CRAWLTOP_BEFORE=/tmp/old/.venv/bin/crawltop .venv/bin/python bench/large_pages.py
                                                           # adds an older build as "before"

The site is the Rust documentation of Debian's `rust-doc` package (~21,600 HTML pages
reachable from its index, many of 100 KB to 10 MB with thousands of links), served by a
private nginx; it is apt-get installed when missing. `--site synthetic` generates
instead a deterministic site of large pages (100 KB - 1 MB, hundreds of links each)
under bench/_work/large-site/ for machines without that package.

Every tool crawls the root at concurrency 20 (wget: its one connection) with robots.txt
off; crawltop runs `--headless -o FILE.jsonl`, wget `-r --spider`. Each run is a child
process: peak RSS is its ru_maxrss from wait4(), wall time is spawn to exit, pages/s =
distinct HTML pages found / wall seconds. Rounds interleave the tools, the order
rotating each round; the figures are medians over rounds. An RSS trace of each crawltop
run (VmRSS sampled every 0.1 s against records written) shows where the memory grows.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402 (bench/ put on sys.path just above)
    CRAWLTOP,
    Nginx,
    RunResult,
    ensure_apt,
    ensure_work,
    fmt_table,
    last_machine_busy,
    median,
    parse_wget_log,
    ratio,
    read_crawltop_jsonl,
    run_child,
    wait_quiet,
)

RUST_DOC = Path("/usr/share/doc/rust-doc/html")
RSS_TARGET_MB = 100.0
BEFORE = os.environ.get("BENCH_CRAWLTOP_BEFORE")


# --------------------------------------------------------------------------- the sites

def synthetic_site(pages: int, seed: int = 8) -> Path:
    """pages HTML files of 100 KB - 1 MB (log-normal, median ~250 KB) in 100 directories;
    each links to ~200-1,500 others (relative, root-relative, repeats, fragments)."""
    site = ensure_work() / f"large-site-{pages}"
    stamp = site / ".done"
    if stamp.exists():
        return site
    rng = random.Random(seed)
    dirs = 100
    names = [f"/d{i % dirs:02d}/p{i:05d}.html" for i in range(pages)]
    filler = ("<p>" + " ".join(["memory arena fragment buffer body parse tree link"] * 12) + "</p>\n")
    for i, name in enumerate(names):
        size = int(min(1_000_000, max(100_000, rng.lognormvariate(math.log(250_000), 0.6))))
        nlinks = max(200, size // 700)
        # Every page links to its successor, so the whole site is reachable from the root.
        targets = [names[(i + 1) % pages]] + [rng.choice(names) for _ in range(nlinks)]
        parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{name}</title></head><body>\n"]
        written = len(parts[0])
        for j, t in enumerate(targets):
            href = t if j % 3 else "../" + t.split("/", 2)[2] if t.startswith(f"/d{i % dirs:02d}/") else t
            a = f"<li><a href='{href}{'#s' if j % 7 == 0 else ''}'>link {j} to {t}</a></li>\n"
            parts.append(a)
            written += len(a)
            if j % 20 == 0:
                parts.append(filler)
                written += len(filler)
        while written < size:
            parts.append(filler)
            written += len(filler)
        parts.append("</body></html>\n")
        path = site / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(parts))
    (site / "index.html").write_text("<html><body>" + "".join(
        f"<a href='{n}'>{n}</a>\n" for n in names[:: max(1, pages // 500)]) + "</body></html>\n")
    stamp.write_text("ok")
    return site


def warm_cache(site: Path) -> None:
    for dirpath, _dirs, files in os.walk(site):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                while fh.read(1 << 20):
                    pass


# --------------------------------------------------------------------------- the tools

def rss_trace(pid: int, jsonl: Path, every: float, out: list[tuple[float, int, float]],
              stop: threading.Event) -> None:
    """(seconds, records written, VmRSS MB) of pid every `every` seconds until it exits."""
    t0 = time.monotonic()
    while not stop.is_set():
        try:
            with open(f"/proc/{pid}/status") as fh:
                rss = next((int(line.split()[1]) for line in fh if line.startswith("VmRSS:")), 0) / 1024
            with open(jsonl, "rb") as fh:
                n = sum(buf.count(b"\n") for buf in iter(lambda: fh.read(1 << 20), b""))
        except (OSError, StopIteration):
            n, rss = (out[-1][1] if out else 0), 0.0
        if rss:
            out.append((round(time.monotonic() - t0, 2), n, round(rss, 1)))
        stop.wait(every)


def run_crawltop(binary: str, tool: str, root: str, conc: int, out: Path, tag: str,
                 extra: list[str]) -> RunResult:
    jsonl = out / f"{tag}.jsonl"
    jsonl.unlink(missing_ok=True)
    jsonl.touch()
    argv = [binary, "crawl", root, "--headless", "-c", str(conc), "--no-robots", "-o", str(jsonl), *extra]
    trace: list[tuple[float, int, float]] = []
    stop = threading.Event()
    sampler: list[threading.Thread] = []

    def start(pid: int) -> None:
        sampler.append(threading.Thread(target=rss_trace, args=(pid, jsonl, 0.1, trace, stop), daemon=True))
        sampler[0].start()

    with open(out / f"{tag}.log", "w") as log:
        try:
            wall, cpu, rss, rc = run_child(argv, stdout=log, stderr=subprocess.STDOUT, on_start=start)
        finally:
            stop.set()
            for t in sampler:
                t.join()
    html, n, info = read_crawltop_jsonl(jsonl)
    info["trace"] = trace
    return RunResult(tool, wall, cpu, rss, rc, html, n, info)


def run_wget(root: str, out: Path, tag: str) -> RunResult:
    wlog = out / f"{tag}.wget.log"
    tmp = out / f"{tag}.wget-tmp"
    tmp.mkdir(exist_ok=True)
    argv = ["wget", "-r", "--spider", "-l", "inf", "-nd", "-e", "robots=off", "-P", str(tmp), "-o", str(wlog), root]
    wall, cpu, rss, rc = run_child(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    html, n, info = parse_wget_log(wlog)
    return RunResult("wget", wall, cpu, rss, 0 if rc == 8 else rc, html, n, info)  # 8: some 404s


def trace_summary(trace: list[tuple[float, int, float]]) -> str:
    """RSS when 25/50/75/100% of the records were written, and the peak's position."""
    if not trace:
        return "-"
    total = trace[-1][1] or 1
    marks = []
    for q in (0.25, 0.5, 0.75, 1.0):
        hit = next((t for t in trace if t[1] >= q * total), trace[-1])
        marks.append(f"{int(q * 100)}%:{hit[2]:.0f}")
    peak = max(trace, key=lambda t: t[2])
    return " ".join(marks) + f" peak {peak[2]:.0f} MB at record {peak[1]:,}"


# --------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site", choices=("rust-doc", "synthetic"), default="rust-doc")
    ap.add_argument("--pages", type=int, default=3000, help="synthetic site: number of pages")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tools", default="crawltop,wget", help="crawltop,wget (and `before` if "
                    "BENCH_CRAWLTOP_BEFORE names another build's crawltop)")
    ap.add_argument("-c", "--concurrency", type=int, default=20)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--crawltop-args", default="", help="extra crawltop flags, space separated")
    ap.add_argument("--before-args", default=None, help="the `before` build's flags (default: --crawltop-args), "
                    "for a build that predates some of them")
    ap.add_argument("--quiet-wait", type=float, default=60.0)
    ap.add_argument("--json", default=None, help="figures (default bench/_work/large/results.json)")
    a = ap.parse_args()

    tools = [t for t in a.tools.split(",") if t]
    if BEFORE and "before" not in tools:
        tools.insert(0, "before")
    if a.site == "rust-doc":
        ensure_apt("rust-doc", RUST_DOC / "index.html")
        site = RUST_DOC
    else:
        site = synthetic_site(a.pages)
    warm_cache(site)
    work = ensure_work() / "large"
    work.mkdir(parents=True, exist_ok=True)
    print(f"site: {a.site} at {site}; concurrency {a.concurrency}, robots off, {a.runs} rounds; "
          f"crawltop {CRAWLTOP}" + (f"; before {BEFORE}" if BEFORE else ""))

    results: dict[str, list[RunResult]] = {t: [] for t in tools}
    with Nginx("large", f"root {site};\n        index index.html;", port=a.port or None) as ng:
        root = ng.base + "/"
        for r in range(a.runs):
            order = tools[r % len(tools):] + tools[:r % len(tools)]
            for tool in order:
                wait_quiet(max_wait=a.quiet_wait)
                if tool == "wget":
                    res = run_wget(root, work, f"wget-{r}")
                else:
                    binary = BEFORE if tool == "before" else str(CRAWLTOP)
                    args = a.before_args if tool == "before" and a.before_args is not None else a.crawltop_args
                    res = run_crawltop(binary, tool, root, a.concurrency, work, f"{tool}-{r}", args.split())
                res.extra["other_load"] = last_machine_busy()
                results[tool].append(res)
                extra = f"  rss trace: {trace_summary(res.extra['trace'])}" if "trace" in res.extra else ""
                print(f"  round {r + 1} {tool:9s} {res.pages:6d} pages {res.wall:6.1f} s "
                      f"{res.pages_per_s:6.0f} pages/s  peak RSS {res.maxrss_mb:6.1f} MB  "
                      f"CPU {res.cpu:5.1f} s  rc {res.rc}{extra}", flush=True)

    rows, summary = [], {}
    for tool in tools:
        rs = results[tool]
        s = summary[tool] = {
            "pages": median([x.pages for x in rs]), "pages_per_s": median([x.pages_per_s for x in rs]),
            "wall_s": median([x.wall for x in rs]), "peak_rss_mb": median([x.maxrss_mb for x in rs]),
            "max_peak_rss_mb": max(x.maxrss_mb for x in rs), "cpu_s": median([x.cpu for x in rs]),
            "rounds_pages_per_s": [round(x.pages_per_s) for x in rs],
            "rounds_rss_mb": [round(x.maxrss_mb, 1) for x in rs],
        }
        rows.append([tool, f"{s['pages']:,.0f}", f"{s['pages_per_s']:,.0f}", f"{s['wall_s']:.1f}",
                     f"{s['peak_rss_mb']:.0f}", f"{s['max_peak_rss_mb']:.0f}",
                     " · ".join(str(x) for x in s["rounds_pages_per_s"])])
    print()
    print(fmt_table(rows, ["tool", "HTML pages", "pages/s", "wall s", "peak RSS MB (median)",
                           "worst", "pages/s per round"]))
    if "wget" in summary:
        for tool in tools:
            if tool != "wget":
                print(f"{tool}/wget: "
                      f"peak RSS {ratio(summary[tool]['peak_rss_mb'], summary['wget']['peak_rss_mb']):.2f}x, "
                      f"pages/s {ratio(summary[tool]['pages_per_s'], summary['wget']['pages_per_s']):.2f}x")
    if "before" in summary and "crawltop" in summary:
        print(f"crawltop/before: "
              f"peak RSS {ratio(summary['crawltop']['peak_rss_mb'], summary['before']['peak_rss_mb']):.2f}x, "
              f"pages/s {ratio(summary['crawltop']['pages_per_s'], summary['before']['pages_per_s']):.2f}x")
    if "crawltop" in summary:
        peak = summary["crawltop"]["peak_rss_mb"]
        print(f"crawltop peak RSS {peak:.0f} MB: target <= {RSS_TARGET_MB:.0f} MB "
              f"{'met' if peak <= RSS_TARGET_MB else 'MISSED'}")
    out = Path(a.json) if a.json else work / "results.json"
    out.write_text(json.dumps({"site": a.site, "summary": summary, "runs": {
        t: [{"wall": x.wall, "cpu": x.cpu, "rss": x.maxrss_mb, "pages": x.pages, "rc": x.rc,
             "trace": x.extra.get("trace", [])[:: max(1, len(x.extra.get("trace", [])) // 200)]}
            for x in rs] for t, rs in results.items()}}, indent=1))
    print(f"figures: {out}")


if __name__ == "__main__":
    main()
