"""Link-heavy pages: where URL joining and de-duplication dominate.

    .venv/bin/python bench/links.py                    # 300 pages x ~6,000 links, 3 rounds
    .venv/bin/python bench/links.py --pages 500 --links 8000 --runs 5

The site (bench/_work/links-site/, served by nginx) is --pages pages of ~--links links
each, all pointing back into the same set of pages, so the crawl fetches exactly those
pages and spends its time on links. The href mix on every page:
  25% relative `p123.html`       10% `./p123.html`        10% `../links/p123.html`
  15% root-relative `/links/..`  10% absolute with host   10% `p123.html#s7` (fragment)
  10% external `https://siteN.example.org/a/J` (out of scope, many distinct)
   5% fragment only `#s3`         5% mailto:, javascript:, tel:
with whitespace around some hrefs and heavy repetition, as on real index pages.

crawltop (every feature on, robots off) and bench/bare.py (urljoin on every href) both
crawl it at concurrency 20. Per-link cost = wall time / links on the pages, in µs, and
the same after subtracting the start-up time, measured by crawling a one-page site with
no links. Also CPU µs per link. Ratio = crawltop pages/s / bare pages/s (target >= 1.5).
"""
from __future__ import annotations

import argparse
import json
import os
import random
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
    ensure_work,
    fmt_table,
    last_machine_busy,
    median,
    ratio,
    read_crawltop_jsonl,
    read_url_list,
    run_child,
    wait_quiet,
)

DEFAULT_PORT = 8766
TARGET = 1.5


def generate(site: Path, pages: int, links: int, port: int, seed: int = 7) -> dict:
    key = {"pages": pages, "links": links, "port": port, "seed": seed, "gen": 2}
    manifest = site / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("key") == key:
        return json.loads(manifest.read_text())
    if site.exists():
        shutil.rmtree(site)
    (site / "links").mkdir(parents=True)
    rng = random.Random(seed)
    base = f"http://127.0.0.1:{port}"
    total = 0
    for i in range(pages):
        out = []
        # every page links to its successor first, so the whole set is reachable
        hrefs = [f"p{(i + 1) % pages:04d}.html"]
        for _ in range(links - 1):
            t = f"p{rng.randrange(pages):04d}.html"
            k = rng.random()
            if k < 0.25:
                h = t
            elif k < 0.35:
                h = f"./{t}"
            elif k < 0.45:
                h = f"../links/{t}"
            elif k < 0.60:
                h = f"/links/{t}"
            elif k < 0.70:
                h = f"{base}/links/{t}"
            elif k < 0.80:
                h = f"{t}#s{rng.randrange(40)}"
            elif k < 0.90:
                h = f"https://site{rng.randrange(50)}.example.org/a/{rng.randrange(20000)}"
            elif k < 0.95:
                h = f"#s{rng.randrange(40)}"
            else:
                h = rng.choice(("mailto:someone@example.org", "javascript:void(0)", "tel:+15551234",
                                f"mailto:list{rng.randrange(30)}@example.org"))
            if rng.random() < 0.05:
                h = f"  {h} "
            hrefs.append(h)
        for j, h in enumerate(hrefs):
            out.append(f'<li><a href="{h}">link {j}</a></li>')
        total += len(hrefs)
        html = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>links " + str(i) +
                "</title></head><body><h1>Index " + str(i) + "</h1><ul>\n" + "\n".join(out) +
                "\n</ul></body></html>\n")
        (site / "links" / f"p{i:04d}.html").write_text(html)
    (site / "links" / "empty.html").write_text("<!DOCTYPE html><html><body><p>no links</p></body></html>\n")
    m = {"key": key, "pages": pages, "links": total}
    manifest.write_text(json.dumps(m))
    return m


def run(tool: str, root: str, out: Path, tag: str) -> tuple[float, float, float, set[str]]:
    log = open(out / f"{tag}.log", "w")
    try:
        if tool == "crawltop":
            jsonl = out / f"{tag}.jsonl"
            wall, cpu, rss, rc = run_child([str(CRAWLTOP), "crawl", root, "--headless", "-c", "20",
                                            "--no-robots", "--output", str(jsonl)],
                                           stdout=log, stderr=subprocess.STDOUT)
            html = read_crawltop_jsonl(jsonl)[0]
        else:
            urls = out / f"{tag}.txt"
            with open(out / f"{tag}.json", "w") as fh:
                wall, cpu, rss, rc = run_child([str(VENV_PY), str(BENCH / "bare.py"), root, "-c", "20",
                                                "--out", str(urls)], stdout=fh, stderr=log)
            html = read_url_list(urls)
        if rc != 0:
            print(f"  {tool} exited with {rc}; see {out / (tag + '.log')}", file=sys.stderr)
        return wall, cpu, rss, html
    finally:
        log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--links", type=int, default=6000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--tools", default="crawltop,bare")
    ap.add_argument("--quiet-wait", type=float, default=60.0,
                    help="before each run, wait up to this long for other load on the machine to settle")
    a = ap.parse_args()
    tools = [t for t in a.tools.split(",") if t]
    if "crawltop" in tools and not crawltop_works():
        print("crawltop CLI not usable yet: skipping it", file=sys.stderr)
        tools.remove("crawltop")

    site = ensure_work() / "links-site"
    m = generate(site, a.pages, a.links, a.port)
    out = ensure_work() / "links"
    out.mkdir(exist_ok=True)
    print(f"site: {m['pages']} pages, {m['links']} links ({m['links'] / m['pages']:.0f} per page); "
          f"concurrency 20; {a.runs} rounds; cores: {os.cpu_count()}")
    res: dict[str, list[dict]] = {t: [] for t in tools}
    with Nginx("links", f"root {site};", port=a.port) as ng:
        root = f"{ng.base}/links/p0000.html"
        empty = f"{ng.base}/links/empty.html"
        expected = {f"{ng.base}/links/p{i:04d}.html" for i in range(m["pages"])}
        for r in range(a.runs):
            for tool in (tools if r % 2 == 0 else tools[::-1]):
                wait_quiet(max_wait=a.quiet_wait)
                w0, c0, _, _ = run(tool, empty, out, f"{tool}-empty-{r}")
                ng0 = ng.cpu()
                wall, cpu, rss, html = run(tool, root, out, f"{tool}-{r}")
                others = max(0.0, last_machine_busy() - (cpu + ng.cpu() - ng0) / wall)
                d = {"wall": wall, "cpu": cpu, "rss": rss, "startup": w0, "startup_cpu": c0,
                     "pages": len(html), "missing": len(expected - html), "extra": len(html - expected),
                     "us_link": 1e6 * wall / m["links"],
                     "us_link_net": 1e6 * (wall - w0) / m["links"],
                     "cpu_us_link": 1e6 * cpu / m["links"],
                     "pages_per_s": len(html) / wall, "other_cores": others}
                res[tool].append(d)
                print(f"  round {r + 1} {tool:8s} {wall:6.2f} s (start-up {w0:.2f} s)  "
                      f"{d['pages_per_s']:6.1f} pages/s  "
                      f"{d['us_link']:5.2f} µs/link ({d['us_link_net']:5.2f} net, {d['cpu_us_link']:5.2f} cpu)  "
                      f"pages {d['pages']} (missing {d['missing']}, extra {d['extra']})  rss {rss:.0f} MB  "
                      f"other load {others:.2f} cores", flush=True)

    rows = []
    summary = {}
    for tool in tools:
        s = {k: median([x[k] for x in res[tool]]) for k in res[tool][0]}
        summary[tool] = s
        rows.append([tool, f"{s['pages_per_s']:.1f}", f"{s['wall']:.2f}", f"{s['startup']:.2f}", f"{s['us_link']:.2f}",
                     f"{s['us_link_net']:.2f}", f"{s['cpu_us_link']:.2f}", f"{s['rss']:.0f}", f"{s['pages']:.0f}",
                     f"{s['missing']:.0f}", f"{s['other_cores']:.2f}"])
    print()
    print(f"medians over {a.runs} rounds; {m['links']} links on {m['pages']} pages")
    print(fmt_table(rows, ["tool", "pages/s", "wall s", "start-up s", "µs/link", "µs/link net", "cpu µs/link",
                           "RSS MB", "pages", "missing", "other load"]))
    ratios = {}
    if "crawltop" in summary and "bare" in summary:
        ratios["pages_per_s"] = ratio(summary["crawltop"]["pages_per_s"], summary["bare"]["pages_per_s"])
        ratios["net_per_link"] = ratio(summary["bare"]["us_link_net"], summary["crawltop"]["us_link_net"])
        print(f"\ncrawltop/bare (pages/s): {ratios['pages_per_s']:.2f}x   target >= {TARGET}x: "
              f"{'met' if ratios['pages_per_s'] >= TARGET else 'MISSED'}")
        print(f"crawltop/bare (per-link cost, start-up removed): {ratios['net_per_link']:.2f}x")
    path = out / "results.json"
    path.write_text(json.dumps({"when": time.strftime("%Y-%m-%d %H:%M:%S"), "runs": a.runs, "links": m["links"],
                                "pages": m["pages"], "summary": summary, "ratios": ratios, "all": res}, indent=2))
    print(f"figures written to {path}")


if __name__ == "__main__":
    main()
