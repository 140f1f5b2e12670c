"""What archiving costs per page: `--warc` on the ~20,000-page nginx site,
before and after, side by side, plus the default `global` ignore set's cost.

    BENCH_CRAWLTOP_BEFORE=/path/to/main/venv/bin/crawltop .venv/bin/python bench/warc_cost.py --runs 3

Variants, interleaved in each round so machine noise spreads over all of them:
  before            the older build, no archive (BENCH_CRAWLTOP_BEFORE; skipped if unset)
  before --warc     the older build, one .warc.gz
  after             this build, no archive (the `global` ignore set on, the default)
  after -global     this build, --no-ignore-set global (what the default set costs)
  after --warc      this build: rotated files, revisits, CDXJ, and a URL done only once
                    its records are written (crash safety)
  after --no-dedup  as above without revisits
Each is a child process (wall from spawn to exit, CPU from wait4()). Printed: medians of
wall, pages/s, CPU and CPU per page, and the archive's bytes on disk.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402 (bench/ put on sys.path just above)
    CRAWLTOP,
    ensure_work,
    fmt_table,
    median,
    read_crawltop_jsonl,
    run_child,
    wait_quiet,
)
from nginx_site import DEFAULT_PORT, generate, serve, site_dir  # noqa: E402 (bench/ put on sys.path just above)

BEFORE = os.environ.get("BENCH_CRAWLTOP_BEFORE")


def variants() -> list[tuple[str, str, list[str]]]:
    out: list[tuple[str, str, list[str]]] = []
    if BEFORE:
        out += [("before", BEFORE, []), ("before --warc", BEFORE, ["--warc", "@W"])]
    out += [("after", str(CRAWLTOP), []), ("after -global", str(CRAWLTOP), ["--no-ignore-set", "global"]),
            ("after --warc", str(CRAWLTOP), ["--warc", "@W"]),
            ("after --no-dedup", str(CRAWLTOP), ["--warc", "@W", "--no-dedup"])]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-c", "--concurrency", type=int, default=20)
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    a = ap.parse_args()
    generate(site_dir(), port=a.port)
    out = ensure_work() / "warc_cost"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    results: dict[str, list[tuple[float, float, int, int]]] = {}
    with serve(site_dir(), a.port) as ng:
        root = ng.base + "/"
        for r in range(a.runs):
            for name, binary, extra in variants():
                tag = f"{name.replace(' ', '_').replace('-', '')}-{r}"
                adir = out / tag
                adir.mkdir()
                args = [x.replace("@W", str(adir / "site.warc.gz")) for x in extra]
                jsonl = adir / "records.jsonl"
                wait_quiet()
                with open(adir / "log.txt", "wb") as log:
                    wall, cpu, _rss, rc = run_child([binary, "crawl", root, "--headless", "-c", str(a.concurrency),
                                                     "--no-robots", "--output", str(jsonl), *args],
                                                    stdout=log, stderr=subprocess.STDOUT)
                html, _n, _info = read_crawltop_jsonl(jsonl)
                size = sum(p.stat().st_size for p in adir.iterdir() if ".warc" in p.name)
                results.setdefault(name, []).append((wall, cpu, len(html), size))
                print(f"round {r + 1} {name:16} rc={rc} wall {wall:6.2f}s cpu {cpu:6.2f}s pages {len(html)} "
                      f"archive {size / 1e6:7.1f} MB", flush=True)
    rows = []
    base = results.get("before") or results["after"]
    base_cpu_pp = median([c / max(1, p) for _w, c, p, _s in base]) * 1e6
    for name, runs in results.items():
        wall = median([w for w, _c, _p, _s in runs])
        cpu = median([c for _w, c, _p, _s in runs])
        pages = median([p for _w, _c, p, _s in runs])
        cpu_pp = median([c / max(1, p) for _w, c, p, _s in runs]) * 1e6
        size = median([s for _w, _c, _p, s in runs])
        rows.append([name, f"{wall:.2f}", f"{pages / wall:.0f}", f"{cpu:.2f}", f"{cpu_pp:.0f}",
                     f"{cpu_pp / base_cpu_pp:.2f}", f"{size / 1e6:.1f}"])
    print()
    print(fmt_table(rows, ["variant", "wall s", "pages/s", "CPU s", "CPU µs/page", "× base", "archive MB"]))


if __name__ == "__main__":
    main()
